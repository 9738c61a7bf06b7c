package servingflags

import (
	"errors"
	"slices"
	"strings"
	"testing"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func TestTheFlagsAreThoseOfTheDefaultImagesRelease(t *testing.T) {
	if !strings.HasPrefix(servingv1alpha1.DefaultImage, "tensorflow/serving:"+Version+".") {
		t.Errorf("the default image is %s, the flags those of TF Serving %s: check the flags of the new release", servingv1alpha1.DefaultImage, Version)
	}
}

// realFlags are the flags of tensorflow_model_server's main.cc (2.19).
var realFlags = []string{
	"port", "grpc_socket_path", "rest_api_port", "rest_api_num_threads",
	"rest_api_timeout_in_ms", "rest_api_enable_cors_support", "enable_batching",
	"allow_version_labels_for_unavailable_models", "batching_parameters_file",
	"enable_per_model_batching_parameters", "model_config_file",
	"model_config_file_poll_wait_seconds", "model_name", "model_base_path",
	"num_load_threads", "num_unload_threads", "max_num_load_retries",
	"load_retry_interval_micros", "file_system_poll_wait_seconds",
	"flush_filesystem_caches", "tensorflow_session_parallelism",
	"tensorflow_session_config_file", "tensorflow_intra_op_parallelism",
	"tensorflow_inter_op_parallelism", "use_alts_credentials", "ssl_config_file",
	"platform_config_file", "per_process_gpu_memory_fraction", "saved_model_tags",
	"grpc_channel_arguments", "grpc_max_threads", "enable_model_warmup",
	"num_request_iterations_for_warmup", "version", "monitoring_config_file",
	"remove_unused_fields_from_bundle_metagraph", "prefer_tflite_model",
	"num_tflite_pools", "num_tflite_interpreters_per_pool",
	"enable_signature_method_name_check", "xla_cpu_compilation_enabled",
	"xla_gpu_compilation_enabled", "enable_profiler",
	"thread_pool_factory_config_file", "mixed_precision", "skip_initialize_tpu",
	"enable_grpc_healthcheck_service", "enable_serialization_as_tensor_content",
}

func TestTheTableIsTheServersFlagSet(t *testing.T) {
	var names []string
	for _, f := range All() {
		if slices.Contains(names, f.Name) {
			t.Errorf("flag %s listed twice", f.Name)
		}
		names = append(names, f.Name)
		if _, err := f.Kind.Parse(f.Default); err != nil {
			t.Errorf("flag %s: default %q is not a %s", f.Name, f.Default, f.Kind)
		}
	}
	slices.Sort(names)
	if want := slices.Sorted(slices.Values(realFlags)); !slices.Equal(names, want) {
		t.Errorf("flag table\n got %v\nwant %v", names, want)
	}
}

func TestValuesAreReadAsTheServerReadsThem(t *testing.T) {
	for _, tc := range []struct {
		kind     Kind
		in, want string
		refused  bool
	}{
		{Bool, "True", "true", false},
		{Bool, "FALSE", "false", false},
		{Bool, "1", "true", false},
		{Bool, "0", "false", false},
		{Bool, "yes", "", true},
		{Bool, "", "", true},
		{Int32, " +8500", "8500", false},
		{Int32, "-1", "-1", false},
		{Int32, "8500 ", "", true},
		{Int32, "99999999999", "", true},
		{Int64, "99999999999", "99999999999", false},
		{Int32, "0x10", "", true},
		{Float, "0.5", "0.5", false},
		{Float, "half", "", true},
		{String, "a=1,b=2", "a=1,b=2", false},
		{String, "", "", false},
	} {
		got, err := tc.kind.Parse(tc.in)
		if (err != nil) != tc.refused || got != tc.want {
			t.Errorf("%s.Parse(%q) = %q, %v; want %q, refused %v", tc.kind, tc.in, got, err, tc.want, tc.refused)
		}
	}
}

func TestSplitTakesOnlyTheServersForms(t *testing.T) {
	for _, tc := range []struct {
		arg          string
		name, value  string
		hasValue, ok bool
	}{
		{"--port=8500", "port", "8500", true, true},
		{"--grpc_channel_arguments=a=1", "grpc_channel_arguments", "a=1", true, true},
		{"--enable_batching", "enable_batching", "", false, true},
		{"--model_name=", "model_name", "", true, true},
		{"-port=8500", "", "", false, false},
		{"--", "", "", false, false},
		{"8500", "", "", false, false},
	} {
		name, value, hasValue, ok := Split(tc.arg)
		if name != tc.name || value != tc.value || hasValue != tc.hasValue || ok != tc.ok {
			t.Errorf("Split(%q) = %q, %q, %v, %v; want %q, %q, %v, %v", tc.arg, name, value, hasValue, ok, tc.name, tc.value, tc.hasValue, tc.ok)
		}
	}
}

// A bare flag is a boolean's true, and refused for any other type; a
// value is read by its type.
func TestABareFlagIsOnlyABooleansTrue(t *testing.T) {
	warmup, _ := Lookup("enable_model_warmup")
	threads, _ := Lookup("rest_api_num_threads")
	for _, tc := range []struct {
		f        Flag
		value    string
		hasValue bool
		want     string
		wantErr  error
	}{
		{warmup, "", false, "true", nil},
		{warmup, "False", true, "false", nil},
		{threads, "", false, "", ErrNeedsValue},
		{threads, " 16", true, "16", nil},
		{threads, "16s", true, "", ErrNotKind},
	} {
		got, err := tc.f.Value(tc.value, tc.hasValue)
		if got != tc.want || !errors.Is(err, tc.wantErr) {
			t.Errorf("--%s (value %q, given %v) = %q, %v; want %q, %v", tc.f.Name, tc.value, tc.hasValue, got, err, tc.want, tc.wantErr)
		}
	}
}
