package main

// The REST API on --rest_api_port, with TF Serving's paths, JSON shapes,
// errors and HTTP statuses. Paths are matched as TF Serving matches them
// (case-insensitively, on the undecoded path, with no redirects or path
// cleaning), which is why this is not an http.ServeMux.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var (
	apiPath     = regexp.MustCompile(`(?i)^/v1/`)
	predictPath = regexp.MustCompile(`(?i)^/v1/models/([^/:]+)(?:/versions/(\d+)|/labels/([^/:]+))?:(classify|regress|predict)$`)
	statusPath  = regexp.MustCompile(`(?i)^/v1/models(?:/([^/:]+))?(?:/versions/(\d+)|/labels/([^/:]+))?(?:/(metadata))?$`)
	corsOrigin  = regexp.MustCompile(`https?://`)
)

// maxBody bounds a request body; TF Serving has no such bound, but the
// test models take a handful of numbers.
const maxBody = 64 << 20

type restAPI struct {
	core    *core
	metrics *metrics
	cors    bool
	// metricsPath is the Prometheus path, "" without a monitoring config
	// that enables it.
	metricsPath string
}

func (a *restAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	if a.metricsPath != "" && path == a.metricsPath {
		w.Header().Set("Content-Type", "text/plain")
		var b strings.Builder
		a.metrics.write(&b)
		_, _ = io.WriteString(w, b.String())
		return
	}
	if !apiPath.MatchString(path) {
		http.Error(w, "<HTML><HEAD><TITLE>404 Not Found</TITLE></HEAD><BODY><H1>Not Found</H1></BODY></HTML>", http.StatusNotFound)
		return
	}
	start := time.Now()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var model, method string
	var out []byte
	switch {
	case err != nil:
		err = errorf(codeInvalidArgument, "Could not read the request body: %v", err)
	case r.Method == http.MethodOptions:
		if !corsOrigin.MatchString(r.Header.Get("Origin")) {
			err = errorf(codeFailedPrecondition, "Origin header is missing in CORS preflight")
		}
	default:
		out, model, method, err = a.process(r.Method, path, body)
	}
	w.Header().Set("Content-Type", "application/json")
	if a.cors {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Allow-Methods", "POST, GET")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
	}
	if err != nil {
		out, _ = json.MarshalIndent(map[string]string{"error": messageOf(err)}, "", "    ")
	} else {
		a.metrics.observeLatency(model, method, "REST", time.Since(start).Microseconds())
	}
	a.metrics.countRequest(model, codeOf(err))
	w.WriteHeader(codeOf(err).httpStatus())
	_, _ = w.Write(out)
}

// process answers an API request: the body, and the model name and
// method for the metrics.
func (a *restAPI) process(httpMethod, path string, body []byte) (out []byte, model, method string, err error) {
	malformed := errorf(codeInvalidArgument, "Malformed request: %s %s", httpMethod, path)
	var m []string
	switch httpMethod {
	case http.MethodPost:
		m = predictPath.FindStringSubmatch(path)
	case http.MethodGet:
		m = statusPath.FindStringSubmatch(path)
	}
	if m == nil {
		return nil, "", "", malformed
	}
	if model, err = url.PathUnescape(m[1]); err != nil {
		return nil, m[1], "", errorf(codeInvalidArgument, "Failed to decode model name:%s", m[1])
	}
	var version *int64
	if m[2] != "" {
		v, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			return nil, model, "", errorf(codeInvalidArgument, "Failed to convert version: %s to numeric.", m[2])
		}
		version = &v
	}
	var label *string
	if m[3] != "" {
		l, err := url.PathUnescape(m[3])
		if err != nil {
			return nil, model, "", errorf(codeInvalidArgument, "Failed to decode model version label:%s", m[3])
		}
		label = &l
	}
	if httpMethod == http.MethodPost {
		// The method is matched case-insensitively but dispatched as
		// written, so :PREDICT is malformed: TF Serving does the same.
		method = m[4]
		switch method {
		case "predict":
			out, err = a.predict(model, version, label, body)
		case "classify", "regress":
			if _, err = a.core.handle(model, version, label); err == nil {
				err = errorf(codeUnimplemented, "tfservingdouble does not simulate the %s API", method)
			}
		default:
			err = malformed
		}
		return out, model, method, err
	}
	if model == "" {
		return nil, model, "", errorf(codeInvalidArgument, "Missing model name in request.")
	}
	if m[4] == "metadata" {
		out, err = a.metadata(model, version, label)
	} else {
		out, err = a.status(model, version)
	}
	return out, model, "", err
}

type statusJSON struct {
	Version string `json:"version"`
	State   string `json:"state"`
	Status  struct {
		ErrorCode    string `json:"error_code"`
		ErrorMessage string `json:"error_message"`
	} `json:"status"`
}

// status is GetModelStatus. A label in the path does not narrow the
// answer: TF Serving lists every version for /labels/<l> too.
func (a *restAPI) status(model string, version *int64) ([]byte, error) {
	reports, err := a.core.modelStatus(model, version)
	if err != nil {
		return nil, err
	}
	list := make([]statusJSON, len(reports))
	for i, r := range reports {
		list[i].Version = strconv.FormatInt(r.version, 10)
		list[i].State = r.state.String()
		list[i].Status.ErrorCode = codeOf(r.err).String()
		list[i].Status.ErrorMessage = messageOf(r.err)
	}
	return json.MarshalIndent(map[string]any{"model_version_status": list}, "", " ")
}

// metadata is GetModelMetadata without the signatures, which the double
// cannot read: it says so rather than inventing them.
func (a *restAPI) metadata(model string, version *int64, label *string) ([]byte, error) {
	s, err := a.core.handle(model, version, label)
	if err != nil {
		return nil, err
	}
	var out struct {
		ModelSpec struct {
			Name          string `json:"name"`
			SignatureName string `json:"signature_name"`
			Version       string `json:"version"`
		} `json:"model_spec"`
		Metadata map[string]string `json:"metadata"`
	}
	out.ModelSpec.Name = s.name
	out.ModelSpec.Version = strconv.FormatInt(s.version, 10)
	out.Metadata = map[string]string{
		"tfservingdouble": fmt.Sprintf("signature_def is not simulated: tfservingdouble does not read %s", s.dir),
	}
	return json.MarshalIndent(out, "", " ")
}

func (a *restAPI) predict(model string, version *int64, label *string, body []byte) ([]byte, error) {
	req, err := parsePredictRequest(body)
	if err != nil {
		return nil, err
	}
	s, err := a.core.handle(model, version, label)
	if err != nil {
		return nil, err
	}
	return predict(s, req)
}
