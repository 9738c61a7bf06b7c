package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// TestReadsWhatTheOperatorWrites parses the model config the operator's
// own writer produces, for every policy and with labels and awkward
// names: the double must accept exactly what the operator writes.
func TestReadsWhatTheOperatorWrites(t *testing.T) {
	for _, tc := range []struct {
		name   string
		entry  values.ModelEntry
		policy versionPolicy
	}{
		{"default policy", values.ModelEntry{Name: "resnet", BasePath: "/models/gen00001"}, versionPolicy{kind: policyLatest, latest: 1}},
		{"latest 3", values.ModelEntry{Name: "resnet", BasePath: "/models/g", Policy: &servingv1alpha1.VersionPolicy{Latest: &servingv1alpha1.LatestVersions{NumVersions: 3}}},
			versionPolicy{kind: policyLatest, latest: 3}},
		{"specific", values.ModelEntry{Name: "resnet", BasePath: "/models/g", Policy: &servingv1alpha1.VersionPolicy{Specific: &servingv1alpha1.SpecificVersions{Versions: []int64{1, 2}}}},
			versionPolicy{kind: policySpecific, specific: []int64{1, 2}}},
		{"all", values.ModelEntry{Name: "resnet", BasePath: "/models/g", Policy: &servingv1alpha1.VersionPolicy{All: &servingv1alpha1.AllVersions{}}},
			versionPolicy{kind: policyAll}},
		{"escaped name and labels", values.ModelEntry{Name: "a\"b\\c\nd}é", BasePath: "/models/x y", Labels: map[string]int64{"stable": 1, "canary": 2}},
			versionPolicy{kind: policyLatest, latest: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := values.ModelConfig([]values.ModelEntry{tc.entry, {Name: "second", BasePath: "/models/second"}})
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := parseModelServerConfig(src)
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			labels := tc.entry.Labels
			if labels == nil {
				labels = map[string]int64{}
			}
			want := serverConfig{set: true, models: []modelConfig{
				{name: tc.entry.Name, basePath: tc.entry.BasePath, platform: "tensorflow", policy: tc.policy, labels: labels},
				{name: "second", basePath: "/models/second", platform: "tensorflow", policy: versionPolicy{kind: policyLatest, latest: 1}, labels: map[string]int64{}},
			}}
			if !reflect.DeepEqual(cfg, want) {
				t.Errorf("parsed\n%+v\nwant\n%+v\nfrom\n%s", cfg, want, src)
			}
			if _, err := checkModels(cfg.models); err != nil {
				t.Error(err)
			}
		})
	}
	empty, err := values.ModelConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := parseModelServerConfig(empty); err != nil || !cfg.set || len(cfg.models) != 0 {
		t.Errorf("empty list %q: %+v, %v", empty, cfg, err)
	}
}

func TestReadsTheOperatorsBatchingAndMonitoringFiles(t *testing.T) {
	dir := t.TempDir()
	for i, b := range []*servingv1alpha1.Batching{
		{},
		{MaxBatchSize: 8, BatchTimeoutMicros: ptr.To[int64](0), MaxEnqueuedBatches: 5, NumBatchThreads: ptr.To[int32](4), AllowedBatchSizes: []int32{2, 4, 8}},
	} {
		src, err := values.BatchingConfig(b)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "batching.config")
		writeFile(t, path, src)
		if err := readBatchingParameters(path); err != nil {
			t.Errorf("batching %d: %v\n%s", i, err, src)
		}
	}
	// What the operator writes for spec.monitoring (values.For).
	path := filepath.Join(dir, values.MonitoringConfigFile)
	writeFile(t, path, "prometheus_config {\n  enable: true\n  path: \""+values.MonitoringPath+"\"\n}\n")
	if p, err := readMonitoringConfig(path); err != nil || p != values.MonitoringPath {
		t.Errorf("monitoring path %q, %v", p, err)
	}
}

func TestMonitoringConfig(t *testing.T) {
	for _, tc := range []struct{ src, path, err string }{
		{`prometheus_config { enable: true path: "/metrics" }`, "/metrics", ""},
		{`prometheus_config { enable: true }`, defaultMetricsPath, ""},
		{`prometheus_config { enable: false path: "/metrics" }`, "", ""},
		{``, "", ""},
		{`prometheus_config { enable: yes }`, "", `Invalid value for boolean field "enable"`},
		{`prometheus { enable: true }`, "", `has no field named "prometheus"`},
	} {
		path := filepath.Join(t.TempDir(), "monitoring.config")
		writeFile(t, path, tc.src)
		p, err := readMonitoringConfig(path)
		if p != tc.path || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: %q, %v; want %q, error with %q", tc.src, p, err, tc.path, tc.err)
		}
	}
}

// TestParseModelServerConfig covers the text format as TF Serving's
// protobuf library reads it, beyond what the operator writes.
func TestParseModelServerConfig(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []modelConfig
	}{
		{"comments, single quotes, separators, colons before messages", `
# the model config
model_config_list: {
  config: { name: 'a' ; base_path: "/m/a", model_platform: "tensorflow" } # trailing comment
}`, []modelConfig{{name: "a", basePath: "/m/a", platform: "tensorflow", labels: map[string]int64{}}}},
		{"angle brackets, adjacent strings, escapes", `model_config_list < config < name: "x" "y\tz\101\x42\u00e9" base_path: '/m/\'q\'' model_platform: "tensorflow" > >`,
			[]modelConfig{{name: "xy\tzABé", basePath: "/m/'q'", platform: "tensorflow", labels: map[string]int64{}}}},
		{"repeated fields, list syntax, hex and octal", `model_config_list {
  config { name: "a" base_path: "/a" model_platform: "tensorflow"
    model_version_policy { specific { versions: 0x10 versions: [010, 3] versions: [] } }
    version_labels { key: "stable" value: 1 }
    version_labels: [{ key: "canary" value: 2 }, { key: "stable" value: 3 }]
  }
  config: [{ name: "b" base_path: "/b" model_type: TENSORFLOW }]
}`, []modelConfig{
			{name: "a", basePath: "/a", platform: "tensorflow", policy: versionPolicy{kind: policySpecific, specific: []int64{16, 8, 3}}, labels: map[string]int64{"stable": 3, "canary": 2}},
			{name: "b", basePath: "/b", modelType: 1, labels: map[string]int64{}},
		}},
		{"latest 0 and all", `model_config_list {
  config { name: "a" base_path: "/a" model_platform: "tensorflow" model_version_policy { latest { } } }
  config { name: "b" base_path: "/b" model_platform: "tensorflow" model_version_policy { all { } } }
}`, []modelConfig{
			{name: "a", basePath: "/a", platform: "tensorflow", labels: map[string]int64{}},
			{name: "b", basePath: "/b", platform: "tensorflow", policy: versionPolicy{kind: policyAll}, labels: map[string]int64{}},
		}},
		{"negative and large versions", `model_config_list { config { name: "a" base_path: "/a" model_platform: "tensorflow" model_version_policy { specific { versions: -9223372036854775808 versions: 9223372036854775807 } } } }`,
			[]modelConfig{{name: "a", basePath: "/a", platform: "tensorflow", policy: versionPolicy{kind: policySpecific, specific: []int64{-9223372036854775808, 9223372036854775807}}, labels: map[string]int64{}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseModelServerConfig(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.set || !reflect.DeepEqual(cfg.models, tc.want) {
				t.Errorf("got %+v\nwant %+v", cfg.models, tc.want)
			}
		})
	}
	if cfg, err := parseModelServerConfig("# nothing\n"); err != nil || cfg.set {
		t.Errorf("a file without model_config_list: %+v, %v; want nothing set", cfg, err)
	}
}

func TestMalformedModelConfigIsRefused(t *testing.T) {
	for _, tc := range []struct{ name, src, err string }{
		{"unknown field", `model_config_list { config { nam: "a" } }`, `1:30: Message type "tensorflow.serving.ModelConfig" has no field named "nam".`},
		{"unknown top-level field", `models { }`, `has no field named "models"`},
		{"missing colon", `model_config_list { config { name "a" } }`, `Expected ":"`},
		{"unterminated string", `model_config_list { config { name: "a } }`, `Unexpected end of string.`},
		{"string across lines", "model_config_list { config { name: \"a\n\" } }", `String literals cannot cross line boundaries.`},
		{"unclosed message", `model_config_list { config { name: "a" }`, `Expected "}", found end of input.`},
		{"extra closing brace", `model_config_list { } }`, `Expected identifier, got: }`},
		{"mismatched brackets", `model_config_list < config { name: "a" } }`, `1:42: Expected identifier, got: }`},
		{"non-repeated field twice", `model_config_list { config { name: "a" name: "b" } }`, `Non-repeated field "name" is specified multiple times.`},
		{"policy twice", `model_config_list { config { model_version_policy { all {} } model_version_policy { all {} } } }`, `Non-repeated field "model_version_policy"`},
		{"two policies", `model_config_list { config { model_version_policy { latest {} all {} } } }`, `Field "all" is specified along with field "latest", another member of oneof "policy_choice".`},
		{"negative num_versions", `model_config_list { config { model_version_policy { latest { num_versions: -1 } } } }`, `unsigned`},
		{"num_versions too large", `model_config_list { config { model_version_policy { latest { num_versions: 4294967296 } } } }`, `Integer out of range`},
		{"version too large", `model_config_list { config { model_version_policy { specific { versions: 9223372036854775808 } } } }`, `Integer out of range`},
		{"float version", `model_config_list { config { model_version_policy { specific { versions: 1.5 } } } }`, `Expected integer for field "versions", got: 1.5`},
		{"octal with 8", `model_config_list { config { model_version_policy { specific { versions: 08 } } } }`, `leading zero must be in octal`},
		{"number glued to a word", `model_config_list { config { model_version_policy { specific { versions: 12ab } } } }`, `Invalid number: 12ab`},
		{"string for an int", `model_config_list { config { version_labels { key: "a" value: "1" } } }`, `Expected integer for field "value"`},
		{"int for a string", `model_config_list { config { name: 1 } }`, `Expected string for field "name", got: 1`},
		{"unknown enum value", `model_config_list { config { model_type: PYTORCH } }`, `Unknown enumeration value of "PYTORCH" for field "model_type".`},
		{"list for a non-repeated field", `model_config_list { config { name: ["a"] } }`, `is not repeated`},
		{"invalid UTF-8", `model_config_list { config { name: "\377" } }`, `String field "name" contains invalid UTF-8 data.`},
		{"bad escape", `model_config_list { config { name: "\q" } }`, `Invalid escape sequence`},
		{"bad octal escape", `model_config_list { config { name: "\777" } }`, `out of range`},
		{"extension syntax", `model_config_list { config { [ext.field]: 1 } }`, `Extension and Any fields`},
		{"custom model config", `custom_model_config { }`, `not supported by tfservingdouble`},
		{"logging config", `model_config_list { config { logging_config { } } }`, `Field "logging_config" of tensorflow.serving.ModelConfig is not supported by tfservingdouble`},
		{"control character", "model_config_list { \x01 }", `Invalid character`},
		{"stray symbol", `model_config_list { config { name: "a" } }; ;`, `Expected identifier, got: ;`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseModelServerConfig(tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parse(%s) = %v, want an error with %q", tc.src, err, tc.err)
			}
		})
	}
}

func TestNestingIsBounded(t *testing.T) {
	deep := &pbType{name: "deep"}
	deep.fields = []*pbField{{name: "d", kind: pbMessage, message: deep}}
	src := strings.Repeat("d {", 1000) + strings.Repeat("}", 1000)
	if _, err := parseTextProto(src, deep); err == nil || !strings.Contains(err.Error(), "nested too deeply") {
		t.Errorf("deep nesting: %v", err)
	}
}

func TestModelListIsChecked(t *testing.T) {
	for _, tc := range []struct{ name, src, err string }{
		{"duplicate name", modelList(model("a", "/a", ""), model("a", "/b", "")), "Illegal to list model a multiple times in config list"},
		{"relative base path", modelList(model("a", "models/a", "")), "Expected model a to have an absolute path or URI; got base_path()=models/a"},
		{"no platform", `model_config_list { config { name: "a" base_path: "/a" } }`, "Illegal setting neither ModelServerConfig::model_type (deprecated) nor ModelServerConfig::model_platform, model name is a"},
		{"both platforms", `model_config_list { config { name: "a" base_path: "/a" model_type: TENSORFLOW model_platform: "tensorflow" } }`, "Illegal setting both"},
		{"other model type", `model_config_list { config { name: "a" base_path: "/a" model_type: OTHER } }`, "model_type choice 2 not supported"},
		{"other platform", `model_config_list { config { name: "a" base_path: "/a" model_platform: "tflite" } }`, `requests platform "tflite"`},
	} {
		cfg, err := parseModelServerConfig(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, err := checkModels(cfg.models); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
	cfg, _ := parseModelServerConfig(`model_config_list { config { name: "a" base_path: "gs://bucket/a" model_type: TENSORFLOW } }`)
	if got, err := checkModels(cfg.models); err != nil || got[0].platform != "tensorflow" {
		t.Errorf("a URI base path and model_type TENSORFLOW: %+v, %v", got, err)
	}
}

func TestReadModelServerConfigErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := readModelServerConfig(filepath.Join(dir, "missing")); codeOf(err) != codeNotFound || !strings.Contains(err.Error(), "No such file or directory") {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.config")
	writeFile(t, bad, "model_config_list {\n  config { name: \"a\" base_pth: \"/a\" }\n}\n")
	_, err := readModelServerConfig(bad)
	if codeOf(err) != codeInvalidArgument || !strings.Contains(err.Error(), "Invalid protobuf file: '"+bad+"'") || !strings.Contains(err.Error(), "2:22: Message type") {
		t.Errorf("malformed file: %v", err)
	}
	if os.Getuid() != 0 {
		unreadable := filepath.Join(dir, "unreadable.config")
		writeFile(t, unreadable, "")
		if err := os.Chmod(unreadable, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := readModelServerConfig(unreadable); codeOf(err) != codePermissionDenied {
			t.Errorf("unreadable file: %v", err)
		}
	}
}
