package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/desired"
	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
	"github.com/modelserver-dev/modelserver-operator/internal/metrics"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// observed is what one reconcile read: what the desired state is computed
// from, and when to look again at what no watch reports.
type observed struct {
	desired.Observed
	// lookAgainIn, if set, is when a fetch Job still without a pod, or a
	// fetch pod that cannot start, is looked into, or a refresh round is
	// due.
	lookAgainIn time.Duration
	// podRejected says the apiserver refuses a fetch Job's pod.
	podRejected bool
	// stalledLookAgainIn, if set, is when the serving pods are read (again)
	// for what keeps them from being ready.
	stalledLookAgainIn time.Duration
	// unstarted are the fetch pods of running fetch Jobs that have not
	// started, as the cache holds them (fetchPodSummary).
	unstarted []corev1.Pod
	// fetchPodsProblem is what the unstarted fetch pods say keeps them
	// from starting, once one has stood so for fetchPodStartGrace.
	fetchPodsProblem string
	// autoscaler is the serving pods' autoscaler, if the spec asks for
	// one and it exists; autoscalerLookAgainIn, when a fault it says has
	// lasted status.AutoscalerGrace.
	autoscaler            *autoscalingv2.HorizontalPodAutoscaler
	autoscalerLookAgainIn time.Duration
	// tls is what spec.tls's Secret gave, if the spec has one.
	tls tlsObservation
	// exposureLookAgainIn, if set, is when the ways in from outside the
	// cluster are looked at again (observeExposure).
	exposureLookAgainIn time.Duration
	// progressRead says a fetch pod's log was read for its progress, and
	// said some: news to write at once.
	progressRead bool
}

// observe reads the ModelServer's fetch Jobs (with what their pods left
// behind when they ended), its serving Deployment, spec.tls's Secret, the
// pods' service account where an oci:// model's fetch needs its pull
// secrets, and whether the optional APIs its spec asks for exist.
func (r *ModelServerReconciler) observe(ctx context.Context, ms *servingv1alpha1.ModelServer) (*observed, error) {
	obs := &observed{Observed: desired.Observed{Status: ms.Status, APIs: r.optionalAPIs(ms), Now: r.clock().Now(), RetriedWith: r.retriedWith(ms.UID)}}
	if err := r.observeFetchJobs(ctx, ms, obs); err != nil {
		return nil, err
	}
	if err := r.observeRefusedCredentials(ctx, ms, obs); err != nil {
		return nil, err
	}
	d, err := r.observeDeployment(ctx, ms)
	if err != nil {
		return nil, err
	}
	obs.Deployment = d
	if ms.Spec.TLS != nil {
		if obs.tls, err = r.observeTLS(ctx, ms, d); err != nil {
			return nil, err
		}
		obs.TLSCertDigest, obs.GatewayTrust = obs.tls.digest, obs.tls.trust
	}
	if ms.Spec.Autoscaling != nil {
		if obs.autoscaler, err = r.observeAutoscaler(ctx, ms); err != nil {
			return nil, err
		}
	}
	if obs.ServiceAccount, err = r.observeServiceAccount(ctx, ms); err != nil {
		return nil, err
	}
	return obs, nil
}

// observeAutoscaler reads the serving pods' autoscaler from the cache; nil
// if it does not exist.
func (r *ModelServerReconciler) observeAutoscaler(ctx context.Context, ms *servingv1alpha1.ModelServer) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	return getIfExists(ctx, r, ms.Namespace, names.Deployment(ms.Name), &autoscalingv2.HorizontalPodAutoscaler{})
}

// reportAutoscaler puts what keeps the autoscaler from scaling, once it
// has lasted, in the status's warnings, with a Warning Event once per
// fault: the ModelServer serves, at the count it has, and stays Ready.
//
// So does an autoscaler that has wanted more pods than its maximum for a
// while: the endpoint serves at its most, and only whoever sets the
// maximum can give it more.
func (r *ModelServerReconciler) reportAutoscaler(ms *servingv1alpha1.ModelServer, obs *observed, report *status.Observation) {
	now := r.clock().Now()
	var limitDue time.Duration
	report.AutoscalerProblem, obs.autoscalerLookAgainIn = status.AutoscalerProblem(obs.autoscaler, now)
	report.AutoscalerLimit, limitDue = status.AutoscalerAtMaximum(obs.autoscaler, now)
	if limitDue > 0 && (obs.autoscalerLookAgainIn == 0 || limitDue < obs.autoscalerLookAgainIn) {
		obs.autoscalerLookAgainIn = limitDue
	}
	metrics.AutoscalerAtMaximum(ms.UID, report.AutoscalerLimit != "")
	if report.AutoscalerLimit == "" {
		r.problems.resolved(ms.UID, eventAutoscalerAtMaximum)
	} else {
		r.warn(ms, eventAutoscalerAtMaximum, "Autoscale", sentence("%s", report.AutoscalerLimit))
	}
	if report.AutoscalerProblem == "" {
		metrics.InactiveAutoscaler(ms.UID, "")
		r.problems.resolved(ms.UID, eventAutoscalerInactive)
		return
	}
	metrics.InactiveAutoscaler(ms.UID, status.AutoscalerCause(status.AutoscalerFault(obs.autoscaler)))
	r.warn(ms, eventAutoscalerInactive, "Autoscale", sentence("%s", report.AutoscalerProblem))
}

// The reasons of the Warnings that say the autoscaler cannot scale, or
// cannot scale further: a ModelServer that stays Ready has no other Event
// to show them by.
const (
	eventAutoscalerInactive  = "AutoscalerInactive"
	eventAutoscalerAtMaximum = "AutoscalerAtMaximum"
)

// observeFetchJobs reads the ModelServer's model-fetch Jobs from the cache.
// A Job that has ended gets the termination message of its pod, unless the
// status already holds what it said; one still without a pod after a while
// gets the reason the apiserver refuses it, if it does; and what keeps
// fetch pods from starting is said once they are late (observeUnstartedFetch).
func (r *ModelServerReconciler) observeFetchJobs(ctx context.Context, ms *servingv1alpha1.ModelServer, obs *observed) error {
	jobs := &batchv1.JobList{}
	if err := r.List(ctx, jobs, client.InNamespace(ms.Namespace), r.fetchJobsSelector(ms.Name)); err != nil {
		return fmt.Errorf("list the model-fetch Jobs: %w", err)
	}
	known := map[string]bool{} // the Jobs whose success the status holds
	for _, m := range statusModels(ms.Status) {
		if m.FetchedGeneration != "" {
			known[names.FetchJob(ms.Name, m.FetchedGeneration)] = true
		}
	}
	obs.FetchJobs = map[string]*status.FetchJob{}
	now := r.clock().Now()
	for i := range jobs.Items {
		job := &jobs.Items[i]
		fj := &status.FetchJob{Job: job}
		obs.FetchJobs[job.Name] = fj
		var err error
		state := status.FetchStateOf(job)
		if state != status.FetchRunning {
			r.jobEventReads.forget(job.UID)
			r.progressReads.forget(job.UID)
		}
		switch state {
		case status.FetchSucceeded:
			if !known[job.Name] {
				var end podEnd
				end, err = r.podEnding(ctx, job, corev1.PodSucceeded)
				fj.Termination = end.message
			}
		case status.FetchFailed:
			var end podEnd
			end, err = r.podEnding(ctx, job, corev1.PodFailed)
			fj.Termination, fj.OutOfMemory = end.message, end.outOfMemory
		case status.FetchRunning:
			err = r.observeRunningFetch(ctx, ms.UID, fj, obs, now)
		}
		if err != nil {
			return err
		}
	}
	lookAgainIn, err := r.observeUnstartedFetch(ctx, ms, obs, now)
	obs.sooner(lookAgainIn)
	return err
}

// observeRunningFetch reads a running fetch Job's pods from the cache: a
// pod's success, before the Job says so, and the pods that have not
// started; and, for a Job still without a pod after a while, the reason
// the apiserver refuses it, if it does.
func (r *ModelServerReconciler) observeRunningFetch(ctx context.Context, owner types.UID, fj *status.FetchJob, obs *observed, now time.Time) error {
	job := fj.Job
	// Also for a success the status holds: until the Job says so, its pod
	// is what says the fetch is done.
	pods, err := r.cachedPodsOfJob(ctx, job)
	if err != nil {
		return err
	}
	end, succeeded := newestEnd(pods, corev1.PodSucceeded)
	if fj.Termination, fj.PodSucceeded = end.message, succeeded; succeeded {
		return nil
	}
	obs.unstarted = append(obs.unstarted, unstarted(pods)...)
	r.observeProgress(ctx, owner, fj, pods, obs, now)
	if job.Status.Active > 0 || job.Status.Failed > 0 || job.Status.Succeeded > 0 {
		r.jobEventReads.forget(job.UID)
		return nil
	}
	// A new Job's first pod takes a moment even when nothing is wrong: a
	// burst of new ModelServers must not cost an Event list each. One still
	// without a pod after a while is looked into: if the apiserver refuses
	// to create it (Pod Security, a quota, a missing ServiceAccount), the
	// Job says so only in an Event, and would otherwise wait without a word.
	age := now.Sub(job.CreationTimestamp.Time)
	if age < podCreationGrace {
		obs.sooner(podCreationGrace - age)
		return nil
	}
	// A Job controller that has not tried yet (its client's rate spent on
	// a burst) leaves nothing to find: the Job is looked into again after
	// as long as it has waited, whatever wakes its ModelServer meanwhile,
	// and then whether or not something does.
	if last, ok := r.jobEventReads.fresh(job.UID, now); ok {
		obs.sooner(last.due.Sub(now))
		return nil
	}
	if fj.PodRejected, err = r.podCreationFailure(ctx, job); err != nil {
		return err
	}
	if fj.PodRejected == "" {
		again := min(age, status.StalledRecheckMax)
		r.jobEventReads.remember(job.UID, podRead{due: now.Add(again), owner: owner})
		obs.sooner(again)
		return nil
	}
	// A refusal is looked at again at each retry (podRejectedRetry).
	r.jobEventReads.forget(job.UID)
	obs.podRejected = true
	return nil
}

// observeProgress reads how far a running fetch has come from the tail
// of its pod's log, once the pod has stood progressFirstRead, then every
// progressEvery while it runs. Each read is a request to the pod's node
// through the apiserver, and a new progress a status write: a fetch
// short enough that nobody waits on it costs neither. Between reads, the
// status keeps what the last one found; a log that cannot be read (a
// node whose kubelet the apiserver cannot reach) leaves the status
// without progress, and the fetch runs on.
func (r *ModelServerReconciler) observeProgress(ctx context.Context, owner types.UID, fj *status.FetchJob, pods []corev1.Pod, obs *observed, now time.Time) {
	if r.PodLogs == nil {
		return
	}
	pod := runningPod(pods)
	if pod == nil {
		// Nothing wakes the ModelServer when its fetch pod starts. One
		// that cannot start, or that is being created on its node, is
		// looked at again after its grace (observeUnstartedFetch); one
		// that waits for the scheduler with nothing wrong, when its
		// first read is due.
		waiting := slices.DeleteFunc(unstarted(pods), func(p corev1.Pod) bool { return cannotStart(&p) != "" || status.NothingStarted(&p) })
		if age := longest(waiting, createdAt, now); age > 0 && age < progressFirstRead {
			obs.sooner(progressFirstRead - age)
		}
		return
	}
	fj.Pod = pod.Name
	if age := now.Sub(pod.CreationTimestamp.Time); age < progressFirstRead {
		obs.sooner(progressFirstRead - age)
		return
	}
	if last, ok := r.progressReads.fresh(fj.Job.UID, now); ok {
		if last.pod == pod.Name {
			fj.Progress = last.progress
		}
		obs.sooner(last.due.Sub(now))
		return
	}
	every := progressInterval(r.progressReads.count())
	read := podRead{due: now.Add(every), owner: owner, pod: pod.Name}
	defer func() { r.progressReads.remember(fj.Job.UID, read) }()
	obs.sooner(every)
	if p := r.lastProgress(ctx, pod, values.FetchContainerName); p != nil {
		fj.Progress, read.progress, obs.progressRead = p, p, true
	}
}

// lastProgress is the newest progress line in the tail of the log of
// pod's fetch container, nil if there is none or the log cannot be read
// (a node whose kubelet the apiserver cannot reach): the fetch runs on.
func (r *ModelServerReconciler) lastProgress(ctx context.Context, pod *corev1.Pod, container string) *fetch.Progress {
	if r.PodLogs == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, progressReadTimeout)
	defer cancel()
	tail, err := r.PodLogs.Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
		Container: container, TailLines: ptr.To(progressTailLines), LimitBytes: ptr.To(progressTailBytes),
	}).DoRaw(rctx)
	if err != nil {
		log.FromContext(ctx).V(1).Info("cannot read a fetch's log for its progress", "pod", pod.Name, "container", container, "error", err.Error())
		return nil
	}
	if p, ok := fetch.LastProgress(tail); ok {
		return &p
	}
	return nil
}

// How a running fetch's progress is read: after its pod has stood
// progressFirstRead, then every progressEvery (less often where that
// would be over progressReadsPerSecond in all: progressInterval), from
// the last progressTailLines lines of its log (a progress line every 5
// seconds, between the warnings of retried requests), at most
// progressTailBytes of them, giving up on a node that does not answer
// after progressReadTimeout.
const (
	progressFirstRead            = 15 * time.Second
	progressEvery                = 30 * time.Second
	progressTailLines      int64 = 20
	progressTailBytes      int64 = 16 << 10
	progressReadTimeout          = 5 * time.Second
	progressReadsPerSecond       = 2
)

// progressInterval is how long until a fetch's log is read again for its
// progress, with reads pending for this many fetches: progressEvery, or,
// for more fetches than progressReadsPerSecond reads in that time, longer,
// so that the reads, and the status writes they bring, stay within that
// rate. A thousand models fetched at once (a cluster restored) would
// otherwise cost 33 log reads and as many status writes a second, taken
// from the operator's client rate before its installs.
func progressInterval(fetches int) time.Duration {
	return max(progressEvery, time.Duration(fetches)*time.Second/progressReadsPerSecond)
}

// runningPod is the newest of the pods that run, not being deleted; nil
// if none does.
func runningPod(pods []corev1.Pod) *corev1.Pod {
	var newest *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil &&
			(newest == nil || newest.CreationTimestamp.Before(&p.CreationTimestamp)) {
			newest = p
		}
	}
	return newest
}

// sooner makes lookAgainIn wait, if that is sooner; 0 is no wait.
func (obs *observed) sooner(wait time.Duration) { waitSooner(&obs.lookAgainIn, wait) }

// waitSooner makes *at wait, if that is sooner; 0 is no wait.
func waitSooner(at *time.Duration, wait time.Duration) {
	if wait > 0 && (*at == 0 || wait < *at) {
		*at = wait
	}
}

// unstarted are the pods that have not started: Pending, and not being
// deleted.
func unstarted(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodPending && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// observeUnstartedFetch says what keeps fetch pods from starting, once one
// has stood Pending for fetchPodStartGrace, into obs.fetchPodsProblem,
// and returns when to look again. A fetch pod that no node can take or
// whose image cannot be pulled would otherwise leave the ModelServer
// Fetching, without a word, until the Job's deadline an hour later. That
// costs no request: the cache holds what a Pending fetch pod's status
// says (fetchPodSummary), and a change of it wakes the ModelServer
// (fetchPodNews). A pod on a node that says only that it is being created
// (status.NothingStarted) says why in its Warning Events alone (a volume
// that does not mount): those are read once it has stood so for the
// grace since it was scheduled, then less and less often while it stays
// so, as a stalled rollout's pods are. A pod that waits for its claim's
// volume from a provisioner waits longer (claimProvisioning).
func (r *ModelServerReconciler) observeUnstartedFetch(ctx context.Context, ms *servingv1alpha1.ModelServer, obs *observed, now time.Time) (time.Duration, error) {
	cause, problem := status.FetchPodsProblem(obs.unstarted, nil)
	var lookAgainIn time.Duration
	grace := fetchPodStartGrace
	if problem != "" {
		r.fetchPodReads.forget(ms.UID)
		age := longest(obs.unstarted, createdAt, now)
		if age < grace {
			return grace - age, nil
		}
		if cause == status.CauseUnschedulable {
			// A claim still being provisioned keeps its pod from every
			// node; that is a wait, not a fault, unless the provisioner
			// says it fails or takes provisionGrace.
			waiting, claimProblem, again, err := r.claimProvisioning(ctx, ms, obs.unstarted, age, now)
			switch {
			case err != nil:
				return 0, err
			case waiting && claimProblem == "":
				r.fetchStarted(ms.UID)
				return again, nil
			case waiting:
				problem, lookAgainIn = claimProblem, again
				if age >= provisionGrace {
					grace = provisionGrace
				}
			}
		}
	} else {
		r.claimsBound.forget(ms.UID)
		creating := slices.DeleteFunc(slices.Clone(obs.unstarted), func(p corev1.Pod) bool { return !status.NothingStarted(&p) })
		if len(creating) == 0 {
			r.fetchPodReads.forget(ms.UID)
			r.fetchStarted(ms.UID)
			return 0, nil
		}
		age := longest(creating, scheduledAt, now)
		if age < fetchPodStartGrace {
			return fetchPodStartGrace - age, nil
		}
		var err error
		if cause, problem, lookAgainIn, err = r.fetchPodWarnings(ctx, ms, creating, age, now); err != nil {
			return 0, err
		}
		if problem == "" {
			r.fetchStarted(ms.UID)
			return lookAgainIn, nil
		}
	}
	obs.fetchPodsProblem = problem
	metrics.StalledFetch(ms.UID, cause)
	r.warn(ms, eventFetchPodNotStarted, "Fetch", sentence("Model-fetch pod not started after %s: %s", grace, problem))
	return lookAgainIn, nil
}

// fetchStarted clears what was said of a ModelServer's fetch pods that
// did not start: nothing keeps them from it now.
func (r *ModelServerReconciler) fetchStarted(uid types.UID) {
	r.problems.resolved(uid, eventFetchPodNotStarted)
	metrics.StalledFetch(uid, "")
}

// longest is how long the pod that has stood longest has, counted from
// the time since says; never less than 0.
func longest(pods []corev1.Pod, since func(*corev1.Pod) time.Time, now time.Time) time.Duration {
	var age time.Duration
	for i := range pods {
		age = max(age, now.Sub(since(&pods[i])))
	}
	return age
}

func createdAt(p *corev1.Pod) time.Time { return p.CreationTimestamp.Time }

// scheduledAt is when the pod was bound to its node, as far as its
// PodScheduled condition says (status.ScheduledAt); its creation otherwise.
func scheduledAt(p *corev1.Pod) time.Time {
	if t := status.ScheduledAt(p); !t.IsZero() {
		return t
	}
	return p.CreationTimestamp.Time
}

// fetchPodWarnings is what the Warning Events of late fetch pods that
// have started nothing say keeps them from starting, and when to read
// them again: after as long as the oldest has stood, from twice the
// grace up to status.StalledRecheckMax. A reconcile in between, woken by
// something else, gets what the last read found.
func (r *ModelServerReconciler) fetchPodWarnings(ctx context.Context, ms *servingv1alpha1.ModelServer, pods []corev1.Pod, age time.Duration, now time.Time) (cause, problem string, lookAgainIn time.Duration, err error) {
	if last, ok := r.fetchPodReads.fresh(ms.UID, now); ok {
		return last.cause, last.problem, last.due.Sub(now), nil
	}
	events, err := r.podEvents(ctx, pods)
	if err != nil {
		return "", "", 0, err
	}
	cause, problem = status.FetchPodsProblem(pods, events)
	lookAgainIn = min(max(age, 2*fetchPodStartGrace), status.StalledRecheckMax)
	r.fetchPodReads.remember(ms.UID, podRead{due: now.Add(lookAgainIn), cause: cause, problem: problem})
	return cause, problem, lookAgainIn, nil
}

// fetchPodStartGrace is how long a fetch pod may stand Pending before what
// holds it is said: a claim waits for its volume to be provisioned, and
// the scheduler says so meanwhile, for a second or two. For a pod that has
// started nothing on its node it counts from its scheduling: the kubelet
// tries a volume again and again, and warns at each failed try.
const fetchPodStartGrace = 30 * time.Second

// eventFetchPodNotStarted is the reason of the Warning that says what
// keeps a fetch pod from starting, once per problem.
const eventFetchPodNotStarted = "FetchPodNotStarted"

// podCreationFailure returns the message of the newest FailedCreate Event
// of job, or "" if there is none.
func (r *ModelServerReconciler) podCreationFailure(ctx context.Context, job *batchv1.Job) (string, error) {
	events := &corev1.EventList{}
	if err := r.APIReader.List(ctx, events, client.InNamespace(job.Namespace), client.MatchingFields{
		"involvedObject.kind": "Job", "involvedObject.name": job.Name, "involvedObject.uid": string(job.UID), "reason": "FailedCreate",
	}); err != nil {
		return "", fmt.Errorf("list Events of Job %s: %w", job.Name, err)
	}
	var newest *corev1.Event
	for i := range events.Items {
		e := &events.Items[i]
		if newest == nil || status.EventTime(e).After(status.EventTime(newest)) {
			newest = e
		}
	}
	if newest == nil {
		return "", nil
	}
	return newest.Message, nil
}

// podEnding is how the newest pod of job in the given phase ended. The
// cache holds the fetch pods (see FetchPodsCache); when it shows no pod in
// that phase yet, because the pod's last update has not reached it, the
// pods are read again live.
func (r *ModelServerReconciler) podEnding(ctx context.Context, job *batchv1.Job, phase corev1.PodPhase) (podEnd, error) {
	if end, found, err := r.cachedPodEnding(ctx, job, phase); err != nil || found {
		return end, err
	}
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(job.Namespace), podsOfJobLabels(job.Name)); err != nil {
		return podEnd{}, fmt.Errorf("list pods of Job %s: %w", job.Name, err)
	}
	end, _ := newestEnd(ofJob(pods.Items, job), phase)
	return end, nil
}

// cachedPodEnding is podEnding from the cache alone, and whether the
// cache holds a pod of job in the phase. A running fetch is looked for a
// succeeded pod this way on every reconcile of its ModelServer; the pod's
// success wakes one (see fetchPodNews).
func (r *ModelServerReconciler) cachedPodEnding(ctx context.Context, job *batchv1.Job, phase corev1.PodPhase) (podEnd, bool, error) {
	pods, err := r.cachedPodsOfJob(ctx, job)
	if err != nil {
		return podEnd{}, false, err
	}
	end, found := newestEnd(pods, phase)
	return end, found, nil
}

// cachedPodsOfJob lists job's pods as the cache holds them (see
// FetchPodsCache).
func (r *ModelServerReconciler) cachedPodsOfJob(ctx context.Context, job *batchv1.Job) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(job.Namespace), r.podsOfJobSelector(job.Name)); err != nil {
		return nil, fmt.Errorf("list pods of Job %s: %w", job.Name, err)
	}
	return ofJob(pods.Items, job), nil
}

// ofJob are the pods of this Job: a Job made again under the same name
// (a retried fetch) does not count the pods of the one before, which
// linger until the garbage collector removes them.
func ofJob(pods []corev1.Pod, job *batchv1.Job) []corev1.Pod {
	return slices.DeleteFunc(pods, func(p corev1.Pod) bool {
		owner := metav1.GetControllerOf(&p)
		return owner != nil && owner.UID != job.UID
	})
}

// podEnd is how a fetch pod ended: the termination message of the newest
// pod in a phase that left one, and whether the newest pod's container
// was killed for going over its memory limit.
type podEnd struct {
	message     string
	outOfMemory bool
}

// newestEnd says how the pods in the phase ended, and whether there is
// such a pod.
func newestEnd(pods []corev1.Pod, phase corev1.PodPhase) (podEnd, bool) {
	sort.Slice(pods, func(i, j int) bool {
		return pods[j].CreationTimestamp.Before(&pods[i].CreationTimestamp)
	})
	var end podEnd
	found := false
	for _, p := range pods {
		if p.Status.Phase != phase {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && !found && t.Reason == "OOMKilled" {
				end.outOfMemory = true
			}
		}
		found = true
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.Message != "" {
				end.message = t.Message
				return end, true
			}
		}
	}
	return end, found
}

// observeDeployment reads the serving Deployment from the cache; nil if it
// does not exist.
func (r *ModelServerReconciler) observeDeployment(ctx context.Context, ms *servingv1alpha1.ModelServer) (*appsv1.Deployment, error) {
	return getIfExists(ctx, r, ms.Namespace, names.Deployment(ms.Name), &appsv1.Deployment{})
}

// getIfExists reads obj, named name in namespace ns, through c; nil if it
// does not exist.
func getIfExists[T client.Object](ctx context.Context, c client.Reader, ns, name string, obj T) (T, error) {
	var none T
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return none, nil
	}
	if err != nil {
		return none, err
	}
	return obj, nil
}

// observeStalledRollout reads the serving pods, if their rollout has
// stalled (status.RolloutStalled), for what they say keeps them from being
// ready, into report.PodsProblem; and returns when to look again. Pods
// that are just slow to start cost no read: they are read only after a
// stretch with no step forward, and then less and less often while it
// lasts. A reconcile in between, woken by something else, reports what the
// last read found.
func (r *ModelServerReconciler) observeStalledRollout(ctx context.Context, ms *servingv1alpha1.ModelServer, report *status.Observation) (time.Duration, error) {
	now := r.clock().Now()
	stalled, lookAgainIn := status.RolloutStalled(*report, status.ServingSince(ms.Status, now), stalledRolloutGrace, now)
	if !stalled {
		// The gauge is set with each read: only a rollout read as stalled
		// has a cause to clear, and the rest cost no lock.
		if r.podReads.forget(ms.UID) {
			metrics.Stalled(ms.UID, "")
			r.problems.resolved(ms.UID, eventRolloutStalled)
		}
		return lookAgainIn, nil
	}
	if last, ok := r.podReads.fresh(ms.UID, now); ok {
		report.PodsProblem = last.problem
		return last.due.Sub(now), nil
	}
	selector, err := metav1.LabelSelectorAsSelector(report.Deployment.Spec.Selector)
	if err != nil {
		return 0, fmt.Errorf("the serving Deployment's selector: %w", err)
	}
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(ms.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return 0, fmt.Errorf("list the serving pods: %w", err)
	}
	events, err := r.podEvents(ctx, pods.Items)
	if err != nil {
		return 0, err
	}
	var cause string
	cause, report.PodsProblem = status.ServingPodsProblem(pods.Items, events)
	if report.PodsProblem == "" {
		if copies := status.FetchingCopies(pods.Items); len(copies) > 0 {
			// Pods downloading their own copies (storage mode PerPod): not
			// a fault, so no Warning, but how far the one started last
			// has come, read again as often as a fetch Job's progress is.
			cause = status.CauseFetching
			report.PodsProblem = status.CopiesFetching(len(copies), r.lastProgress(ctx, copies[0].Pod, copies[0].Container), copies[0].Before)
			lookAgainIn = min(lookAgainIn, progressInterval(r.progressReads.count()+r.podReads.count()))
		}
	}
	metrics.Stalled(ms.UID, cause)
	if report.PodsProblem != "" && cause != status.CauseFetching {
		r.warn(ms, eventRolloutStalled, "Rollout", sentence("Serving pods not ready, with no progress for %s: %s", stalledRolloutGrace, report.PodsProblem))
	}
	r.podReads.remember(ms.UID, podRead{due: now.Add(lookAgainIn), problem: report.PodsProblem})
	return lookAgainIn, nil
}

// eventRolloutStalled is the reason of the Warning that says what the pods
// of a stalled rollout said, once per problem: the status's message holds
// it too, but a ModelServer that is still Deploying has no Event of its
// own to show it in kubectl describe or an Event-based alert.
const eventRolloutStalled = "RolloutStalled"

// explainedPods bounds the pods whose Events one read of a stalled
// rollout, or of late fetch pods, lists: one request each.
const explainedPods = 5

// podEvents lists the Events that explain what the pods' status cannot,
// for the first explainedPods pods that need them: the Warnings of a pod
// that has started nothing (status.NothingStarted), what holds it being
// only there, and the kubelet's Killing Events of a pod whose container
// keeps exiting as a kill leaves it (status.MayBeProbeKilled), which say
// whether a failed probe was the cause. One list per pod, by its UID and
// a field the apiserver selects on: a list of the namespace's pod
// warnings would bring every probe failure of every pod in it.
func (r *ModelServerReconciler) podEvents(ctx context.Context, pods []corev1.Pod) ([]corev1.Event, error) {
	var events []corev1.Event
	explained := 0
	for i := range pods {
		var which client.MatchingFields
		switch {
		case status.NothingStarted(&pods[i]):
			which = client.MatchingFields{"type": corev1.EventTypeWarning}
		case status.MayBeProbeKilled(&pods[i]):
			which = client.MatchingFields{"reason": "Killing"}
		default:
			continue
		}
		if explained == explainedPods {
			break
		}
		explained++
		which["involvedObject.kind"], which["involvedObject.uid"] = "Pod", string(pods[i].UID)
		list := &corev1.EventList{}
		if err := r.APIReader.List(ctx, list, client.InNamespace(pods[i].Namespace), which); err != nil {
			return nil, fmt.Errorf("list the Events of pod %s: %w", pods[i].Name, err)
		}
		events = append(events, list.Items...)
	}
	return events, nil
}

// podReads remembers, by UID, the last read of a ModelServer's pods that
// stand stalled: a rollout's, or the fetch pods'; or, by the Job's UID,
// of the Events of a fetch Job still without a pod.
type podReads struct{ m sync.Map }

// podRead is when the next read of pods that stand stalled is due, and
// what the last one found.
type podRead struct {
	due            time.Time
	cause, problem string
	// owner is the ModelServer a read kept by another object's UID is
	// for, so that it goes with it (forgetOwner).
	owner types.UID
	// pod is the fetch pod whose log was read for its progress, and
	// progress what it said, if anything: a reconcile before the next
	// read says the same, even where the status was not written in
	// between.
	pod      string
	progress *fetch.Progress
}

// fresh returns the last read of uid's pods while it stands: until the
// next is due.
func (p *podReads) fresh(uid types.UID, now time.Time) (podRead, bool) {
	v, ok := p.m.Load(uid)
	if !ok || !now.Before(v.(podRead).due) {
		return podRead{}, false
	}
	return v.(podRead), true
}

func (p *podReads) remember(uid types.UID, read podRead) { p.m.Store(uid, read) }

// dueOnce is when uid's read is due: due, unless one was remembered
// before, which stands.
func (p *podReads) dueOnce(uid types.UID, due time.Time) time.Time {
	v, _ := p.m.LoadOrStore(uid, podRead{due: due})
	return v.(podRead).due
}

// count is how many reads are kept.
func (p *podReads) count() int {
	n := 0
	p.m.Range(func(any, any) bool {
		n++
		return true
	})
	return n
}

// forget drops uid's last read, and says whether there was one.
func (p *podReads) forget(uid types.UID) bool {
	_, had := p.m.LoadAndDelete(uid)
	return had
}

// forgetOwner drops the reads kept for a ModelServer that is gone by the
// UIDs of its objects. Only fetch Jobs still without a pod are kept so,
// few at any time.
func (p *podReads) forgetOwner(owner types.UID) {
	p.m.Range(func(k, v any) bool {
		if v.(podRead).owner == owner {
			p.m.Delete(k)
		}
		return true
	})
}

// optionalAPIs says which of the optional kinds the spec asks for exist in
// the cluster. The release manager's view is asked, since it is the one
// that must map them; it looks again when a kind is missing.
func (r *ModelServerReconciler) optionalAPIs(ms *servingv1alpha1.ModelServer) map[string]bool {
	var want []schema.GroupVersionKind
	if ms.Spec.Gateway != nil {
		want = append(want, values.HTTPRouteKind, values.GRPCRouteKind)
		if ms.Spec.TLS != nil {
			want = append(want, values.BackendTLSPolicyKind)
		}
	}
	if ms.Spec.Monitoring.ServiceMonitor != nil {
		want = append(want, values.ServiceMonitorKind)
	}
	if len(want) == 0 {
		return nil
	}
	apis := map[string]bool{}
	for _, gvk := range want {
		apis[values.APIKey(gvk)] = r.Releases.Knows(gvk)
	}
	return apis
}

// checkSecrets reports a missing credentials Secret, which would otherwise
// leave a fetch pod waiting for its volume without a word, and one without
// the keys its model's storage URI needs: a reason and a message, or "".
// Only the keys are looked at; the values go nowhere.
func (r *ModelServerReconciler) checkSecrets(ctx context.Context, ms *servingv1alpha1.ModelServer, models []values.SpecModel) (string, string, error) {
	for _, m := range models {
		if m.CredentialsSecret == "" {
			continue
		}
		secret := &corev1.Secret{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: m.CredentialsSecret}, secret)
		field := m.Field + ".credentialsSecret"
		if apierrors.IsNotFound(err) {
			return servingv1alpha1.ReasonSecretNotFound, fmt.Sprintf("%s: Secret %q not found in namespace %s", field, m.CredentialsSecret, ms.Namespace), nil
		} else if err != nil {
			return "", "", err
		}
		keys := slices.Collect(maps.Keys(secret.Data))
		for k := range secret.StringData {
			keys = append(keys, k)
		}
		if problem := fetch.CheckCredentialKeys(m.StorageURI, m.WebIdentity != nil, keys); problem != "" {
			return servingv1alpha1.ReasonInvalidSecret, fmt.Sprintf("%s: Secret %q: %s", field, m.CredentialsSecret, problem), nil
		}
	}
	return "", "", nil
}

// statusModels are the models a status reports: its one model (Model) or
// its list (Models).
func statusModels(st servingv1alpha1.ModelServerStatus) []servingv1alpha1.ModelStatus {
	if st.Model == nil {
		return st.Models
	}
	return append(slices.Clone(st.Models), *st.Model)
}
