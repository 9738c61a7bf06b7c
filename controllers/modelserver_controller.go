// Package controllers holds the ModelServer reconciler: it turns each
// ModelServer into a Helm release of the embedded chart and reports what
// the release's objects are doing.
package controllers

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"helm.sh/helm/v3/pkg/chart"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	helmcharts "github.com/modelserver-dev/modelserver-operator/helm-charts"
	"github.com/modelserver-dev/modelserver-operator/internal/desired"
	"github.com/modelserver-dev/modelserver-operator/internal/metrics"
	"github.com/modelserver-dev/modelserver-operator/internal/owned"
	"github.com/modelserver-dev/modelserver-operator/internal/release"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// Finalizer held a ModelServer until its release was uninstalled, before
// the release records were owned by their ModelServer as its objects are.
// ModelServers that still carry it are uninstalled before it is removed.
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

// stalledRolloutGrace is how long serving pods may stand not ready, with
// no step forward, before the operator reads them for the reason. While
// that lasts they are read again (status.RolloutStalled says when): the
// kubelet's and the scheduler's retries are not watched.
const stalledRolloutGrace = 30 * time.Second

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
	// PodLogs reads the tail of running fetch pods' logs, for how far
	// their fetch has come (readProgress). Nil: the status says nothing
	// of it.
	PodLogs corev1client.PodsGetter
	// FetchImage is the operator's image, whose fetcher runs the model-fetch
	// Jobs and the serving pods' wait for the model.
	FetchImage string
	// ProxyEnv is passed on to the serving and fetch containers.
	ProxyEnv []corev1.EnvVar
	// RecheckAfter is how soon a ModelServer with warnings (an optional
	// API it asks for is missing) is looked at again. Default 1 minute.
	RecheckAfter time.Duration
	// Clock tells the time the status is computed at. Default: the real
	// clock.
	Clock clock.PassiveClock
	// MaxConcurrentReconciles bounds the ModelServers reconciled at once.
	// Default: DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// Namespaces are those the manager's cache holds (nil: all), which a
	// cache the reconciler starts itself holds too (lateWatches).
	Namespaces map[string]cache.Config

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
	// uids maps each ModelServer's name to its UID, so that what is kept
	// by UID can be forgotten once the ModelServer is gone: then only its
	// name is known.
	uids sync.Map
	// held are the changes of status held back, not yet written.
	held heldSteps
	// seenTemplates holds, by UID, the pod template of an autoscaled
	// ModelServer's Deployment as its controller last had seen all of it
	// (scaledOnly).
	seenTemplates sync.Map
	// fetchRetries holds, by UID, the settings each failed fetch Job was
	// made again with (desired.Observed.RetriedWith), a
	// map[string]values.FetchSettings.
	fetchRetries sync.Map
	// podReads holds, by UID, the last read of a stalled rollout's pods;
	// fetchPodReads, of the Events of fetch pods late to start;
	// claimsBound, until when the scheduler may take to try fetch pods
	// again once their claims are bound; jobEventReads, by the Job's UID,
	// of the Events of a fetch Job still without a pod.
	podReads, fetchPodReads, claimsBound, jobEventReads podReads
	// progressReads holds, by the fetch Job's UID, when the next read of
	// its pod's log for its progress is due.
	progressReads podReads
	// copiesVerified holds, by UID, the pins the serving pods' own copies
	// were last checked against, and what was found (copiesChecked).
	copiesVerified sync.Map
	// indexed says that Client reads a cache with the indexes of
	// addIndexes: SetupWithManager adds them, and Client must then be
	// the manager's.
	indexed bool
	// chartOnce names Chart for the digest the first time it is needed:
	// hashing the chart's files on every reconcile would be wasted work.
	chartOnce sync.Once
	chartName string
	// late starts the watches of the Gateway API's kinds once they are
	// asked for; nil for a reconciler driven by hand.
	late *lateWatches
}

// +kubebuilder:rbac:groups=serving.modelserver.dev,resources=modelservers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=serving.modelserver.dev,resources=modelservers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=serving.modelserver.dev,resources=modelservers/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=list;watch
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses;networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes;grpcroutes;backendtlspolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingressclasses,verbs=list
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=get;list;watch

// Reconcile brings one ModelServer's release in line with its spec and
// reports what its objects are doing.
func (r *ModelServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// 1. Load the ModelServer; a deleted one needs nothing more.
	ms := &servingv1alpha1.ModelServer{}
	if err := r.Get(ctx, req.NamespacedName, ms); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetName(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// 2. Being deleted: the garbage collector removes what it owns, the
	// release records included, so there is nothing to do, and no
	// finalizer holds it while an operator is away. One added by an
	// earlier version is honoured: that release's records are not owned.
	if !ms.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, ms)
	}
	// 3. (No finalizer: see 2.)
	r.uids.Store(req.NamespacedName, ms.UID)
	return r.reconcileNormal(ctx, ms)
}

// The results are named: the deferred status write reports its error
// through reconcileErr, so that a lost write is retried.
func (r *ModelServerReconciler) reconcileNormal(ctx context.Context, ms *servingv1alpha1.ModelServer) (result ctrl.Result, reconcileErr error) {
	if st, ok := r.written.Load(ms.UID); ok {
		ms.Status = *st.(*servingv1alpha1.ModelServerStatus).DeepCopy()
	}
	old := ms.Status.DeepCopy()
	needed := values.DesiredReplicas(ms)
	report := status.Observation{Generation: ms.Generation, DesiredReplicas: needed, NeededReplicas: needed,
		RollUnavailable: values.RollUnavailable(ms, needed), Paused: paused(ms)}
	var (
		obs  *observed
		news *releaseNews
	)
	// 4. Whatever happens below, the status is written once, at the end,
	// and only if it changed.
	defer func() {
		wait, err := r.writeStatus(ctx, ms, *old, report, obs, news)
		if err != nil && reconcileErr == nil {
			reconcileErr = err
		}
		if wait > 0 && (result.RequeueAfter == 0 || wait < result.RequeueAfter) {
			result.RequeueAfter = wait
		}
	}()

	// 5. Observe: the fetch Jobs, the serving Deployment, the optional APIs.
	obs, err := r.observe(ctx, ms)
	if err != nil {
		return ctrl.Result{}, err
	}

	// 6. One pure call: the validated spec, each model's fetch, the values
	// and their digest.
	want, err := desired.For(ms, obs.Observed, r.config())
	if err != nil {
		report.BlockedReason, report.BlockedMessage = servingv1alpha1.ReasonInvalidSpec, err.Error()
		return ctrl.Result{}, nil // only a spec change can help
	}
	report.Source, report.Models = want.Spec.Source, want.Fetches
	report.SummarizeFetches()
	report.FetchPodsProblem = obs.fetchPodsProblem
	report.Selector, report.Warnings = want.Selector, want.Values.Warnings
	// The ways in from outside are read once the release is current; a
	// reconcile that stops before keeps those last read.
	report.Endpoints = withExternal(want.Endpoints, ms.Status.Endpoints)
	r.warnOfMemory(ms, want.Fetches, &report)
	report.Deployment = obs.Deployment
	report.DesiredReplicas = desiredReplicas(ms, want, obs.Deployment)
	r.reportAutoscaler(ms, obs, &report)
	if obs.tls.reason != "" {
		// Watched, but a Secret of another type is not: look again.
		report.BlockedReason, report.BlockedMessage = obs.tls.reason, obs.tls.message
		return ctrl.Result{RequeueAfter: cmp.Or(r.RecheckAfter, time.Minute)}, nil
	}
	r.warnOfTLS(ms, obs, &report)
	if report.Fetch != status.FetchSucceeded {
		if reason, msg, err := r.checkSecrets(ctx, ms, want.Spec.Models); err != nil {
			return ctrl.Result{}, err
		} else if msg != "" {
			report.BlockedReason, report.BlockedMessage = reason, msg
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
	}

	// 7. Decide what Helm has to do, and do it, unless paused: then only
	// say what waits.
	if report.Paused {
		return r.reportPaused(ctx, ms, want, &report)
	}
	plan, err := r.planWithRetries(ctx, ms, want)
	if err != nil {
		return ctrl.Result{}, err
	}
	report.Release = cmp.Or(plan.deployed, ms.Status.Release)
	if plan.kind != planNothing {
		done, result, err := r.apply(ctx, ms, want, plan)
		report.ReleaseErr, report.Conflict = done.err, done.conflict
		news = done.news
		if err != nil || done.conflict {
			return result, err
		}
		report.Release = done.release
		// The Jobs the release has just created are running, though the
		// cache may not show them yet.
		report.FetchJobsCreated()
		// What was read before the release changed the Deployment must
		// not report the old pods as the new ones' readiness.
		if report.Deployment, err = r.observeDeployment(ctx, ms); err != nil {
			return ctrl.Result{}, err
		}
		report.DesiredReplicas = desiredReplicas(ms, want, report.Deployment)
	}
	report.ReleaseCurrent = true
	report.ScaledOnly = r.scaledOnly(ms, report.Deployment)
	if obs.stalledLookAgainIn, err = r.observeStalledRollout(ctx, ms, &report); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.verifyCopies(ctx, ms, want, report.Deployment); err != nil {
		return ctrl.Result{}, err
	}
	if obs.exposureLookAgainIn, err = r.observeExposure(ctx, ms, want, &report); err != nil {
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).V(1).Info("reconciled", "fetch", report.Fetch, "plan", plan.kind, "why", plan.why)
	for _, at := range []time.Time{want.NextRound, want.NextRetry} {
		if !at.IsZero() {
			// Nothing watched changes when a refresh round or a retry
			// is due.
			obs.sooner(max(at.Sub(r.clock().Now()), time.Second))
		}
	}
	return r.lookAgain(obs, want.Values.WaitsForAPIs), nil
}

// eventModelOverMemoryLimit warns that the models served are larger than
// the serving container's memory limit (status.ModelsOverMemory).
const eventModelOverMemoryLimit = "ModelOverMemoryLimit"

// warnOfMemory reports models larger than the serving container's memory
// limit, once, and resolves the warning when they no longer are.
func (r *ModelServerReconciler) warnOfMemory(ms *servingv1alpha1.ModelServer, fetches []status.ModelFetch, report *status.Observation) {
	w := status.ModelsOverMemory(ms.Spec.Resources.Limits, fetches)
	if w == "" {
		r.problems.resolved(ms.UID, eventModelOverMemoryLimit)
		return
	}
	report.Warnings = append(slices.Clone(report.Warnings), w)
	r.warn(ms, eventModelOverMemoryLimit, "CompareModelWithMemoryLimit", sentence("%s", w))
}

// warnOfTLS reports what is wrong with spec.tls's certificate that does
// not stop the release (expired, not yet valid), with a Warning, and
// resolves the warnings of what no longer is.
func (r *ModelServerReconciler) warnOfTLS(ms *servingv1alpha1.ModelServer, obs *observed, report *status.Observation) {
	for _, reason := range []string{eventTLSSecretUnusable, eventTLSCertificateExpired, eventTLSCertificateNotYetValid} {
		if reason != obs.tls.warningReason {
			r.problems.resolved(ms.UID, reason)
		}
	}
	if obs.tls.warning != "" {
		report.Warnings = append(slices.Clone(report.Warnings), obs.tls.warning)
		r.warn(ms, obs.tls.warningReason, "ReadTLSSecret", sentence("%s", obs.tls.warning))
	}
}

// paused says that ms's reconciliation is paused (AnnotationPaused).
func paused(ms *servingv1alpha1.ModelServer) bool {
	return ms.Annotations[servingv1alpha1.AnnotationPaused] == "true"
}

// reportPaused reports a paused ModelServer: what its objects do, and what
// the operator would change and does not. Deciding that reads, and writes
// nothing: no failed fetch's Job is deleted for a retry.
func (r *ModelServerReconciler) reportPaused(ctx context.Context, ms *servingv1alpha1.ModelServer, want *desired.State, report *status.Observation) (ctrl.Result, error) {
	plan, err := r.planRelease(ctx, ms, want)
	if err != nil {
		return ctrl.Result{}, err
	}
	report.Release = cmp.Or(plan.deployed, ms.Status.Release)
	switch plan.kind {
	case planNothing:
		report.ReleaseCurrent = true
		report.ScaledOnly = r.scaledOnly(ms, report.Deployment)
	case planFreshInstall:
		report.Waiting = "the release's install"
	default:
		report.Waiting = "the release's upgrade (" + plan.why + ")"
	}
	// A stalled rollout's pods are read again when it has lasted.
	again, err := r.observeStalledRollout(ctx, ms, report)
	return ctrl.Result{RequeueAfter: again}, err
}

// lookAgain says when to reconcile again for what no watch reports.
func (r *ModelServerReconciler) lookAgain(obs *observed, waitsForAPIs bool) ctrl.Result {
	var after time.Duration
	sooner := func(d time.Duration) { waitSooner(&after, d) }
	// A fetch Job still without a pod is looked into after a grace.
	sooner(obs.lookAgainIn)
	// So are serving pods that are not ready and no longer progressing.
	sooner(obs.stalledLookAgainIn)
	// And an autoscaler that says it cannot scale: its syncs wake nothing
	// while it says the same.
	sooner(obs.autoscalerLookAgainIn)
	// And a certificate, when it expires.
	sooner(obs.tls.lookAgainIn)
	// And a way in from outside the cluster not yet taken up: what keeps
	// it so is not watched.
	sooner(obs.exposureLookAgainIn)
	// The Job controller retries a refused pod without a change the
	// watches see; look again soon to notice when it gets through.
	if obs.podRejected {
		sooner(podRejectedRetry)
	}
	// Nothing watched changes when a missing API is installed.
	if waitsForAPIs && after == 0 {
		after = cmp.Or(r.RecheckAfter, time.Minute)
	}
	return ctrl.Result{RequeueAfter: after}
}

// scaledOnly says that the Deployment's controller has not seen d's latest
// generation, but d's pod template is the one it had seen: an autoscaler
// has scaled it, and its status still tells of the pods of its template.
// The template last seen is kept for autoscaled ModelServers alone, whose
// Deployment changes without the operator; any other change of count is a
// new generation of the ModelServer. A process that has not seen the
// template yet does not know.
func (r *ModelServerReconciler) scaledOnly(ms *servingv1alpha1.ModelServer, d *appsv1.Deployment) bool {
	if ms.Spec.Autoscaling == nil || d == nil {
		r.seenTemplates.Delete(ms.UID)
		return false
	}
	if d.Status.ObservedGeneration >= d.Generation {
		r.seenTemplates.Store(ms.UID, &d.Spec.Template)
		return false
	}
	seen, ok := r.seenTemplates.Load(ms.UID)
	return ok && equality.Semantic.DeepEqual(seen.(*corev1.PodTemplateSpec), &d.Spec.Template)
}

// desiredReplicas is the number of serving pods wanted: the spec's, or,
// under an autoscaler, the count it gave the Deployment.
func desiredReplicas(ms *servingv1alpha1.ModelServer, want *desired.State, d *appsv1.Deployment) int32 {
	if ms.Spec.Autoscaling != nil && d != nil && d.Spec.Replicas != nil {
		return *d.Spec.Replicas
	}
	return want.Spec.DesiredReplicas
}

func (r *ModelServerReconciler) config() desired.Config {
	r.chartOnce.Do(func() { r.chartName = r.Chart.Metadata.Version + "+" + helmcharts.Fingerprint(r.Chart) })
	return desired.Config{
		Chart:        r.chartName,
		ChartVersion: r.Chart.Metadata.Version,
		AppVersion:   r.Chart.Metadata.AppVersion,
		FetchImage:   r.FetchImage,
		ProxyEnv:     r.ProxyEnv,
	}
}

func (r *ModelServerReconciler) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// warn announces a problem, unless it is the one already announced.
func (r *ModelServerReconciler) warn(ms *servingv1alpha1.ModelServer, reason, action, note string) {
	if r.problems.first(ms.UID, reason, note) {
		r.Recorder.Eventf(ms, nil, corev1.EventTypeWarning, reason, action, "%s", note)
	}
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
		r.warn(ms, servingv1alpha1.ReasonReleaseFailed, "Uninstall", sentence("Helm uninstall of release %s failed: %s", ms.Name, status.ErrorLine(err)))
		return err
	}
	r.forget(ms.UID)
	patch := client.MergeFrom(ms.DeepCopy())
	controllerutil.RemoveFinalizer(ms, Finalizer)
	return client.IgnoreNotFound(r.Patch(ctx, ms, patch))
}

// forgetName forgets what is kept for a ModelServer that is gone.
func (r *ModelServerReconciler) forgetName(name types.NamespacedName) {
	if uid, ok := r.uids.LoadAndDelete(name); ok {
		r.forget(uid.(types.UID))
	}
}

func (r *ModelServerReconciler) forget(uid types.UID) {
	r.verified.Delete(uid)
	r.written.Delete(uid)
	r.problems.forget(uid)
	r.held.forget(uid)
	r.seenTemplates.Delete(uid)
	r.fetchRetries.Delete(uid)
	r.podReads.forget(uid)
	r.fetchPodReads.forget(uid)
	r.claimsBound.forget(uid)
	r.jobEventReads.forgetOwner(uid)
	r.progressReads.forgetOwner(uid)
	r.copiesVerified.Delete(uid)
	metrics.Forget(uid)
}

// SetupWithManager states what wakes the reconciler: its ModelServers'
// spec changes, changes that matter (not status noise) to the objects of
// the owned kinds, its fetch pods' news, and its claims' failures.
func (r *ModelServerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := addIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	r.indexed = true
	b := ctrl.NewControllerManagedBy(mgr).
		For(&servingv1alpha1.ModelServer{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, pauseChanged)))
	for _, k := range owned.Kinds {
		var opts []builder.WatchesOption
		if k.Changed != nil {
			opts = append(opts, builder.WithPredicates(k.Changed))
		}
		b = b.Watches(k.New(), ownerHandler(mgr.GetClient()), opts...)
	}
	b = b.Watches(&corev1.Pod{}, firstForInstalled{handler.EnqueueRequestsFromMapFunc(fetchPodModelServer)},
		builder.WithPredicates(fetchPodNews))
	b = b.Watches(&corev1.Event{}, firstForInstalled{handler.EnqueueRequestsFromMapFunc(r.claimFailureModelServer)},
		builder.WithPredicates(claimFailureNews))
	// Another ModelServer whose routes come to take this one's requests
	// (RouteShared): nothing of this one changes.
	b = b.Watches(&servingv1alpha1.ModelServer{}, handler.EnqueueRequestsFromMapFunc(r.routeSharers), builder.WithPredicates(gatewaySpecNews))
	// spec.tls's Secrets, by their metadata alone (TLSSecretsCache).
	b = b.WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.tlsSecretModelServers))
	// The pods' service accounts, for an oci:// model's pull secrets
	// (ServiceAccountsCache).
	b = b.Watches(&corev1.ServiceAccount{}, handler.EnqueueRequestsFromMapFunc(r.serviceAccountModelServers),
		builder.WithPredicates(accountChanged))
	c, err := b.WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(r.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles), RateLimiter: retryLimiter()}).
		Build(r)
	if err != nil {
		return err
	}
	r.late = &lateWatches{
		ctrl: c, cache: mgr.GetCache(),
		gateways: firstForInstalled{handler.EnqueueRequestsFromMapFunc(r.gatewayModelServers)},
		owner:    ownerHandler(mgr.GetClient()),
		caSources: map[schema.GroupVersionKind]handler.EventHandler{
			configMapKind: handler.EnqueueRequestsFromMapFunc(r.caSourceModelServers(configMapKind)),
			secretKind:    handler.EnqueueRequestsFromMapFunc(r.caSourceModelServers(secretKind)),
		},
		newCache: func() (cache.Cache, error) {
			c, err := cache.New(mgr.GetConfig(), cache.Options{
				Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
				DefaultNamespaces: r.Namespaces, DefaultTransform: cache.TransformStripManagedFields(),
				ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: caSourcesCache()},
			})
			if err == nil {
				err = mgr.Add(c)
			}
			return c, err
		},
	}
	return nil
}

// pauseChanged lets through a ModelServer paused or resumed: an
// annotation's change is no new generation.
var pauseChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		was, is := e.ObjectOld.GetAnnotations()[servingv1alpha1.AnnotationPaused], e.ObjectNew.GetAnnotations()[servingv1alpha1.AnnotationPaused]
		return (was == "true") != (is == "true")
	},
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
