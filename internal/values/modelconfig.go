package values

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// ModelConfig writes TF Serving's model config file (a ModelServerConfig
// in protobuf text format) for one model. Every string is escaped, so a
// name or path can never break out of its field.
func ModelConfig(name, basePath string, policy *servingv1alpha1.VersionPolicy, labels map[string]int64) (string, error) {
	var b strings.Builder
	b.WriteString("model_config_list {\n  config {\n")
	fmt.Fprintf(&b, "    name: %s\n", quoteText(name))
	fmt.Fprintf(&b, "    base_path: %s\n", quoteText(basePath))
	b.WriteString("    model_platform: \"tensorflow\"\n")
	switch {
	case policy == nil:
		b.WriteString("    model_version_policy {\n      latest {\n        num_versions: 1\n      }\n    }\n")
	case policy.Latest != nil:
		n := policy.Latest.NumVersions
		if n < 1 {
			n = 1
		}
		fmt.Fprintf(&b, "    model_version_policy {\n      latest {\n        num_versions: %d\n      }\n    }\n", n)
	case policy.Specific != nil:
		if len(policy.Specific.Versions) == 0 {
			return "", &Error{"spec.model.versionPolicy.specific.versions", "must list at least one version"}
		}
		b.WriteString("    model_version_policy {\n      specific {\n")
		for _, v := range policy.Specific.Versions {
			if v < 1 {
				return "", &Error{"spec.model.versionPolicy.specific.versions", fmt.Sprintf("version %d: versions start at 1", v)}
			}
			fmt.Fprintf(&b, "        versions: %d\n", v)
		}
		b.WriteString("      }\n    }\n")
	case policy.All != nil:
		b.WriteString("    model_version_policy {\n      all {\n      }\n    }\n")
	default:
		return "", &Error{"spec.model.versionPolicy", "must set one of latest, specific or all"}
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if labels[k] < 1 {
			return "", &Error{"spec.model.versionLabels." + k, "versions start at 1"}
		}
		fmt.Fprintf(&b, "    version_labels {\n      key: %s\n      value: %d\n    }\n", quoteText(k), labels[k])
	}
	b.WriteString("  }\n}\n")
	return b.String(), nil
}

// quoteText quotes s as a protobuf text-format string: printable ASCII as
// it is, quotes and backslashes escaped, every other byte as an octal
// escape, which every protobuf text parser reads back byte for byte.
func quoteText(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "\\%03o", c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
