// Package controllers holds the ModelServer reconciler: it turns each
// ModelServer into a Helm release of the embedded chart and reports what
// the release's objects are doing.
package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
	"github.com/modelserver-dev/modelserver-operator/internal/metrics"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
	"github.com/modelserver-dev/modelserver-operator/internal/release"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// Finalizer holds a ModelServer until its release is uninstalled.
const Finalizer = "serving.modelserver.dev/release"

// DefaultMaxConcurrentReconciles is how many ModelServers are reconciled
// at once unless configured otherwise.
const DefaultMaxConcurrentReconciles = 8

// conflictRetry is how often a ModelServer blocked by someone else's object
// or a missing Secret looks again; neither is watched.
const conflictRetry = 30 * time.Second

// podCreationGrace is how long a fetch Job may be without a pod before the
// operator looks for the reason in its Events.
const podCreationGrace = 10 * time.Second

// podRejectedRetry is how often a ModelServer whose fetch pod the apiserver
// refuses looks again.
const podRejectedRetry = 15 * time.Second

// ModelServerReconciler reconciles ModelServers.
type ModelServerReconciler struct {
	client.Client
	// APIReader reads what the cache does not hold: credentials Secrets,
	// Events, a fetch pod the cache has not caught up with, and an object
	// whose drift the cache suggests.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Releases  *release.Manager
	Chart     *chart.Chart
	// FetchImage runs `manager fetch` in the model-fetch Job.
	FetchImage string
	// ProxyEnv is passed on to the serving and fetch containers.
	ProxyEnv []corev1.EnvVar
	// RecheckAfter is how soon a ModelServer with warnings (an optional
	// API it asks for is missing) is looked at again. Default 1 minute.
	RecheckAfter time.Duration
	// MaxConcurrentReconciles bounds the ModelServers reconciled at once.
	// Default: DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int

	// verified holds the UIDs whose release record this process has read
	// once. Later reconciles trust status.release.valuesDigest, so an idle
	// ModelServer costs no Helm read at all.
	verified sync.Map
	// written holds, by UID, the status this process last wrote. The cache
	// can serve a ModelServer before its last status patch has come back
	// through the watch; deciding from that stale status would upgrade the
	// release a second time. Nobody else writes the status, so what was
	// written is what is stored.
	written sync.Map
	// problems are the warnings announced, so that a persisting one is
	// not announced again on every retry.
	problems problems
}

// +kubebuilder:rbac:groups=serving.modelserver.dev,resources=modelservers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=serving.modelserver.dev,resources=modelservers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=serving.modelserver.dev,resources=modelservers/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=list
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses;networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes;grpcroutes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=get;list;watch;create;update;patch;delete

// Reconcile brings one ModelServer's release in line with its spec and
// reports what its objects are doing.
func (r *ModelServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// 1. Load the ModelServer; a deleted one needs nothing more.
	ms := &servingv1alpha1.ModelServer{}
	if err := r.Get(ctx, req.NamespacedName, ms); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// 2. Being deleted: uninstall, then let it go.
	if !ms.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, ms)
	}
	// 3. Hold it until the release is uninstalled. A patch, not an
	// update: it must not write back the spec as this client decoded it.
	if patch := client.MergeFrom(ms.DeepCopy()); controllerutil.AddFinalizer(ms, Finalizer) {
		if err := r.Patch(ctx, ms, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.reconcileNormal(ctx, ms)
}

// The results are named: the deferred status write reports its error
// through reconcileErr, so that a lost write is retried.
func (r *ModelServerReconciler) reconcileNormal(ctx context.Context, ms *servingv1alpha1.ModelServer) (result ctrl.Result, reconcileErr error) {
	logger := log.FromContext(ctx)
	if st, ok := r.written.Load(ms.UID); ok {
		ms.Status = *st.(*servingv1alpha1.ModelServerStatus).DeepCopy()
	}
	old := ms.Status.DeepCopy()
	obs := Observation{
		Generation:      ms.Generation,
		DesiredReplicas: values.DesiredReplicas(ms),
	}
	// The status is written once, at the end, and only if it changed.
	defer func() {
		if err := r.writeStatus(ctx, ms, *old, obs); err != nil && reconcileErr == nil {
			reconcileErr = err
		}
	}()

	// 4. Observe the fetch of each model's current generation.
	models, field, err := values.Models(ms)
	if err != nil {
		obs.BlockedReason, obs.BlockedMessage = ReasonInvalidSpec, err.Error()
		return ctrl.Result{}, nil // only a spec change can help
	}
	obs.Multi = field == "spec.models"
	if err := r.observeFetches(ctx, ms, models, &obs); err != nil {
		return ctrl.Result{}, err
	}

	// 5. Observe the serving Deployment: its status, and the count an
	// autoscaler gave it, which the release must keep.
	if err := r.observeDeployment(ctx, ms, &obs); err != nil {
		return ctrl.Result{}, err
	}

	// 6. Spec → values (pure), and their digest.
	vals, err := values.For(ms, values.Inputs{
		ChartVersion:  r.Chart.Metadata.Version,
		AppVersion:    r.Chart.Metadata.AppVersion,
		FetchImage:    r.FetchImage,
		JobImages:     obs.JobImages,
		LiveModelWait: liveModelWait(obs.Deployment),
		Served:        obs.Served(),
		FailedFetches: obs.FailedFetches(),
		ProxyEnv:      r.ProxyEnv,
		APIs:          r.optionalAPIs(ms),
		LiveReplicas:  liveReplicas(obs.Deployment),
	})
	if err != nil {
		obs.BlockedReason, obs.BlockedMessage = ReasonInvalidSpec, err.Error()
		return ctrl.Result{}, nil // only a spec change can help
	}
	obs.Selector = labels.SelectorFromSet(vals.Labels.Selector).String()
	obs.Endpoints = endpoints(ms.Namespace, vals)
	for i := range obs.Models {
		obs.Models[i].Status.Endpoint = restURL(ms.Namespace, vals, obs.Models[i].Name)
	}
	obs.Warnings = vals.Warnings
	if obs.Fetch != FetchSucceeded {
		if reason, msg, err := r.checkSecrets(ctx, ms, models); err != nil {
			return ctrl.Result{}, err
		} else if msg != "" {
			obs.BlockedReason, obs.BlockedMessage = reason, msg
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
	}
	digest := values.Digest(r.Chart.Metadata.Version, vals)

	// 7. Decide whether Helm has anything to do, and do it.
	why, last, err := r.applyReason(ctx, ms, vals, digest)
	if err != nil {
		return ctrl.Result{}, err
	}
	obs.Release = ms.Status.Release
	if why != "" {
		result, reconcileErr = r.apply(ctx, ms, vals, digest, why, last, &obs)
		if reconcileErr != nil || obs.Conflict {
			return result, reconcileErr
		}
		// The Jobs the release has just created are running, though the
		// cache may not show them yet.
		obs.fetchJobsCreated()
		// What was read before the release changed the Deployment must
		// not report the old pods as the new ones' readiness.
		if err := r.observeDeployment(ctx, ms, &obs); err != nil {
			return ctrl.Result{}, err
		}
	}
	obs.ReleaseCurrent = true

	// A running fetch changes nothing the watches see until it ends; look
	// again each minute to keep its elapsed time in the status current.
	if obs.Fetch == FetchRunning && result.RequeueAfter == 0 {
		result.RequeueAfter = time.Minute
	}
	if obs.LookAgainIn > 0 && (result.RequeueAfter == 0 || result.RequeueAfter > obs.LookAgainIn) {
		result.RequeueAfter = obs.LookAgainIn
	}
	// The Job controller retries a refused pod without a change the
	// watches see; look again soon to notice when it gets through.
	if obs.FetchPodRejected && (result.RequeueAfter == 0 || result.RequeueAfter > podRejectedRetry) {
		result.RequeueAfter = podRejectedRetry
	}
	// Nothing watched changes when a missing API is installed.
	if len(obs.Warnings) > 0 && result.RequeueAfter == 0 {
		result.RequeueAfter = r.RecheckAfter
		if result.RequeueAfter == 0 {
			result.RequeueAfter = time.Minute
		}
	}
	logger.V(1).Info("reconciled", "fetch", obs.Fetch, "helm", why)
	return result, reconcileErr
}

// applyReason says why the release must be installed or upgraded, or ""
// when it is deployed with these values and all its objects are intact;
// with the latest revision, when it had to be read to say so.
func (r *ModelServerReconciler) applyReason(ctx context.Context, ms *servingv1alpha1.ModelServer, vals *values.Values, digest string) (string, *latest, error) {
	rel := ms.Status.Release
	if !releaseAttempted(ms) {
		// A new ModelServer: install without reading for a release
		// first. One that exists after all (the status write after an
		// install was lost) is found by the install itself.
		return "install", &latest{unread: true}, nil
	}
	if rel == nil || rel.ValuesDigest != digest {
		// The status can lag the release: the write after a Helm
		// operation may have been refused (a conflict) or never made (a
		// crash). Such a release is not applied a second time.
		last, err := r.Releases.Get(ms.Namespace, ms.Name)
		if err != nil {
			return "", nil, err
		}
		if last == nil || last.Info.Status != helmrelease.StatusDeployed || last.Labels[release.LabelValuesDigest] != digest {
			if rel == nil {
				return "install", &latest{rel: last}, nil
			}
			return "the spec or the fetched model changed", &latest{rel: last}, nil
		}
		ms.Status.Release = &servingv1alpha1.ReleaseStatus{
			Name: last.Name, Revision: last.Version, ChartVersion: r.Chart.Metadata.Version, ValuesDigest: digest,
		}
		r.verified.Store(ms.UID, struct{}{})
		why, err := r.drift(ctx, ms, vals)
		return why, &latest{rel: last}, err
	}
	// Once per process, check the release record itself: a crash can
	// leave it pending while the status still shows the last good digest.
	if _, done := r.verified.Load(ms.UID); !done {
		last, err := r.Releases.Get(ms.Namespace, ms.Name)
		if err != nil {
			return "", nil, err
		}
		switch {
		case last == nil:
			return "its release record is missing", &latest{rel: last}, nil
		case last.Info.Status != helmrelease.StatusDeployed:
			return "the release is " + string(last.Info.Status), &latest{rel: last}, nil
		case last.Labels[release.LabelValuesDigest] != digest:
			return "the release was made from other values", &latest{rel: last}, nil
		}
		r.verified.Store(ms.UID, struct{}{})
		why, err := r.drift(ctx, ms, vals)
		return why, &latest{rel: last}, err
	}
	why, err := r.drift(ctx, ms, vals)
	return why, nil, err
}

// latest is the latest revision of a release as read in this reconcile
// (rel nil: there is none), or, unread, none expected.
type latest struct {
	rel    *helmrelease.Release
	unread bool
}

// releaseAttempted says whether a Helm operation of the ModelServer has
// been made or tried before, as far as its status tells: a new
// ModelServer's has not. One that failed or met someone else's object
// goes the careful way, checking every object before it creates any.
func releaseAttempted(ms *servingv1alpha1.ModelServer) bool {
	if ms.Status.Release != nil {
		return true
	}
	c := meta.FindStatusCondition(ms.Status.Conditions, servingv1alpha1.ConditionDeployed)
	return c != nil && (c.Reason == ReasonConflict || c.Reason == ReasonReleaseFailed)
}

// apply installs or upgrades the release; last is the latest revision
// if this reconcile has read it already, so that it is not read twice.
func (r *ModelServerReconciler) apply(ctx context.Context, ms *servingv1alpha1.ModelServer, vals *values.Values, digest, why string, last *latest, obs *Observation) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	m, err := vals.Map()
	if err != nil {
		return ctrl.Result{}, err
	}
	if last == nil {
		rel, err := r.Releases.Get(ms.Namespace, ms.Name)
		if err != nil {
			return ctrl.Result{}, err
		}
		last = &latest{rel: rel}
	}
	var (
		rel *helmrelease.Release
		op  release.Op
	)
	if last.unread {
		rel, op, err = r.Releases.Install(ctx, ms.Namespace, ms.Name, r.Chart, m, digest)
	} else {
		rel, op, err = r.Releases.Apply(ctx, ms.Namespace, ms.Name, r.Chart, m, digest, last.rel)
	}
	if errors.Is(err, release.ErrConflict) {
		obs.Conflict, obs.ReleaseErr = true, err
		r.warn(ms, ReasonConflict, "Apply", sentence("Cannot deploy: %s", errorLine(err)))
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	if err != nil {
		obs.ReleaseErr = err
		r.warn(ms, ReasonReleaseFailed, "Apply", sentence("Helm %s of release %s failed: %s", op, ms.Name, errorLine(err)))
		return ctrl.Result{}, err
	}
	r.problems.resolved(ms.UID, ReasonConflict, ReasonReleaseFailed)
	r.verified.Store(ms.UID, struct{}{})
	obs.Release = &servingv1alpha1.ReleaseStatus{
		Name: rel.Name, Revision: rel.Version, ChartVersion: r.Chart.Metadata.Version, ValuesDigest: digest,
	}
	// Remember the release at once: if the status patch at the end of this
	// reconcile fails, the next one must not upgrade again.
	if st, ok := r.written.Load(ms.UID); ok {
		known := st.(*servingv1alpha1.ModelServerStatus).DeepCopy()
		known.Release = obs.Release
		r.written.Store(ms.UID, known)
	}
	logger.Info("release applied", "op", op, "revision", rel.Version, "why", why)
	r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, eventReason(op), "Apply", "%s", applyNote(string(op), rel.Name, rel.Version, why))
	return ctrl.Result{}, nil
}

// warn announces a problem, unless it is the one already announced.
func (r *ModelServerReconciler) warn(ms *servingv1alpha1.ModelServer, reason, action, note string) {
	if r.problems.first(ms.UID, reason, note) {
		r.Recorder.Eventf(ms, nil, corev1.EventTypeWarning, reason, action, "%s", note)
	}
}

// jobDuration is how long a finished Job ran.
func jobDuration(job *batchv1.Job) time.Duration {
	if job.Status.StartTime == nil {
		return 0
	}
	end := time.Now()
	if job.Status.CompletionTime != nil {
		end = job.Status.CompletionTime.Time
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			end = c.LastTransitionTime.Time
		}
	}
	return end.Sub(job.Status.StartTime.Time)
}

func eventReason(op release.Op) string {
	switch op {
	case release.OpInstall:
		return "Installed"
	case release.OpRecovered:
		return "Recovered"
	default:
		return "Upgraded"
	}
}

// drift says which object of the release is missing or was changed by
// someone else in a field the operator sets, or "" if none. The cache can
// lag behind the release's last write (a Job just created, a Deployment
// just scaled), so an object it lacks or shows changed is read again live
// before it costs a Helm upgrade; only that object, so that a ModelServer
// whose objects are still arriving in the cache costs one read, not one
// per object.
func (r *ModelServerReconciler) drift(ctx context.Context, ms *servingv1alpha1.ModelServer, vals *values.Values) (string, error) {
	objs := map[string]func() client.Object{
		"ConfigMap " + vals.Names.ConfigMap:   func() client.Object { return &corev1.ConfigMap{} },
		"Service " + vals.Names.Service:       func() client.Object { return &corev1.Service{} },
		"Deployment " + vals.Names.Deployment: func() client.Object { return &appsv1.Deployment{} },
	}
	for _, f := range vals.Fetches {
		objs["Job "+f.Name] = func() client.Object { return &batchv1.Job{} }
	}
	if vals.Volume.Create {
		objs["PersistentVolumeClaim "+vals.Volume.ClaimName] = func() client.Object { return &corev1.PersistentVolumeClaim{} }
	}
	if vals.Autoscaling != nil {
		objs["HorizontalPodAutoscaler "+vals.Names.Deployment] = func() client.Object { return &autoscalingv2.HorizontalPodAutoscaler{} }
	}
	if vals.Disruption != nil {
		objs["PodDisruptionBudget "+vals.Names.Deployment] = func() client.Object { return &policyv1.PodDisruptionBudget{} }
	}
	if vals.Ingress != nil {
		objs["Ingress "+vals.Names.Deployment] = func() client.Object { return &networkingv1.Ingress{} }
	}
	if vals.NetworkPolicy != nil {
		objs["NetworkPolicy "+vals.Names.Deployment] = func() client.Object { return &networkingv1.NetworkPolicy{} }
	}
	for _, what := range slices.Sorted(maps.Keys(objs)) {
		_, name, _ := strings.Cut(what, " ")
		key := types.NamespacedName{Namespace: ms.Namespace, Name: name}
		why, err := objectDrift(ctx, r.Client, key, what, objs[what](), vals)
		if why == "" || err != nil {
			if err != nil {
				return "", err
			}
			continue
		}
		if why, err = objectDrift(ctx, r.APIReader, key, what, objs[what](), vals); why != "" || err != nil {
			return why, err
		}
	}
	return "", nil
}

// objectDrift reads one object of the release through reader and says how
// it departs from the values, or "".
func objectDrift(ctx context.Context, reader client.Reader, key types.NamespacedName, what string, obj client.Object, vals *values.Values) (string, error) {
	err := reader.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return what + " was deleted", nil
	} else if err != nil {
		return "", err
	}
	return modifiedObject(vals, map[string]client.Object{what: obj}), nil
}

// modifiedObject compares the fields of each object that the values decide
// and that nobody else should change. It is a cheap stand-in for a Helm
// dry-run: no request, no render.
func modifiedObject(vals *values.Values, objs map[string]client.Object) string {
	for what, obj := range objs {
		for k, v := range vals.Labels.Common {
			if obj.GetLabels()[k] != v {
				return what + " lost its label " + k
			}
		}
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			if !maps.Equal(o.Data, vals.ConfigFiles) {
				return what + " has a modified config"
			}
		case *corev1.Service:
			if o.Spec.Type != vals.Service.Type || len(o.Spec.Ports) != 2 {
				return what + " was modified"
			}
		case *appsv1.Deployment:
			// The autoscaler sets the count; otherwise it is ours.
			if vals.Autoscaling == nil && (o.Spec.Replicas == nil || *o.Spec.Replicas != vals.Serving.Replicas) {
				return what + " was scaled outside the ModelServer"
			}
			if len(o.Spec.Template.Spec.Containers) != 1 || o.Spec.Template.Spec.Containers[0].Image != vals.Serving.Image {
				return what + " has a modified container"
			}
		}
	}
	return ""
}

// observeFetches fills in the fetch part of the observation from the Job
// of each model's current generation, reading its pods' termination
// messages when the Job has just finished.
func (r *ModelServerReconciler) observeFetches(ctx context.Context, ms *servingv1alpha1.ModelServer, models []servingv1alpha1.ModelSpec, obs *Observation) error {
	previous := map[string]servingv1alpha1.ModelStatus{}
	if ms.Status.Model != nil && !obs.Multi {
		// One model: its data stays its data when only its name changes.
		previous[models[0].Name] = *ms.Status.Model.DeepCopy()
	}
	for _, m := range ms.Status.Models {
		previous[m.Name] = *m.DeepCopy()
	}
	for _, m := range models {
		generation := values.FetchGeneration(ms, m)
		job := &batchv1.Job{}
		err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: names.FetchJob(ms.Name, generation)}, job)
		if apierrors.IsNotFound(err) {
			job = nil
		} else if err != nil {
			return err
		}
		if image := containerImage(job); image != "" {
			if obs.JobImages == nil {
				obs.JobImages = map[string]string{}
			}
			obs.JobImages[generation] = image
		}
		state := fetchState(job)
		st := previous[m.Name]
		st.Name = m.Name
		st.Fetch, st.Message = string(state), ""
		mf := ModelFetch{Name: m.Name, State: state, StorageURI: redactURI(m.StorageURI)}
		if job != nil {
			mf.Retries = job.Status.Failed
			if state == FetchRunning && job.Status.StartTime != nil {
				mf.Elapsed = time.Since(job.Status.StartTime.Time).Truncate(time.Minute)
			}
		}
		switch state {
		case FetchSucceeded:
			if st.FetchedGeneration != generation {
				// Newly fetched: take the summary the fetch left behind.
				msg, err := r.terminationMessage(ctx, job, corev1.PodSucceeded)
				if err != nil {
					return err
				}
				st = servingv1alpha1.ModelStatus{Name: m.Name, Fetch: string(state), FetchedGeneration: generation}
				if s, ok := parseSummary(msg); ok {
					st.Digest, st.SizeBytes, st.Versions = s.Digest, s.Bytes, s.Versions
				}
				r.Recorder.Eventf(ms, job, corev1.EventTypeNormal, ReasonFetched, "Fetch", "%s", fetchedNote(m.Name, mf.StorageURI, &st))
				metrics.FetchEnded(ms.UID, job.UID, true, jobDuration(job), st.SizeBytes)
			}
		case FetchFailed:
			msg, err := r.terminationMessage(ctx, job, corev1.PodFailed)
			if err != nil {
				return err
			}
			mf.Reason, mf.Message = parseFailure(msg, jobFailureMessage(job))
			st.Message = mf.Reason + ": " + mf.Message
			metrics.FetchEnded(ms.UID, job.UID, false, jobDuration(job), -1)
		case FetchRunning:
			if job.Status.Active > 0 || job.Status.Failed > 0 || job.Status.Succeeded > 0 {
				break
			}
			// A new Job's first pod takes a moment even when nothing is
			// wrong: a burst of new ModelServers must not cost an Event
			// list each. One still without a pod after a while is looked
			// into.
			if age := time.Since(job.CreationTimestamp.Time); age < podCreationGrace {
				obs.LookAgainIn = podCreationGrace - age
				break
			}
			// No pod yet: if the apiserver refuses to create it (Pod
			// Security, a quota, a missing ServiceAccount), the Job says so
			// only in an Event, and would otherwise wait without a word.
			msg, err := r.podCreationFailure(ctx, job)
			if err != nil {
				return err
			}
			if msg != "" {
				mf.State, mf.Reason = FetchFailed, ReasonFetchPodRejected
				mf.Message = "the model-fetch Job cannot create its pod: " + msg
				st.Fetch, st.Message = string(FetchFailed), mf.Reason+": "+mf.Message
				obs.FetchPodRejected = true
			}
		}
		if st.FetchedGeneration != "" {
			st.ServedVersions = values.ServedVersions(m.VersionPolicy, st.Versions)
		}
		st.VersionLabels = m.VersionLabels
		mf.Status = st
		obs.Models = append(obs.Models, mf)
	}
	obs.summarizeFetches()
	return nil
}

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
		if newest == nil || eventTime(e).After(eventTime(newest)) {
			newest = e
		}
	}
	if newest == nil {
		return "", nil
	}
	return newest.Message, nil
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// terminationMessage returns the termination message of the newest pod
// of job in the given phase. The cache holds the fetch pods (see
// FetchPodsCache); when it shows no pod in that phase yet, because the
// pod's last update has not reached it, the pods are read again live.
func (r *ModelServerReconciler) terminationMessage(ctx context.Context, job *batchv1.Job, phase corev1.PodPhase) (string, error) {
	for _, reader := range []client.Reader{r.Client, r.APIReader} {
		pods := &corev1.PodList{}
		if err := reader.List(ctx, pods, client.InNamespace(job.Namespace),
			client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
			return "", fmt.Errorf("list pods of Job %s: %w", job.Name, err)
		}
		if msg, found := newestTerminationMessage(pods.Items, phase); found {
			return msg, nil
		}
	}
	return "", nil
}

// newestTerminationMessage returns the message of the newest pod in the
// phase, and whether there is such a pod.
func newestTerminationMessage(pods []corev1.Pod, phase corev1.PodPhase) (string, bool) {
	sort.Slice(pods, func(i, j int) bool {
		return pods[j].CreationTimestamp.Before(&pods[i].CreationTimestamp)
	})
	found := false
	for _, p := range pods {
		if p.Status.Phase != phase {
			continue
		}
		found = true
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.Message != "" {
				return t.Message, true
			}
		}
	}
	return "", found
}

func jobFailureMessage(job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

// checkSecrets reports a missing credentials Secret, which would otherwise
// leave a fetch pod waiting for its volume without a word, and one without
// the keys its model's storage URI needs. Only the keys are looked at; the
// values go nowhere.
func (r *ModelServerReconciler) checkSecrets(ctx context.Context, ms *servingv1alpha1.ModelServer, models []servingv1alpha1.ModelSpec) (string, string, error) {
	for i, m := range models {
		if m.CredentialsSecret == "" {
			continue
		}
		secret := &corev1.Secret{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: m.CredentialsSecret}, secret)
		field := values.ModelField(ms, i) + ".credentialsSecret"
		if apierrors.IsNotFound(err) {
			return ReasonSecretNotFound, fmt.Sprintf("%s: Secret %q not found in namespace %s", field, m.CredentialsSecret, ms.Namespace), nil
		} else if err != nil {
			return "", "", err
		}
		keys := slices.Collect(maps.Keys(secret.Data))
		for k := range secret.StringData {
			keys = append(keys, k)
		}
		if problem := fetch.CheckCredentialKeys(m.StorageURI, keys); problem != "" {
			return ReasonInvalidSecret, fmt.Sprintf("%s: Secret %q: %s", field, m.CredentialsSecret, problem), nil
		}
	}
	return "", "", nil
}

// optionalAPIs says which of the optional kinds the spec asks for exist in
// the cluster. The release manager's view is asked, since it is the one
// that must map them; it looks again when a kind is missing.
func (r *ModelServerReconciler) optionalAPIs(ms *servingv1alpha1.ModelServer) map[string]bool {
	var want []schema.GroupVersionKind
	if ms.Spec.Gateway != nil {
		want = append(want, values.HTTPRouteKind, values.GRPCRouteKind)
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

func (r *ModelServerReconciler) reconcileDelete(ctx context.Context, ms *servingv1alpha1.ModelServer) error {
	if !controllerutil.ContainsFinalizer(ms, Finalizer) {
		return nil
	}
	if ms.Status.Phase != servingv1alpha1.PhaseDeleting {
		patch := client.MergeFrom(ms.DeepCopy())
		ms.Status.Phase, ms.Status.Message = servingv1alpha1.PhaseDeleting, "uninstalling the Helm release"
		if err := r.Status().Patch(ctx, ms, patch); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if err := r.Releases.Uninstall(ms.Namespace, ms.Name); err != nil {
		r.warn(ms, ReasonReleaseFailed, "Uninstall", sentence("Helm uninstall of release %s failed: %s", ms.Name, errorLine(err)))
		return err
	}
	r.verified.Delete(ms.UID)
	r.written.Delete(ms.UID)
	r.problems.forget(ms.UID)
	metrics.Forget(ms.UID)
	patch := client.MergeFrom(ms.DeepCopy())
	controllerutil.RemoveFinalizer(ms, Finalizer)
	return client.IgnoreNotFound(r.Patch(ctx, ms, patch))
}

// writeStatus computes the status from the observation and patches it if
// it changed, with an Event for each phase change.
func (r *ModelServerReconciler) writeStatus(ctx context.Context, ms *servingv1alpha1.ModelServer, old servingv1alpha1.ModelServerStatus, obs Observation) error {
	st := computeStatus(old, obs)
	var created time.Time
	if ms.Generation == 1 {
		created = ms.CreationTimestamp.Time
	}
	metrics.Observe(ms.UID, ms.Generation, created, string(st.Phase), st.Phase == servingv1alpha1.PhaseReady)
	if equality.Semantic.DeepEqual(old, st) {
		r.written.Store(ms.UID, st.DeepCopy())
		return nil
	}
	base := ms.DeepCopy()
	base.Status = old
	ms.Status = st
	if err := r.Status().Patch(ctx, ms, client.MergeFrom(base)); err != nil {
		r.written.Delete(ms.UID) // unknown now: trust the cache again
		return client.IgnoreNotFound(err)
	}
	r.written.Store(ms.UID, st.DeepCopy())
	if st.Phase != old.Phase && phaseWorthAnEvent(old.Phase, st.Phase) {
		kind := corev1.EventTypeNormal
		if st.Phase == servingv1alpha1.PhaseFailed || st.Phase == servingv1alpha1.PhaseDegraded {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(ms, nil, kind, string(st.Phase), "Reconcile", "%s", phaseNote(old.Phase, st.Phase, st))
	}
	return nil
}

// phaseWorthAnEvent says whether a change of phase is announced: reaching
// Ready, Failed or Degraded, and leaving them. The steps on the way to
// Ready (Pending, Fetching, Deploying) are in the status and in the
// Installed and Fetched Events already; an Event for each would be one
// more write per step and ModelServer.
func phaseWorthAnEvent(from, to servingv1alpha1.Phase) bool {
	settled := func(p servingv1alpha1.Phase) bool {
		return p == servingv1alpha1.PhaseReady || p == servingv1alpha1.PhaseFailed || p == servingv1alpha1.PhaseDegraded
	}
	return settled(from) || settled(to)
}

// observeDeployment reads the serving Deployment from the cache.
func (r *ModelServerReconciler) observeDeployment(ctx context.Context, ms *servingv1alpha1.ModelServer, obs *Observation) error {
	deploy := &appsv1.Deployment{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ms.Namespace, Name: names.Deployment(ms.Name)}, deploy)
	if apierrors.IsNotFound(err) {
		obs.Deployment = nil
		return nil
	} else if err != nil {
		return err
	}
	obs.Deployment = deploy
	if ms.Spec.Autoscaling != nil && deploy.Spec.Replicas != nil {
		obs.DesiredReplicas = *deploy.Spec.Replicas
	}
	return nil
}

// containerImage is the image of a fetch Job's container, "" without one.
func containerImage(job *batchv1.Job) string {
	if job == nil {
		return ""
	}
	for _, c := range job.Spec.Template.Spec.Containers {
		if c.Name == values.FetchContainerName {
			return c.Image
		}
	}
	return ""
}

// liveModelWait is the serving Deployment's wait-for-model init container.
func liveModelWait(d *appsv1.Deployment) *values.ModelWait {
	if d == nil {
		return nil
	}
	for _, c := range d.Spec.Template.Spec.InitContainers {
		if c.Name == values.ModelWaitContainerName {
			return &values.ModelWait{Image: c.Image, Args: c.Args}
		}
	}
	return nil
}

func liveReplicas(d *appsv1.Deployment) *int32 {
	if d == nil {
		return nil
	}
	return d.Spec.Replicas
}

// The REST endpoint is the first model's; each model's is in its status.
func endpoints(namespace string, vals *values.Values) *servingv1alpha1.Endpoints {
	return &servingv1alpha1.Endpoints{
		GRPC: fmt.Sprintf("%s.%s.svc:%d", vals.Names.Service, namespace, vals.Serving.GRPCPort),
		REST: restURL(namespace, vals, vals.Models[0].Name),
	}
}

// restURL is the in-cluster URL of one model's REST API.
func restURL(namespace string, vals *values.Values, model string) string {
	return fmt.Sprintf("http://%s.%s.svc:%d/v1/models/%s", vals.Names.Service, namespace, vals.Serving.RESTPort, model)
}

// SetupWithManager states what wakes the reconciler: its ModelServers'
// spec changes, and changes to the objects of their releases that matter
// (not status noise).
func (r *ModelServerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&servingv1alpha1.ModelServer{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.Deployment{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: deploymentChanged})).
		Owns(&batchv1.Job{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: jobChanged})).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.PersistentVolumeClaim{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: claimChanged})).
		// Their status says nothing the ModelServer reports; a change of
		// spec or a deletion is what matters.
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&networkingv1.Ingress{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&networkingv1.NetworkPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(r.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles), RateLimiter: retryLimiter()}).
		Complete(r)
}

// maxRetryDelay caps the backoff between retries of a failing
// ModelServer. The default cap, about 17 minutes, means that after a few
// minutes of apiserver trouble a ModelServer would sit idle long after the
// trouble ended.
const maxRetryDelay = time.Minute

// retryLimiter backs off each failing ModelServer exponentially from 5ms
// to maxRetryDelay, and all of them together to 10 retries a second
// (bursts of 100), as controller-runtime's default does but for the cap.
func retryLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}
