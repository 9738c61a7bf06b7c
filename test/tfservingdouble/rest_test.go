package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// restFixture serves half_plus_two (versions 123 and 124, labelled),
// half_plus_three, and a model the double cannot compute.
func restFixture(t *testing.T) (*restAPI, *core) {
	t.Helper()
	other := t.TempDir()
	addVersion(t, other, "1")
	c, _ := newTestCore(t, true)
	mustApply(t, c, modelList(
		model("half", testModels(t, "saved_model_half_plus_two_2_versions"),
			`model_version_policy { all {} } version_labels { key: "stable" value: 123 } version_labels { key: "canary" value: 124 }`),
		model("three", testModels(t, "saved_model_half_plus_three"), ""),
		model("other", other, ""),
	))
	return &restAPI{core: c, metrics: c.metrics}, c
}

func serve(h http.Handler, method, path, body string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestModelStatusShape(t *testing.T) {
	api, _ := restFixture(t)
	w := serve(api, "GET", "/v1/models/half", "")
	want := `{
 "model_version_status": [
  {
   "version": "124",
   "state": "AVAILABLE",
   "status": {
    "error_code": "OK",
    "error_message": ""
   }
  },
  {
   "version": "123",
   "state": "AVAILABLE",
   "status": {
    "error_code": "OK",
    "error_message": ""
   }
  }
 ]
}`
	if w.Code != 200 || w.Body.String() != want || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("%d %q\n%s\nwant 200\n%s", w.Code, w.Header().Get("Content-Type"), w.Body, want)
	}
	w = serve(api, "GET", "/v1/models/half/versions/999", "")
	if want := "{\n    \"error\": \"Could not find version 999 of model half\"\n}"; w.Code != 404 || w.Body.String() != want {
		t.Errorf("%d\n%s\nwant 404\n%s", w.Code, w.Body, want)
	}
}

func TestREST(t *testing.T) {
	api, _ := restFixture(t)
	for _, tc := range []struct {
		method, path, body string
		code               int
		// want are parts of the body.
		want []string
	}{
		{"GET", "/v1/models/half/versions/123", "", 200, []string{`"version": "123"`, `"state": "AVAILABLE"`}},
		{"GET", "/v1/models/half/versions/000123", "", 200, []string{`"version": "123"`}},
		{"GET", "/V1/MODELS/half", "", 200, []string{`"version": "124"`}},
		{"GET", "/v1/models/ha%6Cf", "", 200, []string{`"version": "124"`}},
		// TF Serving ignores the label in a status request.
		{"GET", "/v1/models/half/labels/stable", "", 200, []string{`"version": "124"`, `"version": "123"`}},
		{"GET", "/v1/models/half/labels/nope", "", 200, []string{`"version": "124"`}},
		{"GET", "/v1/models/nope", "", 404, []string{`"error": "Could not find any versions of model nope"`}},
		{"GET", "/v1/models/nope/versions/1", "", 404, []string{`"error": "Could not find version 1 of model nope"`}},
		{"GET", "/v1/models", "", 400, []string{`"error": "Missing model name in request."`}},
		{"GET", "/v1/models/half/", "", 400, []string{`"error": "Malformed request: GET /v1/models/half/"`}},
		{"GET", "/v1/models/half/versions/x", "", 400, []string{`Malformed request`}},
		{"GET", "/v1/models/half/versions/99999999999999999999", "", 400, []string{`Failed to convert version: 99999999999999999999 to numeric.`}},
		{"GET", "/v1/models/half:predict", "", 400, []string{`Malformed request: GET /v1/models/half:predict`}},
		{"PUT", "/v1/models/half", "", 400, []string{`Malformed request: PUT /v1/models/half`}},
		{"POST", "/v1/models/half", "", 400, []string{`Malformed request: POST /v1/models/half`}},
		{"GET", "/healthz", "", 404, []string{"Not Found"}},
		{"GET", "/monitoring/prometheus/metrics", "", 404, []string{"Not Found"}},

		{"GET", "/v1/models/half/metadata", "", 200, []string{`"model_spec": {`, `"name": "half"`, `"signature_name": ""`, `"version": "124"`, `"metadata": {`, `not simulated`}},
		{"GET", "/v1/models/half/versions/123/metadata", "", 200, []string{`"version": "123"`}},
		{"GET", "/v1/models/half/labels/stable/metadata", "", 200, []string{`"version": "123"`}},
		{"GET", "/v1/models/half/labels/nope/metadata", "", 400, []string{`Unrecognized servable version label: nope`}},
		{"GET", "/v1/models/half/versions/1/metadata", "", 404, []string{`Servable not found for request: Specific(half, 1)`}},
		{"GET", "/v1/models/nope/metadata", "", 404, []string{`Servable not found for request: Latest(nope)`}},

		{"POST", "/v1/models/half:predict", `{"instances": [1.0, 2.0, 5.0]}`, 200, []string{"\"predictions\": [\n        2.5,\n        3.0,\n        4.5\n    ]"}},
		{"POST", "/v1/models/three:predict", `{"instances": [1.0, 2.0, 5.0]}`, 200, []string{"3.5", "4.0", "5.5"}},
		{"POST", "/v1/models/half/versions/123:predict", `{"signature_name": "serving_default", "instances": [[0.1], [-4]]}`, 200, []string{"2.05", "0.0"}},
		{"POST", "/v1/models/half/labels/canary:predict", `{"inputs": {"x": [3, 4]}}`, 200, []string{`"outputs": [`, "3.5", "4.0"}},
		{"POST", "/v1/models/half:predict", `{"instances": [{"x": 6}]}`, 200, []string{"5.0"}},
		{"POST", "/v1/models/half:predict", `{"instances": [1.0`, 400, []string{"JSON Parse error"}},
		{"POST", "/v1/models/half:predict", `{"instances": [1], "inputs": [1]}`, 400, []string{"exactly one"}},
		{"POST", "/v1/models/half:predict", `{"signature_name": "serving_default"}`, 400, []string{"exactly one"}},
		{"POST", "/v1/models/half:predict", `{"instances": ["a"]}`, 400, []string{"expected a number"}},
		{"POST", "/v1/models/half:predict", `{"instances": [{"y": 1}]}`, 400, []string{`only input is \"x\"`}},
		{"POST", "/v1/models/half:predict", `{"signature_name": "regress_x_to_y", "instances": [1]}`, 501, []string{"serving_default"}},
		{"POST", "/v1/models/half/labels/nope:predict", `{"instances": [1]}`, 400, []string{"Unrecognized servable version label: nope"}},
		{"POST", "/v1/models/nope:predict", `{"instances": [1]}`, 404, []string{"Servable not found for request: Latest(nope)"}},
		{"POST", "/v1/models/nope:predict", `not json`, 400, []string{"JSON Parse error"}},
		{"POST", "/v1/models/other:predict", `{"instances": [1]}`, 501, []string{"does not execute TensorFlow graphs"}},
		{"POST", "/v1/models/half:classify", `{"examples": []}`, 501, []string{"does not simulate the classify API"}},
		{"POST", "/v1/models/nope:regress", `{"examples": []}`, 404, []string{"Latest(nope)"}},
		{"POST", "/v1/models/half:PREDICT", `{"instances": [1]}`, 400, []string{"Malformed request: POST /v1/models/half:PREDICT"}},
	} {
		w := serve(api, tc.method, tc.path, tc.body)
		if w.Code != tc.code {
			t.Errorf("%s %s: %d, want %d\n%s", tc.method, tc.path, w.Code, tc.code, w.Body)
			continue
		}
		var v any
		if strings.HasPrefix(tc.path, "/v1/") || strings.HasPrefix(tc.path, "/V1/") {
			if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
				t.Errorf("%s %s: body is not JSON: %v\n%s", tc.method, tc.path, err, w.Body)
			}
		}
		for _, want := range tc.want {
			if !strings.Contains(w.Body.String(), want) {
				t.Errorf("%s %s: body lacks %q:\n%s", tc.method, tc.path, want, w.Body)
			}
		}
	}
}

func TestCORS(t *testing.T) {
	api, _ := restFixture(t)
	if w := serve(api, "GET", "/v1/models/half", ""); w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Error("CORS headers without --rest_api_enable_cors_support")
	}
	api.cors = true
	w := serve(api, "GET", "/v1/models/half", "")
	if w.Header().Get("Access-Control-Allow-Origin") != "*" || w.Header().Get("Access-Control-Allow-Methods") != "POST, GET" {
		t.Errorf("CORS headers: %v", w.Header())
	}
	if w := serve(api, "OPTIONS", "/v1/models/half:predict", "", "Origin", "https://app.example"); w.Code != 200 || w.Body.Len() != 0 {
		t.Errorf("preflight: %d %s", w.Code, w.Body)
	}
	if w := serve(api, "OPTIONS", "/v1/models/half:predict", ""); w.Code != 400 || !strings.Contains(w.Body.String(), "Origin header is missing in CORS preflight") {
		t.Errorf("preflight without origin: %d %s", w.Code, w.Body)
	}
}

// TestReadinessBeforeAVersionIsAvailable: the readiness probe asks
// GET /v1/models/<name>, which must fail until the model has a version
// AVAILABLE. (Before the first config's models are loaded, the port is
// not even open: see TestPortsOpenOnceTheModelsAreLoaded.)
func TestReadinessBeforeAVersionIsAvailable(t *testing.T) {
	api, c := restFixture(t)
	late := t.TempDir()
	cfg, err := parseModelServerConfig(modelList(
		model("half", testModels(t, "saved_model_half_plus_two_2_versions"), ""),
		model("late", late, ""),
	))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.reloadConfig(context.Background(), cfg) }()
	for range 3 {
		c.pollFileSystem()
		if w := serve(api, "GET", "/v1/models/late", ""); w.Code != 404 || !strings.Contains(w.Body.String(), "Could not find any versions of model late") {
			t.Fatalf("readiness of a model without versions: %d %s", w.Code, w.Body)
		}
		time.Sleep(5 * time.Millisecond)
	}
	addVersion(t, late, "1")
	c.pollFileSystem()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w := serve(api, "GET", "/v1/models/late", ""); w.Code != 200 || !strings.Contains(w.Body.String(), `"state": "AVAILABLE"`) {
		t.Errorf("readiness once loaded: %d %s", w.Code, w.Body)
	}
}

func TestModelsAreRecognizedByContentOrName(t *testing.T) {
	for _, tc := range []struct {
		dir   string
		arith arithmetic
	}{
		{filepath.Join(testModels(t, "saved_model_half_plus_two_2_versions"), "00000124"), arithmetic{true, 2}},
		{filepath.Join(testModels(t, "saved_model_half_plus_two_cpu"), "00000123"), arithmetic{true, 2}},
		{filepath.Join(testModels(t, "saved_model_half_plus_three"), "00000123"), arithmetic{true, 3}},
		{addVersion(t, filepath.Join(t.TempDir(), "my_half_plus_three"), "1"), arithmetic{true, 3}},
		{addVersion(t, filepath.Join(t.TempDir(), "half_plus_two"), "1"), arithmetic{true, 2}},
		{addVersion(t, t.TempDir(), "1"), arithmetic{}},
	} {
		if got, err := loadSavedModel(tc.dir); err != nil || got != tc.arith {
			t.Errorf("%s: %+v, %v; want %+v", tc.dir, got, err, tc.arith)
		}
	}
}
