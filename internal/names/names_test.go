package names

import (
	"strings"
	"testing"
)

func TestJoinKeepsShortNamesAsTheyAre(t *testing.T) {
	for _, tc := range []struct {
		base   string
		suffix []string
		want   string
	}{
		{"resnet", nil, "resnet"},
		{"resnet", []string{"config"}, "resnet-config"},
		{"resnet", []string{"fetch", "0a1b2c3d"}, "resnet-fetch-0a1b2c3d"},
		{strings.Repeat("a", 63), nil, strings.Repeat("a", 63)},
	} {
		if got := Join(tc.base, tc.suffix...); got != tc.want {
			t.Errorf("Join(%q, %q) = %q, want %q", tc.base, tc.suffix, got, tc.want)
		}
	}
}

func TestLongNamesAreCutWithAHashOfTheWhole(t *testing.T) {
	base := strings.Repeat("m", 53) // the longest ModelServer name the CRD admits
	a := FetchJob(base, "00000001")
	b := FetchJob(base, "00000002")
	for _, n := range []string{a, b, Claim(base), ConfigMap(base)} {
		if len(n) > MaxLength {
			t.Errorf("%q is %d characters, want at most %d", n, len(n), MaxLength)
		}
		if !isDNSLabel(n) {
			t.Errorf("%q is not a DNS-1123 label", n)
		}
	}
	if a == b {
		t.Errorf("two fetch generations of one long name collide: %q", a)
	}
	if again := FetchJob(base, "00000001"); again != a {
		t.Errorf("not deterministic: %q then %q", a, again)
	}
	if !strings.HasPrefix(ConfigMap(base), strings.Repeat("m", 40)) {
		t.Errorf("cut name should keep the start of the name: %q", ConfigMap(base))
	}
}

func TestTruncateNeverEndsOnASeparator(t *testing.T) {
	name := strings.Repeat("a", 53) + "-" + strings.Repeat("b", 20)
	got := Truncate(name, 63)
	if strings.Contains(got, "--") || strings.HasSuffix(got, "-") || len(got) > 63 {
		t.Errorf("Truncate(%q) = %q", name, got)
	}
	if got := Truncate(strings.Repeat("a", 54)+"-bbbbbbbbbbbbbbb", 63); strings.Contains(got, "--") {
		t.Errorf("cut landed on a '-' and kept it: %q", got)
	}
}

func TestHashChangesWithEveryPart(t *testing.T) {
	if Hash("a", "bc") == Hash("ab", "c") {
		t.Error("parts are not separated in the hash")
	}
	if len(Hash("x")) != hashLength {
		t.Errorf("hash length %d, want %d", len(Hash("x")), hashLength)
	}
}

func isDNSLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
