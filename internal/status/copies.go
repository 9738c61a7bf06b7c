package status

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/modelserver-dev/modelserver-operator/internal/clip"
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

// destOf is the --dest of pod p's fetch container name, "" if none.
func destOf(p *corev1.Pod, name string) string {
	i := slices.IndexFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		return ""
	}
	return values.PodFetchDest(p.Spec.InitContainers[i])
}

// FetchingCopy is a serving pod fetching its own copy of a model (storage
// mode PerPod): its fetch container runs.
type FetchingCopy struct {
	Pod       *corev1.Pod
	Container string
	// Before is how the container's attempt before this one failed, as
	// the fetcher said ("Timeout: ..."), "" if none did: the kubelet runs
	// a failed fetch again within seconds the first times, so the failure
	// is seldom seen otherwise.
	Before  string
	started time.Time
}

// FetchingCopies are the serving pods, neither ready nor being deleted,
// whose fetch of their own copy runs, the one whose fetch started last
// first: it has the most left to do.
func FetchingCopies(pods []corev1.Pod) []FetchingCopy {
	var out []FetchingCopy
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || PodReady(p) {
			continue
		}
		for _, cs := range p.Status.InitContainerStatuses {
			if run := cs.State.Running; run != nil && values.IsPodFetchContainer(cs.Name) {
				out = append(out, FetchingCopy{Pod: p, Container: cs.Name, Before: fetchFailure(cs.LastTerminationState.Terminated), started: run.StartedAt.Time})
				break
			}
		}
	}
	slices.SortStableFunc(out, func(a, b FetchingCopy) int { return b.started.Compare(a.started) })
	return out
}

// fetchFailure is the reason and message of a fetch container's exit, as
// the fetcher wrote them, "" for a success, a kill (the memory limit's,
// the node's) or an exit without its words.
func fetchFailure(exit *corev1.ContainerStateTerminated) string {
	if exit == nil || exit.ExitCode == 0 || exit.Reason == "OOMKilled" || strings.TrimSpace(exit.Message) == "" {
		return ""
	}
	reason, msg := fetch.ParseFailure(exit.Message, "")
	return clip.To(reason+": "+msg, maxWords)
}

// CopiesFetching says that n serving pods are fetching their own copies
// of the model, and how far the one that started last has come, if its
// log said (last): for status.message, where a rollout or an autoscaler's
// new pods are otherwise only "not ready" while they download; and how
// its attempt before failed, if one did.
func CopiesFetching(n int, last *fetch.Progress, before string) string {
	msg := "1 serving pod is fetching its copy of the model"
	if n > 1 {
		msg = fmt.Sprintf("%d serving pods are fetching their copies of the model", n)
	}
	if last != nil {
		if n > 1 {
			msg += ", the last started"
		}
		progress := APIProgress("", last)
		msg += ": " + progressClause(progress) + leftClause(timeLeft(progress))
	}
	if before != "" {
		msg += "; its attempt before failed, " + before
	}
	return msg
}
