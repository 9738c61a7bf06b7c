package values

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// archLabels are the node labels that name a node's CPU architecture: a
// pod template that selects on either has chosen its architecture.
var archLabels = []string{corev1.LabelArchStable, "beta.kubernetes.io/arch"}

// archSelector is what the operator adds to the pod's node selector so
// that an image built for one architecture is not scheduled on a node of
// another, where it could only fail (`exec format error`, or no match for
// the platform in the image's manifest): {kubernetes.io/arch: amd64} for
// TF Serving's official images, which are built for linux/amd64 alone,
// nil for any other image (the operator cannot tell what it was built
// for) and for a pod template that already chooses an architecture.
//
// The fetch pods get it too: on a node-local volume the first pod to
// mount the claim decides its node, and the serving pods must be able to
// follow.
func archSelector(image string, pt servingv1alpha1.PodTemplate) map[string]string {
	if !officialTFServing(image) || choosesArch(pt) {
		return nil
	}
	return map[string]string{corev1.LabelArchStable: "amd64"}
}

// officialTFServing says whether image is from Docker Hub's
// tensorflow/serving repository, whatever its tag or digest.
func officialTFServing(image string) bool {
	repo, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	for _, hub := range []string{"docker.io/", "index.docker.io/", "registry-1.docker.io/"} {
		if rest, ok := strings.CutPrefix(repo, hub); ok {
			repo = rest
			break
		}
	}
	return repo == "tensorflow/serving"
}

// choosesArch says whether the pod template selects nodes by
// architecture, in its node selector or its required node affinity.
func choosesArch(pt servingv1alpha1.PodTemplate) bool {
	for k := range pt.NodeSelector {
		if slices.Contains(archLabels, k) {
			return true
		}
	}
	if pt.Affinity == nil || pt.Affinity.NodeAffinity == nil || pt.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	for _, term := range pt.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if slices.Contains(archLabels, e.Key) {
				return true
			}
		}
	}
	return false
}

// beyond is what selector adds to base: its entries base does not have.
// A live Job's node selector is the pod's of its time plus what the
// operator added; its generation says the pod's has not changed since.
func beyond(selector, base map[string]string) map[string]string {
	extra := maps.Clone(selector)
	maps.DeleteFunc(extra, func(k, v string) bool {
		b, ok := base[k]
		return ok && b == v
	})
	if len(extra) == 0 {
		return nil
	}
	return extra
}
