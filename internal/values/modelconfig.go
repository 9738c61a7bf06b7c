package values

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
	"github.com/modelserver-dev/modelserver-operator/internal/pbtext"
)

// ModelEntry is one model of the model config.
type ModelEntry struct {
	Name, BasePath string
	Policy         *servingv1alpha1.VersionPolicy
	Labels         map[string]int64
	// Field is the spec field the model comes from, for errors.
	Field string
}

// ModelConfig writes TF Serving's model config file (a ModelServerConfig
// in protobuf text format). Every string is escaped, so a name or path can
// never break out of its field. No models gives an empty list, which TF
// Serving accepts.
func ModelConfig(models []ModelEntry) (string, error) {
	var b strings.Builder
	b.WriteString("model_config_list {\n")
	for _, m := range models {
		if err := writeModel(&b, m); err != nil {
			return "", err
		}
	}
	b.WriteString("}\n")
	return b.String(), nil
}

func writeModel(b *strings.Builder, m ModelEntry) error {
	// Protobuf strings are UTF-8; TF Serving refuses a config with any
	// other bytes in them, and would serve nothing.
	if !utf8.ValidString(m.Name) {
		return &Error{m.Field + ".name", "must be valid UTF-8"}
	}
	if !utf8.ValidString(m.BasePath) {
		return &Error{m.Field + ".storageUri", "must be valid UTF-8"}
	}
	for k := range m.Labels {
		if !utf8.ValidString(k) {
			return &Error{m.Field + ".versionLabels", "keys must be valid UTF-8"}
		}
	}
	if err := checkVersions(m.Field, m.Policy, m.Labels); err != nil {
		return err
	}
	b.WriteString("  config {\n")
	fmt.Fprintf(b, "    name: %s\n", pbtext.Quote(m.Name))
	fmt.Fprintf(b, "    base_path: %s\n", pbtext.Quote(m.BasePath))
	b.WriteString("    model_platform: \"tensorflow\"\n")
	policy := m.Policy
	switch {
	case policy == nil:
		b.WriteString("    model_version_policy {\n      latest {\n        num_versions: 1\n      }\n    }\n")
	case policy.Latest != nil:
		n := policy.Latest.NumVersions
		if n < 1 {
			n = 1
		}
		fmt.Fprintf(b, "    model_version_policy {\n      latest {\n        num_versions: %d\n      }\n    }\n", n)
	case policy.Specific != nil:
		b.WriteString("    model_version_policy {\n      specific {\n")
		for _, v := range policy.Specific.Versions {
			fmt.Fprintf(b, "        versions: %d\n", v)
		}
		b.WriteString("      }\n    }\n")
	case policy.All != nil:
		b.WriteString("    model_version_policy {\n      all {\n      }\n    }\n")
	}
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		fmt.Fprintf(b, "    version_labels {\n      key: %s\n      value: %d\n    }\n", pbtext.Quote(k), m.Labels[k])
	}
	b.WriteString("  }\n")
	return nil
}

// checkVersions refuses a version policy or labels TF Serving would
// refuse, naming the field of the model (spec.model or spec.models[i]).
func checkVersions(field string, policy *servingv1alpha1.VersionPolicy, labels map[string]int64) error {
	switch {
	case policy == nil || policy.Latest != nil || policy.All != nil:
	case policy.Specific != nil:
		if len(policy.Specific.Versions) == 0 {
			return &Error{field + ".versionPolicy.specific.versions", "must list at least one version"}
		}
		for _, v := range policy.Specific.Versions {
			if v < 1 {
				return &Error{field + ".versionPolicy.specific.versions", fmt.Sprintf("version %d: versions start at 1", v)}
			}
		}
	default:
		return &Error{field + ".versionPolicy", "must set one of latest, specific or all"}
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if labels[k] < 1 {
			return &Error{field + ".versionLabels." + k, "versions start at 1"}
		}
	}
	return nil
}

// ServedVersions are the versions a policy selects among those found:
// what TF Serving loads.
func ServedVersions(policy *servingv1alpha1.VersionPolicy, found []int64) []int64 {
	return VersionsOf(policy).Select(found)
}

// VersionsOf is what a version policy serves, which is all its model's
// fetch copies: TF Serving's default, without a policy, is the latest
// version alone.
func VersionsOf(policy *servingv1alpha1.VersionPolicy) fetchcontract.Versions {
	switch {
	case policy == nil:
		return fetchcontract.Versions{Latest: 1}
	case policy.Latest != nil:
		return fetchcontract.Versions{Latest: max(1, int(policy.Latest.NumVersions))}
	case policy.Specific != nil:
		return fetchcontract.Versions{Specific: policy.Specific.Versions}
	}
	return fetchcontract.Versions{}
}

// BatchingConfig writes TF Serving's BatchingParameters in protobuf text
// format.
func BatchingConfig(b *servingv1alpha1.Batching) (string, error) {
	if err := checkBatching(b); err != nil {
		return "", err
	}
	maxBatch := maxBatchSize(b)
	var s strings.Builder
	field := func(name string, v int64) { fmt.Fprintf(&s, "%s { value: %d }\n", name, v) }
	field("max_batch_size", int64(maxBatch))
	field("batch_timeout_micros", ptr.Deref(b.BatchTimeoutMicros, 1000))
	enqueued := b.MaxEnqueuedBatches
	if enqueued < 1 {
		enqueued = 100
	}
	field("max_enqueued_batches", int64(enqueued))
	if b.NumBatchThreads != nil {
		field("num_batch_threads", int64(*b.NumBatchThreads))
	}
	for _, size := range b.AllowedBatchSizes {
		fmt.Fprintf(&s, "allowed_batch_sizes: %d\n", size)
	}
	return s.String(), nil
}

func maxBatchSize(b *servingv1alpha1.Batching) int32 {
	if b.MaxBatchSize < 1 {
		return 32
	}
	return b.MaxBatchSize
}

// checkBatching refuses batch sizes TF Serving would refuse.
func checkBatching(b *servingv1alpha1.Batching) error {
	maxBatch := maxBatchSize(b)
	if n := len(b.AllowedBatchSizes); n > 0 {
		if b.AllowedBatchSizes[n-1] != maxBatch {
			return &Error{"spec.batching.allowedBatchSizes", fmt.Sprintf("the last size must equal maxBatchSize (%d)", maxBatch)}
		}
		if !slices.IsSorted(b.AllowedBatchSizes) {
			return &Error{"spec.batching.allowedBatchSizes", "must be in increasing order"}
		}
	}
	return nil
}
