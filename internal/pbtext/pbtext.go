// Package pbtext writes values in protobuf's text format, for the config
// files TF Serving reads: the model config, the monitoring config, the
// batching parameters and the SSL config.
package pbtext

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Quote quotes s as a text-format string: printable ASCII as it is,
// quotes and backslashes escaped, every other byte as an octal escape,
// which every protobuf text parser reads back byte for byte. A raw newline
// would end the string for the parser, so a PEM block's lines are escaped
// too.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/32 + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "\\%03o", c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// StringFields reads back the values of every string field named field
// in text that Quote wrote, at any depth: the base paths of a model
// config, for the fetch that must leave the models it serves alone. A
// value that does not unquote is left out.
func StringFields(text, field string) []string {
	re := regexp.MustCompile(`(?m)(?:^|[\s{])` + regexp.QuoteMeta(field) + `\s*:\s*("(?:[^"\\\n]|\\.)*")`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		// Quote's escapes (\" \\ and three octal digits) are Go's too.
		if s, err := strconv.Unquote(m[1]); err == nil {
			out = append(out, s)
		}
	}
	return out
}
