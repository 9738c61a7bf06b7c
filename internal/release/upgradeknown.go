package release

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// upgradeKnown upgrades a deployed release from its latest revision, last,
// as the caller has just read it, without reading any of its objects
// from the apiserver (except one to delete that Options.Live does not
// hold: whether it is marked to keep is a question of the live object).
//
// Helm's upgrade GETs every object of the new revision (to see whether it
// exists, then again for its three-way merge), and each one to be deleted:
// about six reads per upgrade of a ModelServer's release, most of its
// requests. It patches each object with the difference between the
// previous manifest and the new one, plus whatever the live object has
// drifted from the new one. Here the patch is the difference between the
// two manifests alone, and an object the render did not change is not
// written at all. A drifted field is left to the next reconcile, whose
// drift check (run whenever the release is deployed with the current
// values) finds it and has Helm's upgrade put it back. The records written
// are those Helm's upgrade writes: the previous revision superseded, the
// new one deployed.
//
// It applies to a change of the values (their digest, which covers the
// chart, differs from the latest revision's), not to an upgrade with the
// same values, which the caller makes to repair drift: that needs the
// live objects, and is Helm's. handled is false, before anything is
// written, where this path does not apply (also where the latest
// revision is not deployed, has hooks, or does not parse as
// renderParsedOnce parses), and after writes where an object to create
// exists already, a write failed, or an object to delete could not be
// read. Then Helm's upgrade runs: it takes
// over what exists as Helm does or refuses it, and makes and records the
// error Helm makes. Writing again what this path wrote is harmless.
func (m *Manager) upgradeKnown(ctx context.Context, cfg *action.Configuration, namespace, name string, ch *chart.Chart,
	vals map[string]any, digest string, last *Latest) (_ *helmrelease.Release, handled bool, _ error) {
	if last == nil || last.Info == nil || last.Info.Status != helmrelease.StatusDeployed || len(last.Hooks) > 0 ||
		last.Labels[LabelValuesDigest] == digest {
		return nil, false, nil
	}
	rel, target, ok, err := m.renderRevisionParsedOnce(cfg, namespace, name, ch, vals, digest, last.Release)
	if !ok {
		return nil, false, nil
	}
	if err != nil {
		return rel, true, fmt.Errorf("upgrade release %s/%s: %w", namespace, name, err)
	}
	original, ok := m.recordedObjects(last.Manifest, namespace)
	if !ok {
		return nil, false, nil
	}
	for _, list := range []kube.ResourceList{original, target} {
		if err := list.Visit(markOwnership(name, namespace)); err != nil {
			return nil, false, nil
		}
	}
	writes, ok := planWrites(original, target)
	if !ok {
		return nil, false, nil
	}
	for _, w := range writes {
		if err := m.write(ctx, w); err != nil {
			m.opts.Log.V(1).Info("upgrade without reads stopped; upgrading with Helm's checks", "release", name, "namespace", namespace,
				"object", w.info.ObjectName(), "error", err.Error())
			return nil, false, nil
		}
	}

	superseded := *last.Release
	info := *last.Info
	superseded.Info = &info
	superseded.Info.Status = helmrelease.StatusSuperseded
	if err := cfg.Releases.Update(&superseded); err != nil {
		return nil, true, fmt.Errorf("upgrade release %s/%s: mark revision %d superseded: %w", namespace, name, last.Version, err)
	}
	rel.SetStatus(helmrelease.StatusDeployed, "Upgrade complete")
	cfg.Releases.MaxHistory = m.opts.MaxHistory
	if err := cfg.Releases.Create(rel); err != nil {
		return nil, true, fmt.Errorf("upgrade release %s/%s: record revision %d: %w", namespace, name, rel.Version, err)
	}
	return rel, true, nil
}

// recordedObjects are the objects of a recorded manifest, parsed as
// renderParsedOnce parses a rendered one; ok is false where it would not.
func (m *Manager) recordedObjects(manifest, namespace string) (kube.ResourceList, bool) {
	var out kube.ResourceList
	for _, doc := range splitManifest(manifest) {
		d, ok := parseDoc("", doc)
		if !ok {
			return nil, false
		}
		if d.obj == nil {
			continue
		}
		info, ok := m.infoOf(d.obj, namespace)
		if !ok {
			return nil, false
		}
		out = append(out, info)
	}
	return out, true
}

// objectWrite is one write of an upgrade: a create, a patch or a delete.
type objectWrite struct {
	verb  string
	info  *resource.Info
	patch []byte
	pt    types.PatchType
}

// planWrites lists the writes from the objects of original to those of
// target, in Helm's order: the target's objects in install order (a create
// for each new one, a patch for each changed one), then the deletes of
// those no longer rendered. ok is false if a patch cannot be made.
func planWrites(original, target kube.ResourceList) ([]objectWrite, bool) {
	var writes []objectWrite
	for _, t := range target {
		o := original.Get(t)
		if o == nil {
			writes = append(writes, objectWrite{verb: "create", info: t})
			continue
		}
		patch, pt, err := twoWayPatch(o, t)
		if err != nil {
			return nil, false
		}
		if string(patch) != "{}" {
			writes = append(writes, objectWrite{verb: "patch", info: t, patch: patch, pt: pt})
		}
	}
	for _, o := range original.Difference(target) {
		writes = append(writes, objectWrite{verb: "delete", info: o})
	}
	return writes, true
}

// write makes w, but for a delete of an object kept alive.
func (m *Manager) write(ctx context.Context, w objectWrite) error {
	if w.verb == "delete" {
		if keep, err := m.keptLive(ctx, w.info); err != nil || keep {
			return err
		}
	}
	return w.do(ctx)
}

// keptLive says whether an object a revision no longer renders is to stay
// rather than be deleted: whether the live object, as Helm's upgrade reads
// it, is marked helm.sh/resource-policy: keep. The mark may have been
// added by hand since the object was rendered, so the recorded manifest
// does not tell. An object already gone needs no delete either.
func (m *Manager) keptLive(ctx context.Context, info *resource.Info) (bool, error) {
	var annotations map[string]string
	held := false
	if m.opts.Live != nil {
		annotations, held = m.opts.Live.Annotations(ctx, info.Mapping.GroupVersionKind, info.Namespace, info.Name)
	}
	if !held {
		h := resource.NewHelper(info.Client, info.Mapping)
		obj, err := h.Get(info.Namespace, info.Name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		acc, err := meta.Accessor(obj)
		if err != nil {
			return false, err
		}
		annotations = acc.GetAnnotations()
	}
	return annotations[kube.ResourcePolicyAnno] == kube.KeepPolicy, nil
}

// twoWayPatch is the patch from original's object to target's: a
// strategic merge patch for a kind Kubernetes' client knows, else a JSON
// merge patch, as Helm chooses.
func twoWayPatch(original, target *resource.Info) ([]byte, types.PatchType, error) {
	from, err := json.Marshal(original.Object)
	if err != nil {
		return nil, "", err
	}
	to, err := json.Marshal(target.Object)
	if err != nil {
		return nil, "", err
	}
	if bytes.Equal(from, to) {
		// Most of a release's objects render alike from one revision to
		// the next; the patch between them is empty, and a strategic
		// merge would walk the whole object to find that out.
		return []byte("{}"), types.MergePatchType, nil
	}
	typed, err := scheme.Scheme.New(target.Mapping.GroupVersionKind)
	if err != nil {
		patch, err := jsonpatch.CreateMergePatch(from, to)
		return patch, types.MergePatchType, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(from, to, typed)
	return patch, types.StrategicMergePatchType, err
}

// do makes the write. A delete of an object already gone is done; any
// other failure of a delete is only logged by Helm, and is here too, by
// the caller's fallback to Helm.
func (w objectWrite) do(ctx context.Context) error {
	if w.verb == "create" {
		return create(w.info)
	}
	h := resource.NewHelper(w.info.Client, w.info.Mapping)
	var req *rest.Request
	if w.verb == "patch" {
		req = w.info.Client.Patch(w.pt).Body(w.patch).
			VersionedParams(&metav1.PatchOptions{FieldManager: FieldManager}, metav1.ParameterCodec)
	} else {
		background := metav1.DeletePropagationBackground
		req = w.info.Client.Delete().Body(&metav1.DeleteOptions{PropagationPolicy: &background})
	}
	err := req.NamespaceIfScoped(w.info.Namespace, h.NamespaceScoped).Resource(h.Resource).Name(w.info.Name).Do(ctx).Error()
	if w.verb == "delete" && apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
