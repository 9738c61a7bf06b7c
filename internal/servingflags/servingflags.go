// Package servingflags holds what the project knows of
// tensorflow_model_server's command line: each flag's name, type and
// default as TF Serving 2.19's main.cc declares them, and how the server
// reads a value of each type. The operator checks a ModelServer's
// spec.extraArgs against it; the test double parses its command line with
// it, so the two cannot disagree about a flag.
package servingflags

import (
	"errors"
	"runtime"
	"strconv"
	"strings"
)

// Version is the TF Serving release whose flags these are: the release of
// the operator's default image.
const Version = "2.19"

// Kind is a flag's type, which decides how its value is read.
type Kind int

// The types of TF Serving's flags.
const (
	Bool Kind = iota
	Int32
	Int64
	Float
	String
)

func (k Kind) String() string {
	return [...]string{"bool", "int32", "int64", "float", "string"}[k]
}

// Flag is one flag of tensorflow_model_server.
type Flag struct {
	Name string
	Kind Kind
	// Default is the value the server's usage text shows.
	Default string
}

// all is every flag of tensorflow_model_server 2.19. A server given a
// name it lacks prints "unknown argument" and starts without it.
var all = []Flag{
	{"port", Int32, "8500"},
	{"grpc_socket_path", String, ""},
	{"rest_api_port", Int32, "0"},
	{"rest_api_num_threads", Int32, strconv.Itoa(4 * runtime.NumCPU())},
	{"rest_api_timeout_in_ms", Int32, "30000"},
	{"rest_api_enable_cors_support", Bool, "false"},
	{"enable_batching", Bool, "false"},
	{"allow_version_labels_for_unavailable_models", Bool, "false"},
	{"batching_parameters_file", String, ""},
	{"enable_per_model_batching_parameters", Bool, "false"},
	{"model_config_file", String, ""},
	{"model_config_file_poll_wait_seconds", Int32, "0"},
	{"model_name", String, "default"},
	{"model_base_path", String, ""},
	{"num_load_threads", Int32, "0"},
	{"num_unload_threads", Int32, "0"},
	{"max_num_load_retries", Int32, "5"},
	{"load_retry_interval_micros", Int64, "60000000"},
	{"file_system_poll_wait_seconds", Int32, "1"},
	{"flush_filesystem_caches", Bool, "true"},
	{"tensorflow_session_parallelism", Int64, "0"},
	{"tensorflow_session_config_file", String, ""},
	{"tensorflow_intra_op_parallelism", Int64, "0"},
	{"tensorflow_inter_op_parallelism", Int64, "0"},
	{"use_alts_credentials", Bool, "false"},
	{"ssl_config_file", String, ""},
	{"platform_config_file", String, ""},
	{"per_process_gpu_memory_fraction", Float, "0.000000"},
	{"saved_model_tags", String, "serve"},
	{"grpc_channel_arguments", String, ""},
	{"grpc_max_threads", Int32, strconv.Itoa(4 * runtime.NumCPU())},
	{"enable_model_warmup", Bool, "true"},
	{"num_request_iterations_for_warmup", Int32, "0"},
	{"version", Bool, "false"},
	{"monitoring_config_file", String, ""},
	{"remove_unused_fields_from_bundle_metagraph", Bool, "true"},
	{"prefer_tflite_model", Bool, "false"},
	{"num_tflite_pools", Int32, strconv.Itoa(runtime.NumCPU())},
	{"num_tflite_interpreters_per_pool", Int32, "1"},
	{"enable_signature_method_name_check", Bool, "false"},
	{"xla_cpu_compilation_enabled", Bool, "false"},
	{"xla_gpu_compilation_enabled", Bool, "false"},
	{"enable_profiler", Bool, "true"},
	{"thread_pool_factory_config_file", String, ""},
	{"mixed_precision", String, ""},
	{"skip_initialize_tpu", Bool, "false"},
	{"enable_grpc_healthcheck_service", Bool, "false"},
	{"enable_serialization_as_tensor_content", Bool, "false"},
}

// All is every flag, in the order of the server's usage text.
func All() []Flag {
	return append([]Flag(nil), all...)
}

// Lookup finds a flag by its name, without the dashes.
func Lookup(name string) (Flag, bool) {
	for _, f := range all {
		if f.Name == name {
			return f, true
		}
	}
	return Flag{}, false
}

// Split reads one argument as the server does: only --name=value, and a
// bare --name, which only a boolean takes. ok is false for anything else.
func Split(arg string) (name, value string, hasValue, ok bool) {
	body, isFlag := strings.CutPrefix(arg, "--")
	if !isFlag || body == "" {
		return "", "", false, false
	}
	name, value, hasValue = strings.Cut(body, "=")
	return name, value, hasValue, true
}

// ErrNeedsValue is a flag other than a boolean given without a value:
// the server does not read the next argument as its value.
var ErrNeedsValue = errors.New("the flag needs a value")

// Value is what the server reads for f from an argument: a bare boolean
// flag is true, and a value is read as Kind.Parse reads it.
func (f Flag) Value(value string, hasValue bool) (string, error) {
	if !hasValue {
		if f.Kind != Bool {
			return "", ErrNeedsValue
		}
		return "true", nil
	}
	return f.Kind.Parse(value)
}

// ErrNotKind is a value the server cannot read as its flag's type: it
// prints "Couldn't interpret value" and its usage, and exits.
var ErrNotKind = errors.New("not a value of the flag's type")

// Parse reads v as the server reads a value of kind k (a sscanf for
// numbers: leading blanks and a sign, nothing after the number; true or
// false in any case, or 1 or 0, for booleans) and returns it canonical.
func (k Kind) Parse(v string) (string, error) {
	num := strings.TrimLeft(v, " \t\n\r\f\v")
	var err error
	switch k {
	case Bool:
		switch {
		case strings.EqualFold(v, "true") || v == "1":
			return "true", nil
		case strings.EqualFold(v, "false") || v == "0":
			return "false", nil
		}
		return "", ErrNotKind
	case Int32, Int64:
		bits := 32
		if k == Int64 {
			bits = 64
		}
		var n int64
		if n, err = strconv.ParseInt(num, 10, bits); err == nil {
			return strconv.FormatInt(n, 10), nil
		}
	case Float:
		var x float64
		if x, err = strconv.ParseFloat(num, 32); err == nil {
			return strconv.FormatFloat(x, 'g', -1, 32), nil
		}
	default:
		return v, nil
	}
	return "", ErrNotKind
}
