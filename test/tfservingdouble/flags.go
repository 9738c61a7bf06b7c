package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/servingflags"
)

// doubleFlag is what the double does with one flag of
// tensorflow_model_server (servingflags holds its name, type and default).
type doubleFlag struct {
	// simulated flags change what the double does; the others are
	// accepted, type-checked and otherwise ignored.
	simulated bool
	help      string
}

// doubleFlags covers every flag of servingflags, and only those: a flag TF
// Serving has must never be refused by the double.
var doubleFlags = map[string]doubleFlag{
	"port":                         {true, "TCP port of the gRPC API (the double only accepts and closes connections)"},
	"grpc_socket_path":             {true, "UNIX socket of the gRPC API (accepted and closed like the port)"},
	"rest_api_port":                {true, "port of the HTTP/REST API; 0 exports no REST API; must differ from --port"},
	"rest_api_num_threads":         {false, "REST threads"},
	"rest_api_timeout_in_ms":       {false, "REST request timeout"},
	"rest_api_enable_cors_support": {true, "answer CORS preflights and add CORS headers"},
	"enable_batching":              {true, "batch requests (the file is checked, batching is not simulated)"},
	"allow_version_labels_for_unavailable_models": {true, "a new label may name a version that is not AVAILABLE"},
	"batching_parameters_file":                    {true, "BatchingParameters text proto (needs --enable_batching)"},
	"enable_per_model_batching_parameters":        {false, "read batching parameters from each model's directory"},
	"model_config_file":                           {true, "ModelServerConfig text proto; overrides --model_name and --model_base_path"},
	"model_config_file_poll_wait_seconds":         {true, "seconds between re-reads of --model_config_file; 0 reads it once"},
	"model_name":                                  {true, "name of the single model (without --model_config_file)"},
	"model_base_path":                             {true, "base path of the single model (without --model_config_file)"},
	"num_load_threads":                            {false, "model loading threads"},
	"num_unload_threads":                          {false, "model unloading threads"},
	"max_num_load_retries":                        {false, "retries of a failed load"},
	"load_retry_interval_micros":                  {false, "interval between load retries"},
	"file_system_poll_wait_seconds":               {true, "seconds between looks for new versions; 0 looks once, negative never"},
	"flush_filesystem_caches":                     {false, "flush file system caches after loads"},
	"tensorflow_session_parallelism":              {true, "TensorFlow session threads (only the exclusion rule is checked)"},
	"tensorflow_session_config_file":              {false, "ConfigProto text proto"},
	"tensorflow_intra_op_parallelism":             {true, "intra-op threads (only the exclusion rule is checked)"},
	"tensorflow_inter_op_parallelism":             {true, "inter-op threads (only the exclusion rule is checked)"},
	"use_alts_credentials":                        {true, "ALTS on the gRPC port (only the exclusion with --ssl_config_file is checked)"},
	"ssl_config_file":                             {true, "SSLConfig text proto (only the exclusion with ALTS is checked)"},
	"platform_config_file":                        {false, "PlatformConfigMap text proto"},
	"per_process_gpu_memory_fraction":             {false, "share of GPU memory per process"},
	"saved_model_tags":                            {false, "SavedModel tags to load"},
	"grpc_channel_arguments":                      {false, "gRPC channel arguments"},
	"grpc_max_threads":                            {false, "gRPC threads"},
	"enable_model_warmup":                         {false, "replay warmup requests after a load"},
	"num_request_iterations_for_warmup":           {false, "warmup replays"},
	"version":                                     {true, "print the version and exit"},
	"monitoring_config_file":                      {true, "MonitoringConfig text proto (Prometheus endpoint on the REST port)"},
	"remove_unused_fields_from_bundle_metagraph":  {false, "trim the loaded MetaGraphDef"},
	"prefer_tflite_model":                         {false, "load model.tflite instead of the SavedModel"},
	"num_tflite_pools":                            {false, "TFLite interpreter pools"},
	"num_tflite_interpreters_per_pool":            {false, "TFLite interpreters per pool"},
	"enable_signature_method_name_check":          {false, "check signatures' method names"},
	"xla_cpu_compilation_enabled":                 {false, "XLA on CPU"},
	"xla_gpu_compilation_enabled":                 {false, "XLA on GPU"},
	"enable_profiler":                             {false, "profiler service on the gRPC port"},
	"thread_pool_factory_config_file":             {false, "ThreadPoolFactoryConfig text proto"},
	"mixed_precision":                             {false, "mixed precision mode"},
	"skip_initialize_tpu":                         {false, "skip TPU initialization"},
	"enable_grpc_healthcheck_service":             {false, "gRPC health checking service"},
	"enable_serialization_as_tensor_content":      {false, "serialize predict responses as tensor content"},
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
		name, value, hasValue, ok := servingflags.Split(arg)
		if !ok {
			return nil, &flagError{msg: fmt.Sprintf("ERROR: unexpected argument '%s': tensorflow_model_server takes only --flag=value arguments", arg)}
		}
		spec, known := servingflags.Lookup(name)
		if !known {
			return nil, &flagError{msg: fmt.Sprintf("ERROR: unknown command line flag '%s'", name)}
		}
		canonical, err := spec.Value(value, hasValue)
		switch {
		case errors.Is(err, servingflags.ErrNeedsValue):
			return nil, &flagError{msg: fmt.Sprintf("ERROR: flag '%s' needs a value: write --%s=VALUE (tensorflow_model_server does not read '--%s VALUE')", name, name, name)}
		case err != nil:
			return nil, &flagError{msg: fmt.Sprintf("Couldn't interpret value %s for flag %s.", value, name), showUsage: true}
		}
		f[name] = canonical
	}
	return f, nil
}

func (f flags) raw(name string) string {
	if v, ok := f[name]; ok {
		return v
	}
	if spec, ok := servingflags.Lookup(name); ok {
		return spec.Default
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
	for _, s := range servingflags.All() {
		def := s.Default
		if s.Kind == servingflags.String {
			def = strconv.Quote(def)
		}
		d := doubleFlags[s.Name]
		help := d.help
		if !d.simulated {
			help += " (accepted, not simulated)"
		}
		fmt.Fprintf(&b, "\t%-33s\t%s\t%s\n", "--"+s.Name+"="+def, s.Kind, help)
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
