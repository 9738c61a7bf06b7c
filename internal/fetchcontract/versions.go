package fetchcontract

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Versions is which of a model's version directories a fetch copies:
// those its version policy has TF Serving serve. The zero value is all.
// The fetch reads it as its --versions flag (String, ParseVersions).
type Versions struct {
	// Latest, when above 0, is how many of the highest versions.
	Latest int
	// Specific, when Latest is 0, are the versions by number.
	Specific []int64
}

// All says that v takes every version.
func (v Versions) All() bool {
	return v.Latest <= 0 && len(v.Specific) == 0
}

// Select is what v takes of the versions found, in ascending order, as
// TF Serving's version policies choose: the highest Latest, or those of
// Specific that are there.
func (v Versions) Select(found []int64) []int64 {
	sorted := slices.Compact(slices.Sorted(slices.Values(found)))
	switch {
	case v.Latest > 0:
		return slices.Clone(sorted[max(0, len(sorted)-v.Latest):])
	case len(v.Specific) > 0:
		return slices.DeleteFunc(sorted, func(n int64) bool { return !slices.Contains(v.Specific, n) })
	}
	return sorted
}

// String is v as the --versions flag takes it: "latest:N", the versions
// comma-separated in ascending order, or "all".
func (v Versions) String() string {
	switch {
	case v.Latest > 0:
		return "latest:" + strconv.Itoa(v.Latest)
	case len(v.Specific) > 0:
		return JoinVersions(slices.Compact(slices.Sorted(slices.Values(v.Specific))), ",")
	}
	return "all"
}

// JoinVersions writes versions, as given, separated by sep.
func JoinVersions(versions []int64, sep string) string {
	s := make([]string, len(versions))
	for i, n := range versions {
		s[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(s, sep)
}

// ParseVersions reads String's forms; "" is all.
func ParseVersions(s string) (Versions, error) {
	if s == "" || s == "all" {
		return Versions{}, nil
	}
	if n, ok := strings.CutPrefix(s, "latest:"); ok {
		latest, err := strconv.Atoi(n)
		if err != nil || latest < 1 {
			return Versions{}, fmt.Errorf("%q: latest:N takes a count of at least 1", s)
		}
		return Versions{Latest: latest}, nil
	}
	var v Versions
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(part, 10, 64)
		if err != nil || n < 1 {
			return Versions{}, fmt.Errorf("%q: want latest:N, all, or versions from 1 up, comma-separated", s)
		}
		v.Specific = append(v.Specific, n)
	}
	return v, nil
}
