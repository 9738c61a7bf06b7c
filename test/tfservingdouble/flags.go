package main

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
)

type flagKind int

const (
	kindBool flagKind = iota
	kindInt32
	kindInt64
	kindFloat
	kindString
)

func (k flagKind) String() string {
	return [...]string{"bool", "int32", "int64", "float", "string"}[k]
}

// flagSpec is one flag of tensorflow_model_server.
type flagSpec struct {
	name string
	kind flagKind
	// def is the default, as the real usage text shows it.
	def string
	// simulated flags change what the double does; the others are
	// accepted, type-checked and otherwise ignored.
	simulated bool
	help      string
}

// flagTable is every flag of tensorflow_model_server 2.x (main.cc), with
// its type and default. A name missing here is refused, so the table must
// stay complete: a flag TF Serving has must never be refused by the double.
var flagTable = []flagSpec{
	{"port", kindInt32, "8500", true, "TCP port of the gRPC API (the double only accepts and closes connections)"},
	{"grpc_socket_path", kindString, "", true, "UNIX socket of the gRPC API (accepted and closed like the port)"},
	{"rest_api_port", kindInt32, "0", true, "port of the HTTP/REST API; 0 exports no REST API; must differ from --port"},
	{"rest_api_num_threads", kindInt32, strconv.Itoa(4 * runtime.NumCPU()), false, "REST threads"},
	{"rest_api_timeout_in_ms", kindInt32, "30000", false, "REST request timeout"},
	{"rest_api_enable_cors_support", kindBool, "false", true, "answer CORS preflights and add CORS headers"},
	{"enable_batching", kindBool, "false", true, "batch requests (the file is checked, batching is not simulated)"},
	{"allow_version_labels_for_unavailable_models", kindBool, "false", true, "a new label may name a version that is not AVAILABLE"},
	{"batching_parameters_file", kindString, "", true, "BatchingParameters text proto (needs --enable_batching)"},
	{"enable_per_model_batching_parameters", kindBool, "false", false, "read batching parameters from each model's directory"},
	{"model_config_file", kindString, "", true, "ModelServerConfig text proto; overrides --model_name and --model_base_path"},
	{"model_config_file_poll_wait_seconds", kindInt32, "0", true, "seconds between re-reads of --model_config_file; 0 reads it once"},
	{"model_name", kindString, "default", true, "name of the single model (without --model_config_file)"},
	{"model_base_path", kindString, "", true, "base path of the single model (without --model_config_file)"},
	{"num_load_threads", kindInt32, "0", false, "model loading threads"},
	{"num_unload_threads", kindInt32, "0", false, "model unloading threads"},
	{"max_num_load_retries", kindInt32, "5", false, "retries of a failed load"},
	{"load_retry_interval_micros", kindInt64, "60000000", false, "interval between load retries"},
	{"file_system_poll_wait_seconds", kindInt32, "1", true, "seconds between looks for new versions; 0 looks once, negative never"},
	{"flush_filesystem_caches", kindBool, "true", false, "flush file system caches after loads"},
	{"tensorflow_session_parallelism", kindInt64, "0", true, "TensorFlow session threads (only the exclusion rule is checked)"},
	{"tensorflow_session_config_file", kindString, "", false, "ConfigProto text proto"},
	{"tensorflow_intra_op_parallelism", kindInt64, "0", true, "intra-op threads (only the exclusion rule is checked)"},
	{"tensorflow_inter_op_parallelism", kindInt64, "0", true, "inter-op threads (only the exclusion rule is checked)"},
	{"use_alts_credentials", kindBool, "false", true, "ALTS on the gRPC port (only the exclusion with --ssl_config_file is checked)"},
	{"ssl_config_file", kindString, "", true, "SSLConfig text proto (only the exclusion with ALTS is checked)"},
	{"platform_config_file", kindString, "", false, "PlatformConfigMap text proto"},
	{"per_process_gpu_memory_fraction", kindFloat, "0.000000", false, "share of GPU memory per process"},
	{"saved_model_tags", kindString, "serve", false, "SavedModel tags to load"},
	{"grpc_channel_arguments", kindString, "", false, "gRPC channel arguments"},
	{"grpc_max_threads", kindInt32, strconv.Itoa(4 * runtime.NumCPU()), false, "gRPC threads"},
	{"enable_model_warmup", kindBool, "true", false, "replay warmup requests after a load"},
	{"num_request_iterations_for_warmup", kindInt32, "0", false, "warmup replays"},
	{"version", kindBool, "false", true, "print the version and exit"},
	{"monitoring_config_file", kindString, "", true, "MonitoringConfig text proto (Prometheus endpoint on the REST port)"},
	{"remove_unused_fields_from_bundle_metagraph", kindBool, "true", false, "trim the loaded MetaGraphDef"},
	{"prefer_tflite_model", kindBool, "false", false, "load model.tflite instead of the SavedModel"},
	{"num_tflite_pools", kindInt32, strconv.Itoa(runtime.NumCPU()), false, "TFLite interpreter pools"},
	{"num_tflite_interpreters_per_pool", kindInt32, "1", false, "TFLite interpreters per pool"},
	{"enable_signature_method_name_check", kindBool, "false", false, "check signatures' method names"},
	{"xla_cpu_compilation_enabled", kindBool, "false", false, "XLA on CPU"},
	{"xla_gpu_compilation_enabled", kindBool, "false", false, "XLA on GPU"},
	{"enable_profiler", kindBool, "true", false, "profiler service on the gRPC port"},
	{"thread_pool_factory_config_file", kindString, "", false, "ThreadPoolFactoryConfig text proto"},
	{"mixed_precision", kindString, "", false, "mixed precision mode"},
	{"skip_initialize_tpu", kindBool, "false", false, "skip TPU initialization"},
	{"enable_grpc_healthcheck_service", kindBool, "false", false, "gRPC health checking service"},
	{"enable_serialization_as_tensor_content", kindBool, "false", false, "serialize predict responses as tensor content"},
}

func lookupFlag(name string) *flagSpec {
	for i := range flagTable {
		if flagTable[i].name == name {
			return &flagTable[i]
		}
	}
	return nil
}

// flagError is a command line the double refuses. Refused arguments exit
// 1; a value of the wrong type exits 255 after the usage text, as
// tensorflow_model_server does.
type flagError struct {
	msg       string
	showUsage bool
}

func (e *flagError) Error() string { return e.msg }

// errHelp is --help, which prints the usage and fails like TF Serving.
var errHelp = &flagError{msg: "", showUsage: true}

// flags are the parsed command line: every flag's value as text, checked
// against its type.
type flags map[string]string

// parseFlags reads the command line as TF Serving does: only
// --name=value, and a bare --name for booleans. TF Serving prints
// "unknown argument" for anything else and starts anyway, silently using
// defaults; the double refuses instead, so that a command line the real
// server would misread fails the test that produced it.
func parseFlags(args []string) (flags, error) {
	f := flags{}
	for _, arg := range args {
		if arg == "--help" {
			return nil, errHelp
		}
		body, isFlag := strings.CutPrefix(arg, "--")
		if !isFlag || body == "" {
			return nil, &flagError{msg: fmt.Sprintf("ERROR: unexpected argument '%s': tensorflow_model_server takes only --flag=value arguments", arg)}
		}
		name, value, hasValue := strings.Cut(body, "=")
		spec := lookupFlag(name)
		if spec == nil {
			return nil, &flagError{msg: fmt.Sprintf("ERROR: unknown command line flag '%s'", name)}
		}
		if !hasValue {
			if spec.kind != kindBool {
				return nil, &flagError{msg: fmt.Sprintf("ERROR: flag '%s' needs a value: write --%s=VALUE (tensorflow_model_server does not read '--%s VALUE')", name, name, name)}
			}
			value = "true"
		}
		canonical, err := checkFlagValue(spec.kind, value)
		if err != nil {
			return nil, &flagError{msg: fmt.Sprintf("Couldn't interpret value %s for flag %s.", value, name), showUsage: true}
		}
		f[name] = canonical
	}
	return f, nil
}

// checkFlagValue accepts what TF Serving's scanf-based parsing accepts:
// leading blanks and a sign, nothing after the number, and true/false
// (any case) or 1/0 for booleans.
func checkFlagValue(kind flagKind, v string) (string, error) {
	num := strings.TrimLeft(v, " \t\n\r\f\v")
	switch kind {
	case kindBool:
		switch {
		case strings.EqualFold(v, "true") || v == "1":
			return "true", nil
		case strings.EqualFold(v, "false") || v == "0":
			return "false", nil
		}
		return "", fmt.Errorf("not a boolean")
	case kindInt32:
		n, err := strconv.ParseInt(num, 10, 32)
		return strconv.FormatInt(n, 10), err
	case kindInt64:
		n, err := strconv.ParseInt(num, 10, 64)
		return strconv.FormatInt(n, 10), err
	case kindFloat:
		x, err := strconv.ParseFloat(num, 32)
		return strconv.FormatFloat(x, 'g', -1, 32), err
	default:
		return v, nil
	}
}

func (f flags) raw(name string) string {
	if v, ok := f[name]; ok {
		return v
	}
	if spec := lookupFlag(name); spec != nil {
		return spec.def
	}
	panic("tfservingdouble: no flag " + name)
}

func (f flags) str(name string) string { return f.raw(name) }
func (f flags) boolean(name string) bool {
	return f.raw(name) == "true"
}
func (f flags) integer(name string) int64 {
	n, _ := strconv.ParseInt(f.raw(name), 10, 64)
	return n
}

// usage is the flag list in the layout of TF Serving's usage text, saying
// which flags the double ignores.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: tensorflow_model_server (tfservingdouble, a test double)\nFlags:\n")
	for _, s := range flagTable {
		def := s.def
		if s.kind == kindString {
			def = strconv.Quote(def)
		}
		help := s.help
		if !s.simulated {
			help += " (accepted, not simulated)"
		}
		fmt.Fprintf(&b, "\t%-33s\t%s\t%s\n", "--"+s.name+"="+def, s.kind, help)
	}
	return b.String()
}

// options are the flags the double acts on.
type options struct {
	// extraLoad is how much longer the first load takes (loadSecondsEnv),
	// not a flag: TF Serving has none.
	extraLoad time.Duration
	// grpcCloses is how long the gRPC port stays open (grpcClosesEnv);
	// 0: as long as the server runs.
	grpcCloses             time.Duration
	grpcPort               int
	grpcSocketPath         string
	restPort               int
	cors                   bool
	enableBatching         bool
	batchingFile           string
	allowUnavailableLabels bool
	modelConfigFile        string
	configPollSeconds      int64
	modelName              string
	modelBasePath          string
	fsPollSeconds          int64
	sessionParallelism     int64
	intraOpParallelism     int64
	interOpParallelism     int64
	useALTS                bool
	sslConfigFile          string
	monitoringFile         string
	version                bool
}

func (f flags) options() options {
	return options{
		grpcPort:               int(f.integer("port")),
		grpcSocketPath:         f.str("grpc_socket_path"),
		restPort:               int(f.integer("rest_api_port")),
		cors:                   f.boolean("rest_api_enable_cors_support"),
		enableBatching:         f.boolean("enable_batching"),
		batchingFile:           f.str("batching_parameters_file"),
		allowUnavailableLabels: f.boolean("allow_version_labels_for_unavailable_models"),
		modelConfigFile:        f.str("model_config_file"),
		configPollSeconds:      f.integer("model_config_file_poll_wait_seconds"),
		modelName:              f.str("model_name"),
		modelBasePath:          f.str("model_base_path"),
		fsPollSeconds:          f.integer("file_system_poll_wait_seconds"),
		sessionParallelism:     f.integer("tensorflow_session_parallelism"),
		intraOpParallelism:     f.integer("tensorflow_intra_op_parallelism"),
		interOpParallelism:     f.integer("tensorflow_inter_op_parallelism"),
		useALTS:                f.boolean("use_alts_credentials"),
		sslConfigFile:          f.str("ssl_config_file"),
		monitoringFile:         f.str("monitoring_config_file"),
		version:                f.boolean("version"),
	}
}
