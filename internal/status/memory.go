package status

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
)

// ModelsOverMemory warns of a serving container whose memory limit is
// below the size of the models it serves. TF Serving holds each served
// version's graph and variables in memory, so such a server is
// OOM-killed as it loads them; without the warning the status says so
// only once the pods loop, and not why. A model whose fetch holds
// versions its policy does not serve (an archive's, an image's) is left
// out: its files overstate what is loaded. "" when the models fit, or
// there is no limit.
func ModelsOverMemory(limits corev1.ResourceList, fetches []ModelFetch) string {
	limit, ok := limits[corev1.ResourceMemory]
	if !ok || limit.Sign() <= 0 {
		return ""
	}
	var (
		total int64
		named []string
	)
	for _, m := range fetches {
		st := m.Status
		if st.FetchedGeneration == "" || st.SizeBytes <= 0 || !slices.Equal(st.Versions, st.ServedVersions) {
			continue
		}
		total += st.SizeBytes
		named = append(named, m.Name)
	}
	if total <= limit.Value() {
		return ""
	}
	what, it := "model "+named[0], "it"
	if len(named) > 1 {
		what, it = "models "+strings.Join(named, ", "), "them"
	}
	return fmt.Sprintf("spec.resources.limits.memory: %s is less than the %s of %s, which TF Serving holds in memory: the serving pods will be OOM-killed as they load %s; raise the limit above that, with room for the server",
		limit.String(), fetch.FormatBytes(total), what, it)
}
