package status

import (
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// Copy is a serving pod's own copy of a model (storage mode PerPod) whose
// digest is not the one its fetch Job verified.
type Copy struct {
	Pod, Container string
	// Digest is the copy's, Pinned the Job's.
	Digest, Pinned string
}

// UnverifiedCopies are the copies of pods whose fetch containers ended
// with another digest than their generation's pin. Only a pod that
// started before its generation was pinned can have one: a new
// ModelServer's first pods fetch beside its first Job, and a store
// changed in place meanwhile gives them what the Job did not verify.
// Pods started since check their copies themselves (fetch --pins).
func UnverifiedCopies(pods []corev1.Pod, pins map[string]values.Pin) []Copy {
	var out []Copy
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range p.Status.InitContainerStatuses {
			end := cs.State.Terminated
			if !values.IsPodFetchContainer(cs.Name) || end == nil || end.ExitCode != 0 {
				continue
			}
			pin := pins[path.Base(destOf(p, cs.Name))]
			sum, ok := fetch.ParseSummary(end.Message)
			if pin.Digest != "" && ok && sum.Digest != pin.Digest {
				out = append(out, Copy{Pod: p.Name, Container: cs.Name, Digest: sum.Digest, Pinned: pin.Digest})
			}
		}
	}
	return out
}

// destOf is the --dest of pod p's init container name, "" if none.
func destOf(p *corev1.Pod, name string) string {
	i := slices.IndexFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		return ""
	}
	args := p.Spec.InitContainers[i].Args
	if j := slices.Index(args, "--dest"); j >= 0 && j+1 < len(args) {
		return args[j+1]
	}
	return ""
}
