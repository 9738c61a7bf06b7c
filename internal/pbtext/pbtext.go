// Package pbtext writes values in protobuf's text format, for the config
// files TF Serving reads: the model config, the monitoring config, the
// batching parameters and the SSL config.
package pbtext

import (
	"fmt"
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
