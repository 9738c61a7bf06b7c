package values

import (
	"slices"
	"testing"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func extraArgs(args ...string) func(*servingv1alpha1.ModelServer) {
	return func(ms *servingv1alpha1.ModelServer) { ms.Spec.ExtraArgs = args }
}

// TestExtraArgsTheServerCouldNotStartWithAreRefused: what the CRD
// refuses, and what TF Serving would refuse at start, is refused before
// anything is built, with the item named.
func TestExtraArgsTheServerCouldNotStartWithAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name        string
		args        []string
		field, want string
	}{
		{"a value as its own item", []string{"--rest_api_num_threads", "16"}, "spec.extraArgs[0]", "--rest_api_num_threads takes a value, a whole number (32 bits): write --rest_api_num_threads=VALUE"},
		{"a positional argument", []string{"--enable_model_warmup", "16"}, "spec.extraArgs[1]", `"16": not one tensorflow_model_server flag`},
		{"one dash", []string{"-rest_api_num_threads=16"}, "spec.extraArgs[0]", "not one tensorflow_model_server flag"},
		{"a name in capitals", []string{"--Port=1"}, "spec.extraArgs[0]", "not one tensorflow_model_server flag"},
		{"the gRPC port", []string{"--port=9000"}, "spec.extraArgs[0]", "--port is set by the operator from spec.ports"},
		{"the REST port, bare", []string{"--rest_api_port"}, "spec.extraArgs[0]", "--rest_api_port is set by the operator from spec.ports"},
		{"a single model", []string{"--model_base_path=/models/x"}, "spec.extraArgs[0]", "from spec.model or spec.models"},
		{"batching", []string{"--enable_batching=false"}, "spec.extraArgs[0]", "from spec.batching"},
		{"monitoring", []string{"--monitoring_config_file=/x"}, "spec.extraArgs[0]", "from spec.monitoring"},
		{"the version", []string{"--version"}, "spec.extraArgs[0]", "--version makes the server print and exit"},
		{"not a number", []string{"--rest_api_timeout_in_ms=5s"}, "spec.extraArgs[0]", `--rest_api_timeout_in_ms takes a whole number (32 bits), not "5s": TF Serving would not start`},
		{"out of range", []string{"--grpc_max_threads=4294967296"}, "spec.extraArgs[0]", "a whole number (32 bits)"},
		{"not a boolean", []string{"--enable_model_warmup=no"}, "spec.extraArgs[0]", `takes true or false, not "no"`},
		{"not a fraction", []string{"--per_process_gpu_memory_fraction=half"}, "spec.extraArgs[0]", "takes a number"},
		{"all three parallelisms", []string{"--tensorflow_session_parallelism=4", "--tensorflow_intra_op_parallelism=2", "--tensorflow_inter_op_parallelism=2"}, "spec.extraArgs", "not all three"},
		{"the SSL config", []string{"--ssl_config_file=/x"}, "spec.extraArgs[0]", "--ssl_config_file is set by the operator from spec.tls"},
	} {
		t.Run(tc.name, func(t *testing.T) { expectRefused(t, modelServer(extraArgs(tc.args...)), tc.field, tc.want) })
	}
	withTLS := func(ms *servingv1alpha1.ModelServer) { ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "cert"} }
	expectRefused(t, modelServer(withTLS, extraArgs("--use_alts_credentials")), "spec.extraArgs", "--use_alts_credentials and spec.tls exclude each other: TF Serving would not start")
	if _, err := Validate(modelServer(withTLS, extraArgs("--use_alts_credentials", "--use_alts_credentials=false"))); err != nil {
		t.Errorf("ALTS turned off again beside spec.tls: %v, want it accepted", err)
	}

	for _, args := range [][]string{
		{"--rest_api_num_threads=16", "--rest_api_timeout_in_ms= +5000", "--enable_model_warmup=False", "--xla_cpu_compilation_enabled"},
		{"--grpc_channel_arguments=grpc.max_concurrent_streams=100,grpc.keepalive_time_ms=1000"},
		{"--per_process_gpu_memory_fraction=0.5", "--saved_model_tags=serve,gpu"},
		// The last value is the one the server keeps.
		{"--tensorflow_session_parallelism=4", "--tensorflow_intra_op_parallelism=2", "--tensorflow_inter_op_parallelism=2", "--tensorflow_session_parallelism=0"},
		{"--use_alts_credentials"},
		// A flag the server lacks is its to ignore: it is warned of.
		{"--rest_api_timeout_ms=5000", "--enable_everything"},
	} {
		if _, err := Validate(modelServer(extraArgs(args...))); err != nil {
			t.Errorf("Validate(%q) = %v, want it accepted", args, err)
		}
	}
}

// TestExtraArgsFollowTheOperatorsAndRollThePods: the extra args come
// after the operator's own, a change restarts the serving pods, and a
// flag the server lacks is a warning that needs no look again.
func TestExtraArgsFollowTheOperatorsAndRollThePods(t *testing.T) {
	base, err := For(modelServer(), fetched)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--rest_api_num_threads=16", "--rest_api_timeout_ms=5000"}
	v, err := For(modelServer(extraArgs(args...)), fetched)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(base.Serving.Args), args...); !slices.Equal(v.Serving.Args, want) {
		t.Errorf("serving args\n got %q\nwant %q", v.Serving.Args, want)
	}
	if v.Serving.RestartChecksum == base.Serving.RestartChecksum {
		t.Error("extra args left the restart checksum as it was: the pods would not read them")
	}
	want := []string{"spec.extraArgs[1]: tensorflow_model_server 2.19 has no flag --rest_api_timeout_ms; TF Serving ignores a flag it does not have"}
	if !slices.Equal(v.Warnings, want) || v.WaitsForAPIs {
		t.Errorf("warnings %q (waits for APIs: %v), want %q and no wait", v.Warnings, v.WaitsForAPIs, want)
	}
	if len(base.Warnings) != 0 {
		t.Errorf("warnings without extra args: %q", base.Warnings)
	}
}

// TestAFlagSetTwiceIsWarnedOf: the server keeps the last of a flag's
// values, so the earlier item does nothing; each repeat is named with
// the item it repeats, and a repeated unknown flag is named once as
// unknown.
func TestAFlagSetTwiceIsWarnedOf(t *testing.T) {
	v, err := For(modelServer(extraArgs(
		"--rest_api_num_threads=16", "--enable_model_warmup", "--rest_api_num_threads=32",
		"--enable_model_warmup=true", "--no_such_flag=1", "--no_such_flag=2")), fetched)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"spec.extraArgs[2]: --rest_api_num_threads is set again (first in spec.extraArgs[0]); TF Serving keeps only the last value",
		"spec.extraArgs[3]: --enable_model_warmup is set again (first in spec.extraArgs[1]); TF Serving keeps only the last value",
		"spec.extraArgs[4]: tensorflow_model_server 2.19 has no flag --no_such_flag; TF Serving ignores a flag it does not have",
		"spec.extraArgs[5]: --no_such_flag is set again (first in spec.extraArgs[4]); TF Serving keeps only the last value",
	}
	if !slices.Equal(v.Warnings, want) {
		t.Errorf("warnings\n got %q\nwant %q", v.Warnings, want)
	}
}
