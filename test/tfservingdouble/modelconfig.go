package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
)

// The messages TF Serving reads from the files the operator writes, with
// their real field names. Real fields the double does not simulate are
// refused by name rather than silently ignored.
var (
	latestPolicyType = &pbType{
		name:   "tensorflow.serving.FileSystemStoragePathSourceConfig.ServableVersionPolicy.Latest",
		fields: []*pbField{{name: "num_versions", kind: pbUint32}},
	}
	allPolicyType = &pbType{
		name: "tensorflow.serving.FileSystemStoragePathSourceConfig.ServableVersionPolicy.All",
	}
	specificPolicyType = &pbType{
		name:   "tensorflow.serving.FileSystemStoragePathSourceConfig.ServableVersionPolicy.Specific",
		fields: []*pbField{{name: "versions", kind: pbInt64, repeated: true}},
	}
	versionPolicyType = &pbType{
		name: "tensorflow.serving.FileSystemStoragePathSourceConfig.ServableVersionPolicy",
		fields: []*pbField{
			{name: "latest", kind: pbMessage, message: latestPolicyType, oneof: "policy_choice"},
			{name: "all", kind: pbMessage, message: allPolicyType, oneof: "policy_choice"},
			{name: "specific", kind: pbMessage, message: specificPolicyType, oneof: "policy_choice"},
		},
	}
	versionLabelType = &pbType{
		name: "tensorflow.serving.ModelConfig.VersionLabelsEntry",
		fields: []*pbField{
			{name: "key", kind: pbString},
			{name: "value", kind: pbInt64},
		},
	}
	modelConfigType = &pbType{
		name: "tensorflow.serving.ModelConfig",
		fields: []*pbField{
			{name: "name", kind: pbString},
			{name: "base_path", kind: pbString},
			{name: "model_type", kind: pbEnum, enum: []string{"MODEL_TYPE_UNSPECIFIED", "TENSORFLOW", "OTHER"}},
			{name: "model_platform", kind: pbString},
			{name: "model_version_policy", kind: pbMessage, message: versionPolicyType},
			{name: "version_labels", kind: pbMessage, message: versionLabelType, repeated: true},
			{name: "logging_config", refuse: "request logging is not simulated"},
		},
	}
	modelConfigListType = &pbType{
		name:   "tensorflow.serving.ModelConfigList",
		fields: []*pbField{{name: "config", kind: pbMessage, message: modelConfigType, repeated: true}},
	}
	modelServerConfigType = &pbType{
		name: "tensorflow.serving.ModelServerConfig",
		fields: []*pbField{
			{name: "model_config_list", kind: pbMessage, message: modelConfigListType, oneof: "config"},
			{name: "custom_model_config", oneof: "config", refuse: "TF Serving itself aborts on a custom model config"},
		},
	}

	prometheusConfigType = &pbType{
		name: "tensorflow.serving.PrometheusConfig",
		fields: []*pbField{
			{name: "enable", kind: pbBool},
			{name: "path", kind: pbString},
		},
	}
	monitoringConfigType = &pbType{
		name:   "tensorflow.serving.MonitoringConfig",
		fields: []*pbField{{name: "prometheus_config", kind: pbMessage, message: prometheusConfigType}},
	}

	int64ValueType  = &pbType{name: "google.protobuf.Int64Value", fields: []*pbField{{name: "value", kind: pbInt64}}}
	stringValueType = &pbType{name: "google.protobuf.StringValue", fields: []*pbField{{name: "value", kind: pbString}}}
	boolValueType   = &pbType{name: "google.protobuf.BoolValue", fields: []*pbField{{name: "value", kind: pbBool}}}
	batchingType    = &pbType{
		name: "tensorflow.serving.BatchingParameters",
		fields: []*pbField{
			{name: "max_batch_size", kind: pbMessage, message: int64ValueType},
			{name: "batch_timeout_micros", kind: pbMessage, message: int64ValueType},
			{name: "max_enqueued_batches", kind: pbMessage, message: int64ValueType},
			{name: "num_batch_threads", kind: pbMessage, message: int64ValueType},
			{name: "thread_pool_name", kind: pbMessage, message: stringValueType},
			{name: "enable_large_batch_splitting", kind: pbMessage, message: boolValueType},
			{name: "max_execution_batch_size", kind: pbMessage, message: int64ValueType},
			{name: "allowed_batch_sizes", kind: pbInt64, repeated: true},
			{name: "pad_variable_length_inputs", kind: pbBool},
		},
	}
)

type policyKind int

const (
	policyLatest policyKind = iota
	policySpecific
	policyAll
)

// versionPolicy says which of the versions found on disk are served.
type versionPolicy struct {
	kind     policyKind
	latest   int64 // num_versions as written; 0 serves one, as in TF Serving
	specific []int64
}

func (p versionPolicy) String() string {
	switch p.kind {
	case policySpecific:
		return fmt.Sprintf("specific %v", p.specific)
	case policyAll:
		return "all"
	}
	return fmt.Sprintf("latest %d", max(p.latest, 1))
}

// modelConfig is one model of the model config.
type modelConfig struct {
	name, basePath string
	platform       string
	modelType      int64 // the deprecated enum; 1 is TENSORFLOW
	policy         versionPolicy
	labels         map[string]int64
}

// serverConfig is a ModelServerConfig. A file without model_config_list
// is a config with nothing set, which TF Serving treats apart from an
// empty list: it loads nothing, and it cannot replace a list later.
type serverConfig struct {
	set    bool
	models []modelConfig
}

// readProtoFile reads a text proto file as TF Serving does, with its
// errors: the file's own problem, or "Invalid protobuf file" and where.
func readProtoFile(path string, typ *pbType) (*pbMsg, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errorf(codeNotFound, "%s; No such file or directory", path)
	case errors.Is(err, fs.ErrPermission):
		return nil, errorf(codePermissionDenied, "%s; Permission denied", path)
	case err != nil:
		return nil, errorf(codeUnknown, "%s; %v", path, err)
	}
	msg, err := parseTextProto(string(data), typ)
	if err != nil {
		return nil, errorf(codeInvalidArgument, "Invalid protobuf file: '%s': error parsing text-format %s: %v", path, typ.name, err)
	}
	return msg, nil
}

func readModelServerConfig(path string) (serverConfig, error) {
	msg, err := readProtoFile(path, modelServerConfigType)
	if err != nil {
		return serverConfig{}, err
	}
	return modelServerConfigFrom(msg), nil
}

func parseModelServerConfig(src string) (serverConfig, error) {
	msg, err := parseTextProto(src, modelServerConfigType)
	if err != nil {
		return serverConfig{}, err
	}
	return modelServerConfigFrom(msg), nil
}

func modelServerConfigFrom(msg *pbMsg) serverConfig {
	if !msg.has("model_config_list") {
		return serverConfig{}
	}
	cfg := serverConfig{set: true, models: []modelConfig{}}
	for _, v := range msg.sub("model_config_list").list("config") {
		c := v.msg
		m := modelConfig{
			name:      c.str("name"),
			basePath:  c.str("base_path"),
			platform:  c.str("model_platform"),
			modelType: c.num("model_type"),
			labels:    map[string]int64{},
		}
		if p := c.sub("model_version_policy"); p != nil {
			switch {
			case p.has("specific"):
				m.policy.kind = policySpecific
				for _, ver := range p.sub("specific").list("versions") {
					m.policy.specific = append(m.policy.specific, ver.num)
				}
			case p.has("all"):
				m.policy.kind = policyAll
			case p.has("latest"):
				m.policy.latest = p.sub("latest").num("num_versions")
			}
		}
		// A map in text format is a list of entries: the last one of a
		// key wins.
		for _, e := range c.list("version_labels") {
			m.labels[e.msg.str("key")] = e.msg.num("value")
		}
		cfg.models = append(cfg.models, m)
	}
	return cfg
}

// singleModelConfig is the config of --model_name and --model_base_path.
func singleModelConfig(name, basePath string) serverConfig {
	return serverConfig{set: true, models: []modelConfig{{
		name: name, basePath: basePath, platform: tensorflowPlatform, labels: map[string]int64{},
	}}}
}

const tensorflowPlatform = "tensorflow"

// checkModels refuses a model list TF Serving refuses when it (re)loads
// a config, and settles each model's platform.
func checkModels(models []modelConfig) ([]modelConfig, error) {
	var seen []string
	out := make([]modelConfig, 0, len(models))
	for _, m := range models {
		if slices.Contains(seen, m.name) {
			return nil, errorf(codeInvalidArgument, "Illegal to list model %s multiple times in config list", m.name)
		}
		seen = append(seen, m.name)
		if !strings.HasPrefix(m.basePath, "/") && !strings.Contains(m.basePath, "://") {
			return nil, errorf(codeInvalidArgument, "Expected model %s to have an absolute path or URI; got base_path()=%s", m.name, m.basePath)
		}
		switch {
		case m.modelType != 0 && m.platform != "":
			return nil, errorf(codeInvalidArgument, "Illegal setting both ModelServerConfig::model_type (deprecated) and ModelServerConfig::model_platform, model name is %s", m.name)
		case m.modelType == 1:
			m.platform = tensorflowPlatform
		case m.modelType != 0:
			return nil, errorf(codeInvalidArgument, "ModelServerConfig::model_type choice %d not supported.", m.modelType)
		case m.platform == "":
			return nil, errorf(codeInvalidArgument, "Illegal setting neither ModelServerConfig::model_type (deprecated) nor ModelServerConfig::model_platform, model name is %s", m.name)
		case m.platform != tensorflowPlatform:
			return nil, errorf(codeInvalidArgument, "Model %s requests platform %q, which tfservingdouble does not serve (only %q)", m.name, m.platform, tensorflowPlatform)
		}
		m.modelType = 0
		out = append(out, m)
	}
	return out, nil
}

// defaultMetricsPath is where TF Serving serves Prometheus metrics when
// the monitoring config enables them without a path.
const defaultMetricsPath = "/monitoring/prometheus/metrics"

// readMonitoringConfig gives the metrics path, "" when Prometheus is not
// enabled.
func readMonitoringConfig(path string) (string, error) {
	msg, err := readProtoFile(path, monitoringConfigType)
	if err != nil {
		return "", err
	}
	prom := msg.sub("prometheus_config")
	if prom == nil || prom.num("enable") == 0 {
		return "", nil
	}
	if p := prom.str("path"); p != "" {
		return p, nil
	}
	return defaultMetricsPath, nil
}

// readBatchingParameters only checks the file: TF Serving refuses to
// start on one it cannot parse, but the double does not batch.
func readBatchingParameters(path string) error {
	_, err := readProtoFile(path, batchingType)
	return err
}
