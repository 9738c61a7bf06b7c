package values

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// gatewayMatch says that one of matches takes path as the Gateway API
// matches: Exact the whole path, PathPrefix by whole path elements.
func gatewayMatch(matches []PathMatch, path string) bool {
	for _, m := range matches {
		switch m.Type {
		case "Exact":
			if path == m.Value {
				return true
			}
		case "PathPrefix":
			prefix := strings.TrimSuffix(m.Value, "/")
			if path == prefix || strings.HasPrefix(path, prefix+"/") {
				return true
			}
		}
	}
	return false
}

func TestTheHTTPRouteTakesItsModelsRESTAPIAlone(t *testing.T) {
	matches := modelMatches([]Model{{Name: "m"}, {Name: "resnet.v2"}})
	for _, path := range []string{
		"/v1/models/m", "/v1/models/m/metadata", "/v1/models/m/versions/3", "/v1/models/m/versions/3/metadata",
		"/v1/models/m:predict", "/v1/models/m:classify", "/v1/models/m:regress",
		"/v1/models/m/versions/3:predict", "/v1/models/m/labels/stable:classify",
		"/v1/models/resnet.v2:predict", "/v1/models/resnet.v2/labels/canary:predict",
	} {
		if !gatewayMatch(matches, path) {
			t.Errorf("%s is not routed", path)
		}
	}
	// Another ModelServer's models on the same hostname, and the metrics.
	for _, path := range []string{
		"/v1/models/mnist", "/v1/models/mnist:predict", "/v1/models/m2/metadata", "/v1/models/resnet:predict",
		"/v1/models", "/monitoring/prometheus/metrics", "/",
	} {
		if gatewayMatch(matches, path) {
			t.Errorf("%s is routed to this ModelServer", path)
		}
	}
	if len(matches) != 8 {
		t.Errorf("%d matches, want 4 a model: 16 models must fit in one rule's 64", len(matches))
	}
}

// The HTTPRoute's request timeout is written as the Gateway API reads
// durations (GEP-2257), each part of at most 5 digits, however the spec
// wrote it: Go's "1.5s" would be refused.
func TestARequestTimeoutIsWrittenAsTheGatewayAPIReadsIt(t *testing.T) {
	gatewayAPI := regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)
	for in, want := range map[string]string{
		"90s": "1m30s", "2m": "2m", "1500ms": "1s500ms", "0s": "0s", "1h500ms": "1h500ms", "99999h59m59s999ms": "99999h59m59s999ms",
		"99999s": "27h46m39s",
	} {
		d, err := time.ParseDuration(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := gatewayDuration(d); got != want || !gatewayAPI.MatchString(got) {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}
