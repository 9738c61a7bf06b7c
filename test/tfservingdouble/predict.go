package main

// Predictions for the two arithmetic models of TF Serving's test data:
// half_plus_two computes y = 0.5*x + 2, half_plus_three y = 0.5*x + 3.
// The double runs no TensorFlow graph; every other model answers 501.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// arithmetic is what a known test model computes: y = 0.5*x + offset.
type arithmetic struct {
	known  bool
	offset float32
}

// knownSavedModels are the SHA-256 digests of the saved_model.pb files of
// TF Serving's test models (../shared/testdata/tf-serving), so that they
// are recognized wherever the operator copies them, whatever the
// directory is called.
var knownSavedModels = map[string]arithmetic{
	"4e250217d66c0e9b532b9384bad32fafb6a286fec5a67e2e457925b994473daa": {true, 2}, // saved_model_half_plus_two_2_versions
	"e233fdf986e74feba2329fd68f5fc18ebbde977a35e32080eb81a9a19ce0e02f": {true, 2}, // saved_model_half_plus_two_cpu
	"0f94ab55b0dbabaccfc4b7485f66ece21b9aec92f870fa22f328c79adc67d70a": {true, 3}, // saved_model_half_plus_three
}

// loadSavedModel is the double's model load: the version directory must
// hold a SavedModel file, and the model is recognized by that file's
// digest or, failing that, by its base path's name.
func loadSavedModel(dir string) (arithmetic, error) {
	for _, f := range savedModelFiles {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		sum := sha256.Sum256(data)
		if a, ok := knownSavedModels[hex.EncodeToString(sum[:])]; ok {
			return a, nil
		}
		base := filepath.Dir(dir)
		switch {
		case strings.Contains(base, "half_plus_three"):
			return arithmetic{true, 3}, nil
		case strings.Contains(base, "half_plus_two"):
			return arithmetic{true, 2}, nil
		}
		return arithmetic{}, nil
	}
	return arithmetic{}, errorf(codeNotFound, "Could not find SavedModel .pb or .pbtxt at supplied export directory path: %s", dir)
}

// predictRequest is the body of :predict, in either of TF Serving's
// formats: row ("instances") or columnar ("inputs").
type predictRequest struct {
	SignatureName *string         `json:"signature_name"`
	Instances     json.RawMessage `json:"instances"`
	Inputs        json.RawMessage `json:"inputs"`
}

// parsePredictRequest checks the body before the model is looked up, as
// TF Serving does: a malformed body is a 400 even for an unknown model.
func parsePredictRequest(body []byte) (predictRequest, error) {
	var req predictRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		return req, errorf(codeInvalidArgument, "JSON Parse error: %v", err)
	}
	if (req.Instances == nil) == (req.Inputs == nil) {
		return req, errorf(codeInvalidArgument, "JSON Value: %s Missing 'instances' or 'inputs' key, or both are set: a request needs exactly one", strings.TrimSpace(string(body)))
	}
	return req, nil
}

// predict answers a parsed request for a servable.
func predict(s servable, req predictRequest) ([]byte, error) {
	if !s.arith.known {
		return nil, errorf(codeUnimplemented, "tfservingdouble does not execute TensorFlow graphs: model %s version %d is not one of the half_plus_two/half_plus_three test models it computes", s.name, s.version)
	}
	if req.SignatureName != nil && *req.SignatureName != "" && *req.SignatureName != "serving_default" {
		return nil, errorf(codeUnimplemented, "tfservingdouble computes only the serving_default signature, not %q", *req.SignatureName)
	}
	in, key := req.Instances, "predictions"
	if in == nil {
		in, key = req.Inputs, "outputs"
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, errorf(codeInvalidArgument, "JSON Parse error: %v", err)
	}
	out, err := s.arith.apply(tree)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(map[string]any{key: out}, "", "    ")
}

// apply maps the model over a tensor given as nested lists of numbers.
// The models have one input, x, which a request may also name.
func (a arithmetic) apply(v any) (any, error) {
	switch v := v.(type) {
	case json.Number:
		x, err := strconv.ParseFloat(string(v), 32)
		if err != nil {
			return nil, errorf(codeInvalidArgument, "Value %s is not a float", v)
		}
		return tfFloat(0.5*float32(x) + a.offset), nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			var err error
			if out[i], err = a.apply(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		x, ok := v["x"]
		if !ok || len(v) != 1 {
			return nil, errorf(codeInvalidArgument, "the model's only input is \"x\"")
		}
		return a.apply(x)
	default:
		return nil, errorf(codeInvalidArgument, "expected a number or a list of numbers for input x, got %v", v)
	}
}

// tfFloat is a DT_FLOAT output: written in its shortest float32 form,
// with ".0" on whole numbers as TF Serving writes them.
type tfFloat float32

var _ json.Marshaler = tfFloat(0)

func (f tfFloat) MarshalJSON() ([]byte, error) {
	x := float64(f)
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return []byte(strconv.Quote(strconv.FormatFloat(x, 'g', -1, 32))), nil
	}
	s := strconv.FormatFloat(x, 'g', -1, 32)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return []byte(s), nil
}
