// Package clip cuts text to a limit in bytes, as the apiserver and the
// kubelet count them, without splitting a character.
package clip

import "unicode/utf8"

// Mark ends text that was cut.
const Mark = "…"

// To returns s if it has at most n bytes, else as much of it as fits in n
// bytes with Mark after it, cut on a character's boundary; Mark alone if
// n leaves no room beside it.
func To(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n-len(Mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + Mark
}
