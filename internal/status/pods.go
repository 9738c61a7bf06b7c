package status

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// RolloutStalled says whether the serving pods are not all ready and
// nothing has moved for grace: neither the rollout (the Deployment's
// Progressing condition, whose lastUpdateTime the Deployment controller
// moves at each step forward, and its Available condition, which turns
// False when a pod is lost after it) nor the model (servingSince, when the
// pods got a model to load). lookAgainIn is when to look again: if not stalled
// yet, when it would be (0 when the pods are ready, or refused:
// RolloutProblem says why); if stalled, when to read the pods again.
//
// The serving pods are not watched: their watch events would cost the
// operator as much as the Deployments' at scale. They are read only once
// their rollout has stood still for grace, then again after as long as it
// has stood still, from twice grace up to StalledRecheckMax: a cause that
// lasts is read a few times an hour, not every minute, which at scale
// (a registry down for every ModelServer) would take the operator's
// share of the apiserver.
func RolloutStalled(o Observation, servingSince time.Time, grace time.Duration, now time.Time) (stalled bool, lookAgainIn time.Duration) {
	d := o.Deployment
	if !o.Serving || d == nil || d.Status.ObservedGeneration < d.Generation || replicaFailure(d) != nil {
		return false, 0
	}
	want := o.DesiredReplicas
	if d.Status.ReadyReplicas >= want && d.Status.UpdatedReplicas >= want && d.Status.Replicas <= d.Status.UpdatedReplicas {
		return false, 0
	}
	since := servingSince
	for _, c := range d.Status.Conditions {
		moved := c.LastUpdateTime.Time
		switch {
		case c.Type == appsv1.DeploymentProgressing:
		case c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionFalse:
			// Pods of a finished rollout lost since: the rollout's last
			// step may be long before.
			moved = c.LastTransitionTime.Time
		default:
			continue
		}
		if moved.After(since) {
			since = moved
		}
	}
	age := now.Sub(since)
	if age < grace {
		return false, grace - age
	}
	return true, min(max(age, 2*grace), StalledRecheckMax)
}

// ServingSince is when the serving pods got a model to load, as far as
// the status st tells at now: when the ModelFetched condition last turned
// True; the zero time while a new model is fetched and the pods serve one
// fetched before (then only the rollout's progress counts); now while the
// first model is still on its way, which the pods wait for without being
// stalled.
func ServingSince(st servingv1alpha1.ModelServerStatus, now time.Time) time.Time {
	if c := meta.FindStatusCondition(st.Conditions, servingv1alpha1.ConditionModelFetched); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	if st.Model != nil && st.Model.FetchedGeneration != "" {
		return time.Time{}
	}
	for _, m := range st.Models {
		if m.FetchedGeneration != "" {
			return time.Time{}
		}
	}
	return now
}

// StalledRecheckMax is the longest pods that stand stalled go unread.
const StalledRecheckMax = 10 * time.Minute

// The causes of a stalled rollout, as the metric of stalled rollouts
// counts them: what stops the most pods.
const (
	CauseUnschedulable  = "Unschedulable"
	CauseImagePull      = "ImagePull"
	CauseCrashLoop      = "CrashLoop"
	CauseContainerStart = "ContainerStart"
	// CausePodWarning is a pod that has started nothing, and a Warning
	// Event about it (a volume, the network).
	CausePodWarning = "PodWarning"
	// CauseUnknown is pods that say nothing wrong: not ready yet (a slow
	// model load, a readiness probe that fails), or still being created
	// without a warning.
	CauseUnknown = "Unknown"
	// CauseFetching is pods that say nothing wrong and fetch their own
	// copies of the model (storage mode PerPod, FetchingCopies): a
	// download under way, which the fetcher fails itself if it stops.
	CauseFetching = "Fetching"
)

// Causes are the values of a stalled rollout's cause.
var Causes = []string{CauseUnschedulable, CauseImagePull, CauseCrashLoop, CauseContainerStart, CausePodWarning, CauseFetching, CauseUnknown}

// podWarningsBenign are the reasons of Warnings the kubelet records about
// a pod on its way to starting that hold nothing back: AlreadyMountedVolume
// says a volume another pod mounted keeps its group rather than the pod's
// fsGroup (seen on a real node of 1.37.2 for a local volume, as a
// refreshed model's new pod started beside the old one on a busy node).
var podWarningsBenign = []string{"AlreadyMountedVolume"}

// podWaitingBenign are the reasons a container waits for on its way to
// running when nothing is wrong.
var podWaitingBenign = []string{"", "ContainerCreating", "PodInitializing"}

// pullFailure are the waiting reasons of a container whose image the
// kubelet could not pull; the kubelet alternates between the first (a
// pull failed) and ImagePullBackOff (waiting to try again), and names the
// cause of the first otherwise (RegistryUnavailable, ...).
var pullFailure = []string{"ErrImagePull", "ImagePullBackOff", "RegistryUnavailable", "SignatureValidationFailed", "InvalidImageName", "ErrImageNeverPull"}

// backOffPrefix is how the kubelet begins the message of ImagePullBackOff,
// before the failure that the previous pull's message said on its own, as
// `<reason>: <message>`.
var backOffPrefix = regexp.MustCompile(`^Back-off pulling image "[^"]*"(: [A-Za-z]+: )?`)

// ServingPodsProblem says what keeps the serving pods from being ready, as
// their own status says: pods no node can take, images that cannot be
// pulled, containers that keep exiting or cannot start. For a pod that has
// started nothing yet (NothingStarted), whose status says only that it is
// being created, it is the newest of warnings (the Warning Events of
// pods) about it: a volume that does not mount, a network the runtime
// cannot set up. The message is "" (and the cause CauseUnknown) if
// none of these: pods still starting, or running and loading the model,
// which their count already says. Ready and terminating pods are passed
// over. The cause is that of the problem of most pods.
//
// A container that the kubelet keeps killing because a probe fails
// (MayBeProbeKilled) is named as such by the kubelet's Killing Events
// among events; its exit code alone would read as a crash.
//
// The text stays the same while the cause does, so that the kubelet's
// retries cost no status write: it counts pods, not attempts, names no
// pod (a pod's name changes when it is replaced) nor the runtime's IDs,
// and says a failed pull the same way whether the kubelet is pulling
// again or backing off.
func ServingPodsProblem(pods []corev1.Pod, events []corev1.Event) (cause, message string) {
	return podsProblem(pods, events, "serving pod")
}

// FetchPodsProblem says what keeps model-fetch pods that have not started
// from starting, as ServingPodsProblem says it of serving pods: pods no
// node can take (a claim no volume binds, a nodeSelector no node has), an
// image that cannot be pulled, a volume that does not mount. The message
// is "" (and the cause CauseUnknown) if their status and Warnings say
// nothing wrong.
func FetchPodsProblem(pods []corev1.Pod, events []corev1.Event) (cause, message string) {
	return podsProblem(pods, events, "fetch pod")
}

// podsProblem is ServingPodsProblem for pods called noun.
func podsProblem(pods []corev1.Pod, events []corev1.Event, noun string) (cause, message string) {
	var problems []podProblem
	count := map[podProblem]int{}
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || PodReady(p) {
			continue
		}
		problem := statusProblem(p, events)
		if problem.text == "" && NothingStarted(p) {
			problem = creationProblem(p, events)
		}
		if problem.text == "" {
			continue
		}
		if count[problem] == 0 {
			problems = append(problems, problem)
		}
		count[problem]++
	}
	if len(problems) == 0 {
		return CauseUnknown, ""
	}
	// The problem of most pods first; equal counts in the order met.
	slices.SortStableFunc(problems, func(a, b podProblem) int { return count[b] - count[a] })
	parts := make([]string, 0, len(problems))
	for _, problem := range problems {
		who := "1 " + noun
		if n := count[problem]; n > 1 {
			who = fmt.Sprintf("%d %ss", n, noun)
		}
		parts = append(parts, who+" "+problem.text)
	}
	return problems[0].cause, oneLine(strings.Join(parts, "; "))
}

// podProblem is the first thing wrong with one pod: its cause, and text
// that follows "1 serving pod" or "2 fetch pods".
type podProblem struct{ cause, text string }

// NothingStarted says a pod is on a node and being created, none of its
// containers started yet, with no reason in its status: the kubelet is
// still mounting its volumes or setting up its network, or failing to,
// which only its Events say.
func NothingStarted(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Spec.NodeName == "" || PodReady(p) {
		return false
	}
	for _, cs := range containerStatuses(p) {
		if w := cs.State.Waiting; w == nil || !slices.Contains(podWaitingBenign, w.Reason) {
			return false
		}
	}
	return true
}

// runtimeID is an ID of a sandbox or container, which a retry changes.
var runtimeID = regexp.MustCompile(`\b[0-9a-f]{32,}\b`)

// creationProblem is the newest warning about pod p since it was
// scheduled, or none: the scheduler's warnings from before are over. Its
// FailedScheduling warnings are passed over whenever they were said: the
// condition's time is to the second, and the scheduler may record one
// after it bound the pod, as a node joins (the Events are written apart
// from the binding).
func creationProblem(p *corev1.Pod, events []corev1.Event) podProblem {
	scheduled := ScheduledAt(p)
	newest := newestEvent(p.UID, events, func(e *corev1.Event) bool {
		return e.Type == corev1.EventTypeWarning && e.Reason != failedScheduling && !slices.Contains(podWarningsBenign, e.Reason) &&
			!EventTime(e).Before(scheduled)
	})
	if newest == nil {
		return podProblem{}
	}
	return podProblem{CausePodWarning, withDetail("cannot start: "+newest.Reason, runtimeID.ReplaceAllString(newest.Message, "…"))}
}

// ScheduledAt is when pod p was bound to its node, as its PodScheduled
// condition says; the zero time if it does not say so.
func ScheduledAt(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// failedScheduling is the reason of the scheduler's Events about a pod it
// finds no node for.
const failedScheduling = "FailedScheduling"

// newestEvent is the newest of events about the object of UID uid that
// match, or nil.
func newestEvent(uid types.UID, events []corev1.Event, match func(*corev1.Event) bool) *corev1.Event {
	var newest *corev1.Event
	for i := range events {
		e := &events[i]
		if e.InvolvedObject.UID != uid || !match(e) {
			continue
		}
		if newest == nil || EventTime(e).After(EventTime(newest)) {
			newest = e
		}
	}
	return newest
}

// EventTime is when an Event last happened.
func EventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// statusProblem is the first thing wrong with one pod that its status
// says, or none; a container's exits are read with the kubelet's Killing
// Events among events.
func statusProblem(p *corev1.Pod, events []corev1.Event) podProblem {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return podProblem{CauseUnschedulable, withDetail("cannot be scheduled", c.Message)}
		}
	}
	for _, cs := range containerStatuses(p) {
		w, exit := cs.State.Waiting, lastExit(cs)
		switch {
		case w != nil && slices.Contains(pullFailure, w.Reason):
			return podProblem{CauseImagePull, withDetail(fmt.Sprintf("cannot pull image %q", cs.Image), backOffPrefix.ReplaceAllString(w.Message, ""))}
		case values.IsPodFetchContainer(cs.Name) && fetchFailure(exit) != "":
			// Storage mode PerPod: the fetcher's reason and message, read
			// as a fetch Job's are.
			return podProblem{CauseCrashLoop, fmt.Sprintf("cannot fetch its copy of the model (container %q): %s", cs.Name, fetchFailure(exit))}
		case w != nil && w.Reason == "CrashLoopBackOff", exit != nil:
			text := fmt.Sprintf("cannot keep container %q running", cs.Name)
			if exit != nil {
				text += fmt.Sprintf(": it exits with code %d", exit.ExitCode)
				if exit.Reason == "OOMKilled" {
					text += " (OOMKilled: over its memory limit)"
				} else if probe := killedFor(p, cs.Name, exit, events); probe != "" {
					text += " (" + probeKill(p, cs.Name, probe) + ")"
				} else if !mayBeKill(exit) {
					if words := lastWords(exit.Message); words != "" {
						text += fmt.Sprintf(" after logging %q", words)
					}
				}
			}
			return podProblem{CauseCrashLoop, text}
		case w != nil && !slices.Contains(podWaitingBenign, w.Reason):
			return podProblem{CauseContainerStart, withDetail(fmt.Sprintf("cannot start container %q: %s", cs.Name, w.Reason), w.Message)}
		}
	}
	return podProblem{}
}

// lastExit is how a container that is not ready last ended, if it is in
// a loop of exits: it has just exited (a serving container is not meant
// to), the kubelet backs off before starting it again, or it runs or
// waits again after exiting at least twice. A crash loop passes through
// each of these states, the back-off (CrashLoopBackOff) only one of them,
// and a read in any of them must say the same. A single restart, after
// which the container loads the model again, is not a loop: a node's
// reboot restarts every container once. An out-of-memory kill is never
// a reboot's, though, and a model whose load runs out of memory takes as
// long to do it again: it is named from the first. A completed init
// container is ready.
func lastExit(cs corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	last := cs.LastTerminationState.Terminated
	switch {
	case cs.Ready:
		return nil
	case cs.State.Terminated != nil:
		return cs.State.Terminated
	case cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff", cs.RestartCount >= 2:
		return last
	case cs.RestartCount == 1 && last != nil && last.Reason == "OOMKilled":
		return last
	}
	return nil
}

// MayBeProbeKilled says a container of pod p is in a loop of exits whose
// last one may have been the kubelet's kill for a failed startup or
// liveness probe: not an out-of-memory kill, and with the code a kill
// leaves (137, SIGKILL at the end of the grace period, as TF Serving,
// which ignores SIGTERM, gets; 143, SIGTERM's; 0, a program that exits
// on SIGTERM). Only the kubelet's Killing Events of the pod tell.
func MayBeProbeKilled(p *corev1.Pod) bool {
	for _, cs := range containerStatuses(p) {
		if exit := lastExit(cs); exit != nil && mayBeKill(exit) {
			return true
		}
	}
	return false
}

func mayBeKill(exit *corev1.ContainerStateTerminated) bool {
	return exit.Reason != "OOMKilled" && slices.Contains([]int32{0, 137, 143}, exit.ExitCode)
}

// probeKilling is the message of the kubelet's Killing Event when it
// kills a container for a failed probe ("Container tensorflow-serving
// failed startup probe, will be restarted").
var probeKilling = regexp.MustCompile(`^Container \S+ failed (startup|liveness) probe\b`)

// killedFor is the probe ("startup" or "liveness") whose failure the
// kubelet last killed container name of pod p for, by its newest Killing
// Event, or "" if its newest says something else or there is none. The
// kill need not be the last exit's: the kubelet's spam filter drops most
// of a pod's Events after the first 25, so that a long loop's newest
// Killing Event may be several kills old; an exit with another code, or
// out of memory, is not put down to it.
func killedFor(p *corev1.Pod, name string, exit *corev1.ContainerStateTerminated, events []corev1.Event) string {
	if !mayBeKill(exit) {
		return ""
	}
	newest := newestEvent(p.UID, events, func(e *corev1.Event) bool {
		return e.Reason == "Killing" && strings.HasPrefix(e.Message, "Container "+name+" ")
	})
	if newest == nil {
		return ""
	}
	if m := probeKilling.FindStringSubmatch(newest.Message); m != nil {
		return m[1]
	}
	return ""
}

// probeKill says that the kubelet killed container name for its probe's
// failures, and after how long, from the pod's spec. A startup probe's
// kill in a serving pod is TF Serving's REST port still closed: the
// model's load took longer than the ModelServer allows.
func probeKill(p *corev1.Pod, name, probe string) string {
	text := "killed by the kubelet: its " + probe + " probe failed"
	var spec *corev1.Probe
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		if c.Name != name {
			continue
		}
		spec = c.LivenessProbe
		if probe == "startup" {
			spec = c.StartupProbe
		}
		break
	}
	if spec != nil {
		text += fmt.Sprintf(" for %ds", spec.PeriodSeconds*spec.FailureThreshold)
	}
	if probe == "startup" {
		text += "; a model that takes longer to load needs a larger spec.podTemplate.loadTimeoutSeconds"
	}
	return text
}

func withDetail(problem, detail string) string {
	if detail = strings.TrimSpace(detail); detail != "" {
		return problem + ": " + detail
	}
	return problem
}

// containerStatuses are the statuses of a pod's init containers, then of
// its containers.
func containerStatuses(p *corev1.Pod) []corev1.ContainerStatus {
	return slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
}

// PodReady says the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
