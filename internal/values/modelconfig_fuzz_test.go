package values

import (
	"errors"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// modelServerConfig describes the part of TF Serving's ModelServerConfig
// (tensorflow_serving/config/model_server_config.proto and
// file_system_storage_path_source.proto) that ModelConfig writes, with
// TF Serving's field names and numbers, so that its output can be parsed
// by a real protobuf text parser rather than looked at as text.
func modelServerConfig(t testing.TB) protoreflect.MessageDescriptor {
	t.Helper()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	i64 := descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum()
	u32 := descriptorpb.FieldDescriptorProto_TYPE_UINT32.Enum()
	msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
	field := func(name string, num int32, label *descriptorpb.FieldDescriptorProto_Label, typ *descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Label: label, Type: typ, JsonName: proto.String(name)}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	file := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("model_server_config.proto"),
		Package: proto.String("tensorflow.serving"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("ModelServerConfig"), Field: []*descriptorpb.FieldDescriptorProto{
				field("model_config_list", 1, opt, msg, ".tensorflow.serving.ModelConfigList"),
			}},
			{Name: proto.String("ModelConfigList"), Field: []*descriptorpb.FieldDescriptorProto{
				field("config", 1, rep, msg, ".tensorflow.serving.ModelConfig"),
			}},
			{
				Name: proto.String("ModelConfig"),
				Field: []*descriptorpb.FieldDescriptorProto{
					field("name", 1, opt, str, ""),
					field("base_path", 2, opt, str, ""),
					field("model_platform", 4, opt, str, ""),
					field("model_version_policy", 7, opt, msg, ".tensorflow.serving.ServableVersionPolicy"),
					field("version_labels", 8, rep, msg, ".tensorflow.serving.ModelConfig.VersionLabelsEntry"),
				},
				NestedType: []*descriptorpb.DescriptorProto{{
					Name:    proto.String("VersionLabelsEntry"),
					Field:   []*descriptorpb.FieldDescriptorProto{field("key", 1, opt, str, ""), field("value", 2, opt, i64, "")},
					Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
				}},
			},
			{
				Name: proto.String("ServableVersionPolicy"),
				Field: []*descriptorpb.FieldDescriptorProto{
					field("latest", 100, opt, msg, ".tensorflow.serving.ServableVersionPolicy.Latest"),
					field("all", 101, opt, msg, ".tensorflow.serving.ServableVersionPolicy.All"),
					field("specific", 102, opt, msg, ".tensorflow.serving.ServableVersionPolicy.Specific"),
				},
				NestedType: []*descriptorpb.DescriptorProto{
					{Name: proto.String("Latest"), Field: []*descriptorpb.FieldDescriptorProto{field("num_versions", 1, opt, u32, "")}},
					{Name: proto.String("All")},
					{Name: proto.String("Specific"), Field: []*descriptorpb.FieldDescriptorProto{field("versions", 1, rep, i64, "")}},
				},
			},
		},
	}
	fd, err := protodesc.NewFile(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().ByName("ModelServerConfig")
}

// FuzzModelConfig feeds ModelConfig arbitrary names, paths, labels and
// policies. It must never panic; it either refuses with a *values.Error or
// writes protobuf text that parses as a ModelServerConfig holding exactly
// the strings it was given: nothing in them can add a field or a model.
func FuzzModelConfig(f *testing.F) {
	f.Add("resnet", "/models/abc", "stable", int64(1), uint8(0), int64(2))
	f.Add(`x" } config { name: "evil`, "/models/x\n", "canary", int64(2), uint8(1), int64(1))
	f.Add("a\\\"b", "/m/\x00\x7f", "k\"}", int64(0), uint8(2), int64(-1))
	f.Add("модель", "/models/ü", "", int64(3), uint8(3), int64(5))
	f.Add("bad\xffutf8", "/models/x", "l", int64(1), uint8(0), int64(1))
	desc := modelServerConfig(f)
	f.Fuzz(func(t *testing.T, name, basePath, label string, version int64, policyKind uint8, policyVersion int64) {
		policy := fuzzPolicy(policyKind, policyVersion)
		var labels map[string]int64
		if label != "" {
			labels = map[string]int64{label: version}
		}
		text, err := ModelConfig([]ModelEntry{{Name: name, BasePath: basePath, Policy: policy, Labels: labels, Field: "spec.model"}})
		if err != nil {
			var ve *Error
			if !errors.As(err, &ve) {
				t.Fatalf("error %v is not a *values.Error", err)
			}
			return
		}
		if !utf8.ValidString(name) || !utf8.ValidString(basePath) || !utf8.ValidString(label) {
			t.Fatalf("wrote a config for invalid UTF-8, which TF Serving cannot parse:\n%s", text)
		}
		m := dynamicpb.NewMessage(desc)
		if err := prototext.Unmarshal([]byte(text), m); err != nil {
			t.Fatalf("not a ModelServerConfig: %v\n%s", err, text)
		}
		list := m.Get(desc.Fields().ByName("model_config_list")).Message()
		configs := list.Get(list.Descriptor().Fields().ByName("config")).List()
		if configs.Len() != 1 {
			t.Fatalf("%d model configs, want 1:\n%s", configs.Len(), text)
		}
		cfg := configs.Get(0).Message()
		get := func(field string) protoreflect.Value {
			return cfg.Get(cfg.Descriptor().Fields().ByName(protoreflect.Name(field)))
		}
		if got := get("name").String(); got != name {
			t.Errorf("name %q, want %q", got, name)
		}
		if got := get("base_path").String(); got != basePath {
			t.Errorf("base_path %q, want %q", got, basePath)
		}
		checkVersionLabels(t, get("version_labels").Map(), labels)
		// What was parsed, written again and parsed again, is the same.
		again, err := prototext.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2 := dynamicpb.NewMessage(desc)
		if err := prototext.Unmarshal(again, m2); err != nil || !proto.Equal(m, m2) {
			t.Errorf("does not round-trip (%v):\n%s\n%s", err, text, again)
		}
	})
}

// fuzzPolicy is one of the version policies, or none, picked by kind.
func fuzzPolicy(kind uint8, version int64) *servingv1alpha1.VersionPolicy {
	switch kind % 4 {
	case 1:
		return &servingv1alpha1.VersionPolicy{Latest: &servingv1alpha1.LatestVersions{NumVersions: int32(version)}}
	case 2:
		return &servingv1alpha1.VersionPolicy{Specific: &servingv1alpha1.SpecificVersions{Versions: []int64{version}}}
	case 3:
		return &servingv1alpha1.VersionPolicy{All: &servingv1alpha1.AllVersions{}}
	}
	return nil
}

// checkVersionLabels holds the parsed version_labels map to the labels
// written.
func checkVersionLabels(t *testing.T, got protoreflect.Map, labels map[string]int64) {
	t.Helper()
	if got.Len() != len(labels) {
		t.Errorf("%d version labels, want %d", got.Len(), len(labels))
	}
	for k, v := range labels {
		if g := got.Get(protoreflect.ValueOfString(k).MapKey()); !g.IsValid() || g.Int() != v {
			t.Errorf("version label %q = %v, want %d", k, g, v)
		}
	}
}
