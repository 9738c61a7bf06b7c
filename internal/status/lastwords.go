package status

import (
	"regexp"
	"strings"

	"github.com/modelserver-dev/modelserver-operator/internal/clip"
)

// failedStart begins the line TF Serving prints to stdout, its exit code
// 255, when its models or flags keep it from starting: its own summary of
// what the lines before it logged.
const failedStart = "Failed to start server."

// logPrefix is what TensorFlow's logging puts before each message: a
// time, the severity letter (group 1 or 2 or 3) and the source file, in
// TF Serving's own layout ("2026-12-04 15:04:05.123456: E
// tensorflow_serving/...cc:40] "), in glog's and absl's ("E1204
// 15:04:05.123456    7 server.cc:40] ", "E0000 00:00:1764860645.123456
// 7 server.cc:40] "), or with no time at all ("F main.cc:445] ").
var logPrefix = regexp.MustCompile(`^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([IWEF]) |([IWEF])\d{4} \d\d:\d\d:[\d.]+ +\d+ |([IWEF]) )[^\s\]]+\] ?`)

// maxWords is how much of a container's last words a status quotes.
const maxWords = 300

// lastWords is the line of a container's termination message that says
// why it exited, without the time its log put before it, or "". With
// FallbackToLogsOnError the message is the tail of its log: the line is
// TF Serving's "Failed to start server. Error: ..." if there is one, else
// the last one logged as an error or fatal, else the last line. The same
// exit says the same words every time, so that quoting them costs a crash
// loop no status write.
func lastWords(message string) string {
	lines := strings.Split(strings.TrimSpace(message), "\n")
	pick := ""
	for i := len(lines) - 1; i >= 0 && pick == ""; i-- {
		if line := strings.TrimSpace(lines[i]); strings.HasPrefix(line, failedStart) {
			pick = line
		}
	}
	for i := len(lines) - 1; i >= 0 && pick == ""; i-- {
		if m := logPrefix.FindStringSubmatch(lines[i]); m != nil && strings.ContainsAny(m[1]+m[2]+m[3], "EF") {
			pick = lines[i][len(m[0]):]
		}
	}
	for i := len(lines) - 1; i >= 0 && pick == ""; i-- {
		pick = strings.TrimSpace(logPrefix.ReplaceAllString(lines[i], ""))
	}
	return clip.To(strings.TrimSpace(pick), maxWords)
}
