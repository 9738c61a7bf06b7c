package main

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func TestMetricsParseAndCount(t *testing.T) {
	api, c := restFixture(t)
	api.metricsPath = "/monitoring/prometheus/metrics"
	srv := httptest.NewServer(api)
	defer srv.Close()

	// A load that fails: the version went away before it was loaded.
	other := filepath.Dir(c.states["other"][1].dir)
	c.mu.Lock()
	c.setAspired("other", map[int64]string{1: filepath.Join(other, "1"), 2: filepath.Join(other, "2")})
	c.reconcile("other")
	c.mu.Unlock()

	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/models/half", ""},
		{"GET", "/v1/models/half/versions/123", ""},
		{"POST", "/v1/models/half:predict", `{"instances": [1]}`},
		{"GET", "/v1/models/nope", ""},
		{"DELETE", "/v1/models/half", ""},
		{"GET", "/not/an/api", ""}, // not an API request: not counted
	} {
		req, _ := http.NewRequest(r.method, srv.URL+r.path, strings.NewReader(r.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}

	resp, err := http.Get(srv.URL + "/monitoring/prometheus/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("%d %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if _, err := promlint.New(strings.NewReader(string(body))).Lint(); err != nil {
		t.Fatalf("not the Prometheus text format: %v\n%s", err, body)
	}

	half := testModels(t, "saved_model_half_plus_two_2_versions")
	three := testModels(t, "saved_model_half_plus_three")
	want := map[string]string{
		`:tensorflow:serving:request_count{model_name="",status="INVALID_ARGUMENT"}`:                          "1",
		`:tensorflow:serving:request_count{model_name="half",status="OK"}`:                                    "3",
		`:tensorflow:serving:request_count{model_name="nope",status="NOT_FOUND"}`:                             "1",
		`:tensorflow:cc:saved_model:load_attempt_count{model_path="` + half + `/00000123",status="success"}`:  "1",
		`:tensorflow:cc:saved_model:load_attempt_count{model_path="` + half + `/00000124",status="success"}`:  "1",
		`:tensorflow:cc:saved_model:load_attempt_count{model_path="` + three + `/00000123",status="success"}`: "1",
		`:tensorflow:cc:saved_model:load_attempt_count{model_path="` + other + `/1",status="success"}`:        "1",
		`:tensorflow:cc:saved_model:load_attempt_count{model_path="` + other + `/2",status="fail"}`:           "1",
	}
	got := samples(string(body), ":tensorflow:serving:request_count{", ":tensorflow:cc:saved_model:load_attempt_count{")
	if !maps.Equal(got, want) {
		t.Errorf("samples\n%v\nwant\n%v\nin\n%s", got, want, body)
	}
	for _, line := range []string{
		"# TYPE :tensorflow:serving:request_latency histogram\n",
		`:tensorflow:serving:request_latency_count{model_name="half",API="",entrypoint="REST"} 2` + "\n",
		`:tensorflow:serving:request_latency_count{model_name="half",API="predict",entrypoint="REST"} 1` + "\n",
		`:tensorflow:serving:request_latency_bucket{model_name="half",API="predict",entrypoint="REST",le="+Inf"} 1` + "\n",
		`,le="10"}`, `,le="32.4"}`, `,le="1.47476e+09"}`,
		`:tensorflow:cc:saved_model:load_latency{model_path="` + three + `/00000123"} `,
	} {
		if !strings.Contains(string(body), line) {
			t.Errorf("metrics lack %q:\n%s", line, body)
		}
	}
}

func TestMetricsBeforeAnyEvent(t *testing.T) {
	var b strings.Builder
	newMetrics().write(&b)
	want := "# TYPE :tensorflow:cc:saved_model:load_attempt_count counter\n" +
		"# TYPE :tensorflow:cc:saved_model:load_latency counter\n" +
		"# TYPE :tensorflow:serving:request_count counter\n" +
		"# TYPE :tensorflow:serving:request_latency histogram\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	if _, err := promlint.New(strings.NewReader(want)).Lint(); err != nil {
		t.Error(err)
	}
}

func TestMetricLabelsAreEscaped(t *testing.T) {
	m := newMetrics()
	m.countRequest("a\"b\\c\nd", codeNotFound)
	var b strings.Builder
	m.write(&b)
	if !strings.Contains(b.String(), `{model_name="a\"b\\c\nd",status="NOT_FOUND"} 1`) {
		t.Errorf("label not escaped:\n%s", b.String())
	}
	if _, err := promlint.New(strings.NewReader(b.String())).Lint(); err != nil {
		t.Error(err)
	}
}

// samples maps the series of the text format that start with one of
// prefixes to their values. The format itself is checked by promlint.
func samples(text string, prefixes ...string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		series, value, ok := strings.Cut(line, "} ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out[series+"}"] = value
			}
		}
	}
	return out
}
