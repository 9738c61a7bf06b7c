package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"

	helmrelease "helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/desired"
	"github.com/modelserver-dev/modelserver-operator/internal/owned"
	"github.com/modelserver-dev/modelserver-operator/internal/release"
	"github.com/modelserver-dev/modelserver-operator/internal/servingtls"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// planKind is what a reconcile does with a ModelServer's release.
type planKind int

const (
	// planNothing: the release is deployed with these values and all its
	// objects are intact.
	planNothing planKind = iota
	// planFreshInstall: a new ModelServer, installed without reading for a
	// release first. One that exists after all (the status write after
	// an install was lost) is found by the install itself.
	planFreshInstall
	// planInstall: there is no deployed release; Helm's checked install.
	planInstall
	// planUpgrade: the release must change, for the plan's reason.
	planUpgrade
	// planRecover: an interrupted operation left the latest revision
	// pending; it is marked failed and upgraded from.
	planRecover
)

// releasePlan is the decision of one reconcile about the release.
type releasePlan struct {
	kind planKind
	// why says what made an upgrade necessary, for its Event.
	why string
	// quiet says the upgrade is no news of its own: it follows a fetch's
	// end, putting the model in service (the second step of a change
	// already announced) or no longer waiting for it, and the Ready or
	// failure Event that follows says how it went.
	quiet bool
	// last is the latest revision as read by the decision (nil: none), so
	// that applying it does not read it again. Unset for a fresh install
	// and for a release trusted from the status.
	last *release.Latest
	read bool
	// deployed is the release as found deployed with the current digest,
	// when the status did not say so yet.
	deployed *servingv1alpha1.ReleaseStatus
	// repair says the reconcile deleted objects of the release to have
	// them made again (a failed fetch's Job): the upgrade reads every
	// object and makes those missing (release.Manager.Repair).
	repair bool
}

// planFor plans what brings the release from its latest revision last
// (nil: none) to the current values, for the reason why.
func planFor(last *release.Latest, why string) releasePlan {
	p := releasePlan{last: last, read: true, why: why}
	switch {
	case last == nil || last.Info.Status == helmrelease.StatusUninstalled:
		p.kind = planInstall
	case last.Info.Status.IsPending() || last.Info.Status == helmrelease.StatusUninstalling:
		p.kind = planRecover
	default:
		p.kind = planUpgrade
	}
	return p
}

// planRelease decides whether Helm has anything to do. The status says
// which digest is deployed; the release record is read only when the
// status disagrees with the values, or once per process to catch a record
// a crash left pending; the objects are checked for drift from the cache.
func (r *ModelServerReconciler) planRelease(ctx context.Context, ms *servingv1alpha1.ModelServer, want *desired.State) (releasePlan, error) {
	rel := ms.Status.Release
	_, verified := r.verified.Load(ms.UID)
	if !releaseAttempted(ms) && !verified {
		// A ModelServer this process has installed is not new, even
		// if the status write after its install was lost: a second
		// install would find the first and upgrade it.
		return releasePlan{kind: planFreshInstall, why: "install"}, nil
	}
	if rel != nil && rel.ValuesDigest == want.Digest && verified {
		return r.planDrift(ctx, ms, want, releasePlan{})
	}
	last, err := r.Releases.Get(ms.Namespace, ms.Name)
	if err != nil {
		return releasePlan{}, err
	}
	if rel == nil || rel.ValuesDigest != want.Digest {
		// The status can lag the release: the write after a Helm
		// operation may have been refused (a conflict) or never made (a
		// crash). Such a release is not applied a second time.
		switch {
		case deployedWith(last, want.Digest):
		case rel == nil:
			return planFor(last, "install"), nil
		default:
			p := planFor(last, "")
			p.why, p.quiet = r.valuesChange(ms, want)
			return p, nil
		}
		r.verified.Store(ms.UID, struct{}{})
		return r.planDrift(ctx, ms, want, releasePlan{last: last, read: true, deployed: &servingv1alpha1.ReleaseStatus{
			Name: last.Name, Revision: last.Version, ChartVersion: r.Chart.Metadata.Version, ValuesDigest: want.Digest,
		}})
	}
	// Once per process, check the release record itself: a crash can
	// leave it pending while the status still shows the last good digest.
	switch {
	case last == nil:
		return planFor(last, "its release record is missing"), nil
	case last.Info.Status != helmrelease.StatusDeployed:
		return planFor(last, "the release is "+string(last.Info.Status)), nil
	case last.Labels[release.LabelValuesDigest] != want.Digest:
		return planFor(last, "the release was made from other values"), nil
	}
	r.verified.Store(ms.UID, struct{}{})
	return r.planDrift(ctx, ms, want, releasePlan{last: last, read: true})
}

// valuesChange says why the values differ from the deployed release's,
// and whether that is news of its own (see releasePlan.quiet). The status
// read is the one before this reconcile: its generation and chart are
// what the deployed release was made from.
func (r *ModelServerReconciler) valuesChange(ms *servingv1alpha1.ModelServer, want *desired.State) (why string, quiet bool) {
	switch was := ms.Status.Release.ChartVersion; {
	case ms.Generation != ms.Status.ObservedGeneration:
		return "the spec changed", false
	case was != "" && was != r.Chart.Metadata.Version:
		return fmt.Sprintf("the operator's chart changed from version %s to %s", was, r.Chart.Metadata.Version), false
	}
	for _, f := range want.Fetches {
		switch {
		case f.Refreshing && f.State == status.FetchMissing:
			// Each round's Job is a change of the release; the round's
			// outcome is the news, if any.
			return "a refresh round of model " + f.Name + " began", true
		case f.NewlyFetched:
			return "the model fetched for it is in place", true
		case f.NewlyFailed && !f.Refreshing:
			// The pods stop waiting for a first model that will not
			// come; the failure has its Warning.
			return "the fetch of model " + f.Name + " failed", true
		}
	}
	return "what the operator renders for it changed", false
}

func deployedWith(last *release.Latest, digest string) bool {
	return last != nil && last.Info.Status == helmrelease.StatusDeployed && last.Labels[release.LabelValuesDigest] == digest
}

// planDrift is p, made an upgrade if an object of the release drifted.
func (r *ModelServerReconciler) planDrift(ctx context.Context, ms *servingv1alpha1.ModelServer, want *desired.State, p releasePlan) (releasePlan, error) {
	why, err := r.drift(ctx, ms, want.Values)
	if err != nil || why == "" {
		return p, err
	}
	p.kind, p.why = planUpgrade, why
	return p, nil
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
	return c != nil && (c.Reason == servingv1alpha1.ReasonConflict || c.Reason == servingv1alpha1.ReasonReleaseFailed)
}

// applied is what applying a plan did to the release.
type applied struct {
	release  *servingv1alpha1.ReleaseStatus
	err      error
	conflict bool
	// news is the Event that tells what the release became and why, if
	// anything: it is recorded with the status it led to.
	news *releaseNews
}

// releaseNews is an Event about the release, not yet recorded: its
// reason, and what it says as a clause.
type releaseNews struct{ reason, clause string }

// apply carries the plan out: an install or an upgrade of the release.
func (r *ModelServerReconciler) apply(ctx context.Context, ms *servingv1alpha1.ModelServer, want *desired.State, p releasePlan) (applied, ctrl.Result, error) {
	m, err := want.Values.Map()
	if err != nil {
		return applied{}, ctrl.Result{}, err
	}
	last := p.last
	if !p.read && p.kind != planFreshInstall {
		if last, err = r.Releases.Get(ms.Namespace, ms.Name); err != nil {
			return applied{}, ctrl.Result{}, err
		}
	}
	var (
		rel *helmrelease.Release
		op  release.Op
	)
	if p.kind == planFreshInstall {
		rel, op, err = r.Releases.Install(ctx, ms.Namespace, ms.Name, r.Chart, m, want.Digest)
	} else {
		apply := r.Releases.Apply
		if p.repair {
			apply = r.Releases.Repair
		}
		rel, op, err = apply(ctx, ms.Namespace, ms.Name, r.Chart, m, want.Digest, last)
	}
	if errors.Is(err, release.ErrConflict) {
		r.warn(ms, servingv1alpha1.ReasonConflict, "Apply", sentence("Cannot deploy: %s", status.ErrorLine(err)))
		return applied{err: err, conflict: true}, ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	if err != nil {
		r.warn(ms, servingv1alpha1.ReasonReleaseFailed, "Apply", sentence("Helm %s of release %s failed: %s", op, ms.Name, status.ErrorLine(err)))
		return applied{err: err}, ctrl.Result{}, err
	}
	r.problems.resolved(ms.UID, servingv1alpha1.ReasonConflict, servingv1alpha1.ReasonReleaseFailed)
	r.verified.Store(ms.UID, struct{}{})
	done := &servingv1alpha1.ReleaseStatus{
		Name: rel.Name, Revision: rel.Version, ChartVersion: r.Chart.Metadata.Version, ValuesDigest: want.Digest,
	}
	// Remember the release at once: if the status patch at the end of this
	// reconcile fails, the next one must not upgrade again.
	if st, ok := r.written.Load(ms.UID); ok {
		known := st.(*servingv1alpha1.ModelServerStatus).DeepCopy()
		known.Release = done
		r.written.Store(ms.UID, known)
	}
	log.FromContext(ctx).Info("release applied", "op", op, "revision", rel.Version, "why", p.why)
	// A ModelServer's first install is no news to the user who has just
	// created it: Ready, or what stops it, is; nor is a quiet upgrade. An
	// install that replaces a lost release, upgrades and recoveries change
	// what runs, and say why.
	firstInstall := op == release.OpInstall && ms.Status.Release == nil
	if firstInstall || (p.quiet && op == release.OpUpgrade) {
		return applied{release: done}, ctrl.Result{}, nil
	}
	reason, clause := appliedEvent(op, rel.Name, rel.Version, p.why)
	return applied{release: done, news: &releaseNews{reason, clause}}, ctrl.Result{}, nil
}

// drift says which object of the release is missing or was changed by
// someone else in a field the operator sets, or "" if none. The cache can
// lag behind the release's last write (a Job just created, a Deployment
// just scaled), so an object it lacks or shows changed is read again live
// before it costs a Helm upgrade; only that object, so that a ModelServer
// whose objects are still arriving in the cache costs one read, not one
// per object.
func (r *ModelServerReconciler) drift(ctx context.Context, ms *servingv1alpha1.ModelServer, vals *values.Values) (string, error) {
	for _, key := range owned.Rendered(vals) {
		why, err := objectDrift(ctx, r.Client, ms.Namespace, key, vals)
		if err != nil || why == "" {
			if err != nil {
				return "", err
			}
			continue
		}
		if why, err = objectDrift(ctx, r.APIReader, ms.Namespace, key, vals); why != "" || err != nil {
			return why, err
		}
	}
	return "", nil
}

// objectDrift reads one object of the release through reader and says how
// it departs from the values, or "".
func objectDrift(ctx context.Context, reader client.Reader, namespace string, key owned.Key, vals *values.Values) (string, error) {
	obj := key.Kind.New()
	err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: key.Name}, obj)
	if apierrors.IsNotFound(err) {
		return key.String() + " was deleted", nil
	} else if err != nil {
		return "", err
	}
	return modifiedObject(vals, key, obj), nil
}

// modifiedObject compares the fields of the object that the values decide
// and that nobody else should change. It is a cheap stand-in for a Helm
// dry-run: no request, no render.
func modifiedObject(vals *values.Values, key owned.Key, obj client.Object) string {
	for k, v := range vals.Labels.Common {
		if obj.GetLabels()[k] != v {
			return key.String() + " lost its label " + k
		}
	}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		want := vals.ConfigFiles
		if b := vals.BackendTLS; b != nil && key.Name == b.CAConfigMap {
			want = map[string]string{servingtls.CAKey: b.CA}
		}
		if !maps.Equal(o.Data, want) {
			return key.String() + " has a modified config"
		}
	case *corev1.Service:
		if o.Spec.Type != vals.Service.Type || len(o.Spec.Ports) != 2 {
			return key.String() + " was modified"
		}
	case *appsv1.Deployment:
		// The autoscaler sets the count; otherwise it is ours.
		if vals.Autoscaling == nil && (o.Spec.Replicas == nil || *o.Spec.Replicas != vals.Serving.Replicas) {
			return key.String() + " was scaled outside the ModelServer"
		}
		if len(o.Spec.Template.Spec.Containers) != 1 || o.Spec.Template.Spec.Containers[0].Image != vals.Serving.Image {
			return key.String() + " has a modified container"
		}
		if ru := o.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxSurge == nil || ru.MaxUnavailable == nil ||
			*ru.MaxSurge != vals.Serving.MaxSurge || *ru.MaxUnavailable != vals.Serving.MaxUnavailable {
			return key.String() + " has a modified rolling update"
		}
	}
	return ""
}
