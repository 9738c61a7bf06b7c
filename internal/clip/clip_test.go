package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestToCutsOnACharactersBoundaryWithinTheLimit(t *testing.T) {
	cases := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven byte", 10, "eleven " + Mark},
		// "é" is 2 bytes: 7 bytes before the mark would split the fourth.
		{strings.Repeat("é", 6), 10, "ééé" + Mark},
		{strings.Repeat("é", 6), 11, "éééé" + Mark},
		{"anything", 2, Mark},
	}
	for _, c := range cases {
		got := To(c.s, c.n)
		if got != c.want {
			t.Errorf("To(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("To(%q, %d) = %q: not valid UTF-8", c.s, c.n, got)
		}
	}
}
