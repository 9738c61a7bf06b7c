package fetch

import (
	"encoding/json"
	"regexp"
	"strings"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/clip"
)

// The termination message is what a fetch pod tells the operator. Its
// writer (TerminationMessage, in the fetch pod) and its readers
// (ParseSummary and ParseFailure, in the operator) live here together, so
// that the format has one definition.

// maxMessageLength bounds a failure's termination message; the kubelet
// keeps 4 KiB of it, the operator's status less.
const maxMessageLength = 1000

// TerminationMessage is the one line a fetch leaves for the operator: the
// summary as JSON on success, "<Reason>: <message>" on failure.
func TerminationMessage(sum Summary, err error) string {
	if err == nil {
		if sum.Versions == nil {
			sum.Versions = []int64{}
		}
		b, _ := json.Marshal(sum)
		return string(b)
	}
	fe := AsError(err)
	return clip.To(fe.Reason+": "+strings.Join(strings.Fields(fe.Message), " "), maxMessageLength)
}

// ParseSummary reads the summary from a successful fetch's termination
// message; false if the message is not one.
func ParseSummary(termination string) (Summary, bool) {
	s := Summary{Received: -1}
	if err := json.Unmarshal([]byte(strings.TrimSpace(termination)), &s); err != nil {
		return Summary{}, false
	}
	return s, true
}

// failurePattern is a failure's termination message: "NotFound: s3://...".
// The reason is a CamelCase word so that what a crashed fetcher printed
// instead ("panic: ...") is not taken for one.
var failurePattern = regexp.MustCompile(`^([A-Z][A-Za-z]{2,40}):\s*(.*)$`)

// ParseFailure splits a failed fetch's termination message into a
// condition reason and a message. A fetcher that died before writing one
// leaves other text, or none: that is a FetchFailed with that text, else
// with the Job's own failure message (jobMessage), else a generic one.
func ParseFailure(termination, jobMessage string) (reason, message string) {
	line := strings.TrimSpace(firstLineOf(termination))
	if m := failurePattern.FindStringSubmatch(line); m != nil {
		return m[1], m[2]
	}
	if line != "" {
		return servingv1alpha1.ReasonFetchFailed, line
	}
	if jobMessage != "" {
		return servingv1alpha1.ReasonFetchFailed, jobMessage
	}
	return servingv1alpha1.ReasonFetchFailed, "the model-fetch Job failed"
}
