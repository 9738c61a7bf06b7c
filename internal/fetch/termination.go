package fetch

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

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
	line := string(fe.Reason) + ": " + strings.Join(strings.Fields(fe.Message), " ")
	if len(line) > maxMessageLength {
		cut := maxMessageLength
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut] + "…"
	}
	return line
}
