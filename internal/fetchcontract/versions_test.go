package fetchcontract

import (
	"slices"
	"testing"
)

func TestVersionsSelectAsTFServingsPolicies(t *testing.T) {
	found := []int64{3, 1, 10, 2, 3}
	for _, c := range []struct {
		v    Versions
		flag string
		want []int64
	}{
		{Versions{}, "all", []int64{1, 2, 3, 10}},
		{Versions{Latest: 1}, "latest:1", []int64{10}},
		{Versions{Latest: 2}, "latest:2", []int64{3, 10}},
		{Versions{Latest: 9}, "latest:9", []int64{1, 2, 3, 10}},
		{Versions{Specific: []int64{10, 2, 7}}, "2,7,10", []int64{2, 10}},
		{Versions{Specific: []int64{7}}, "7", []int64{}},
	} {
		if got := c.v.Select(found); !slices.Equal(got, c.want) {
			t.Errorf("%v selects %v of %v; want %v", c.v, got, found, c.want)
		}
		if got := c.v.String(); got != c.flag {
			t.Errorf("%+v is written %q; want %q", c.v, got, c.flag)
		}
		back, err := ParseVersions(c.flag)
		if err != nil {
			t.Fatalf("ParseVersions(%q): %v", c.flag, err)
		}
		if got := back.Select(found); !slices.Equal(got, c.want) {
			t.Errorf("%q read back selects %v; want %v", c.flag, got, c.want)
		}
	}
	if got := (Versions{}).Select(found); len(found) != 5 || found[0] != 3 || len(got) != 4 {
		t.Errorf("Select changed what it was given: %v", found)
	}
}

func TestMalformedVersionsAreRefused(t *testing.T) {
	for _, s := range []string{"latest:0", "latest:", "latest:x", "0", "1,,2", "-1", "1;2", "newest"} {
		if v, err := ParseVersions(s); err == nil {
			t.Errorf("ParseVersions(%q) = %+v; want an error", s, v)
		}
	}
}
