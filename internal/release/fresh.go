package release

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/util/retry"
)

// The marks Helm puts on every object of a release, and checks before it
// takes an existing object into one.
const (
	helmManagedByLabel      = "app.kubernetes.io/managed-by"
	helmReleaseName         = "meta.helm.sh/release-name"
	helmReleaseNamespaceKey = "meta.helm.sh/release-namespace"
)

// errNotFresh says that something the new release needs exists already:
// one of its objects, or its record.
var errNotFresh = errors.New("the release or one of its objects exists already")

// Install makes the first revision of a release that the caller believes
// does not exist yet: a new ModelServer's. Helm's install first reads the
// release's history and GETs every object to check that none is in the
// way, which for a new ModelServer is nothing but cost (half the requests
// of an install, one round trip after another). Here the apiserver makes
// that check: every object is created at once, and an object that exists
// already fails its create with AlreadyExists.
//
// Whatever exists already — the objects of an install a crash cut short, a
// release record, or an object of the user's — hands the release to
// Apply, which reads the history and checks every object as Helm does. If
// that finds an object it must not take over, the objects this call has
// just created are deleted again, so a conflict leaves nothing behind.
// The record written is the one Helm's install writes.
func (m *Manager) Install(ctx context.Context, namespace, name string, ch *chart.Chart, vals map[string]any, digest string) (_ *helmrelease.Release, op Op, err error) {
	cfg, err := m.config(namespace, ownerOf(vals))
	if err != nil {
		return nil, OpNone, err
	}
	start := time.Now()
	rel, created, err := m.installFresh(ctx, cfg, namespace, name, ch, vals, digest)
	if !errors.Is(err, errNotFresh) {
		op = OpInstall
		observe(start, &op, &err)
		return rel, op, err
	}
	m.opts.Log.V(1).Info("release or objects exist already; installing with Helm's checks", "release", name, "namespace", namespace)
	last, err := m.Get(namespace, name)
	if err != nil {
		return nil, OpNone, err
	}
	rel, op, err = m.Apply(ctx, namespace, name, ch, vals, digest, last)
	if errors.Is(err, ErrConflict) && len(created) > 0 {
		if derr := deleteCreated(created); derr != nil {
			err = fmt.Errorf("%w (and removing the objects just created: %v)", err, derr)
		}
	}
	return rel, op, err
}

// installFresh renders the release, creates its objects concurrently and
// records it. It returns errNotFresh, with the objects it created, when
// anything already exists.
func (m *Manager) installFresh(ctx context.Context, cfg *action.Configuration, namespace, name string, ch *chart.Chart, vals map[string]any, digest string) (*helmrelease.Release, kube.ResourceList, error) {
	rel, resources, err := m.renderAndBuild(ctx, cfg, namespace, name, ch, vals, digest)
	if err != nil {
		return rel, nil, err
	}
	if err := resources.Visit(markOwnership(name, namespace)); err != nil {
		return rel, nil, fmt.Errorf("install release %s/%s: %w", namespace, name, err)
	}

	created, exists, err := createAll(resources)
	if exists {
		return nil, created, errNotFresh
	}
	if err != nil {
		// As Helm does: a failed install is recorded with its manifest,
		// so that the next operation (an upgrade) takes over the objects
		// that were created and uninstall removes them.
		rel.SetStatus(helmrelease.StatusFailed, fmt.Sprintf("Release %q failed: %s", name, err))
		if rerr := cfg.Releases.Create(rel); errors.Is(rerr, driver.ErrReleaseExists) {
			return nil, created, errNotFresh
		} else if rerr != nil {
			m.opts.Log.Error(rerr, "record the failed install", "release", name, "namespace", namespace)
		}
		return rel, created, classify(name, fmt.Errorf("install release %s/%s: %w", namespace, name, err))
	}

	rel.SetStatus(helmrelease.StatusDeployed, "Install complete")
	if err := cfg.Releases.Create(rel); errors.Is(err, driver.ErrReleaseExists) {
		return nil, created, errNotFresh
	} else if err != nil {
		return rel, created, fmt.Errorf("install release %s/%s: record the release: %w", namespace, name, err)
	}
	return rel, created, nil
}

// renderAndBuild makes revision 1 of the release and the objects of its
// manifest, parsing the manifest once where it can (renderParsedOnce),
// and with Helm's install and Build where that cannot.
func (m *Manager) renderAndBuild(ctx context.Context, cfg *action.Configuration, namespace, name string, ch *chart.Chart, vals map[string]any, digest string) (*helmrelease.Release, kube.ResourceList, error) {
	rel, resources, ok, err := m.renderParsedOnce(cfg, namespace, name, ch, vals, digest)
	if !ok {
		rel, err = m.render(ctx, namespace, name, ch, vals, digest)
	}
	if err != nil {
		return rel, nil, fmt.Errorf("install release %s/%s: %w", namespace, name, err)
	}
	if ok {
		return rel, resources, nil
	}
	resources, err = cfg.KubeClient.Build(bytes.NewBufferString(rel.Manifest), false)
	if err != nil {
		return rel, nil, fmt.Errorf("install release %s/%s: build objects: %w", namespace, name, err)
	}
	return rel, resources, nil
}

// render makes revision 1 of the release without touching the cluster:
// Helm's install in client-only mode, given the capabilities the real one
// would read, renders exactly what the real one would create.
func (m *Manager) render(ctx context.Context, namespace, name string, ch *chart.Chart, vals map[string]any, digest string) (*helmrelease.Release, error) {
	caps, err := m.capabilities()
	if err != nil {
		return nil, err
	}
	checked, err := checkValues(ch, vals)
	if err != nil {
		return nil, err
	}
	// Client-only mode replaces the configuration's client and storage
	// with stand-ins, so it gets one of its own.
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.ClientOnly = true
	install.DryRun = true
	install.ReleaseName = name
	install.Namespace = namespace
	install.KubeVersion = &caps.KubeVersion
	install.APIVersions = caps.APIVersions
	install.DisableOpenAPIValidation = true
	install.Labels = map[string]string{LabelValuesDigest: digest}
	install.SkipSchemaValidation = checked
	return install.RunWithContext(ctx, ch, vals)
}

// markOwnership puts on an object the marks Helm's install puts on it.
func markOwnership(name, namespace string) resource.VisitorFunc {
	return func(info *resource.Info, err error) error {
		if err != nil {
			return err
		}
		obj, err := meta.Accessor(info.Object)
		if err != nil {
			return err
		}
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[helmManagedByLabel] = "Helm"
		obj.SetLabels(labels)
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[helmReleaseName] = name
		annotations[helmReleaseNamespaceKey] = namespace
		obj.SetAnnotations(annotations)
		return nil
	}
}

// createAll creates every object at once: the chart has no namespace, CRD
// or hook that another object must wait for. It returns those it created,
// whether any of them existed already, and the other errors, joined.
func createAll(resources kube.ResourceList) (kube.ResourceList, bool, error) {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created kube.ResourceList
		exists  bool
		errs    []error
	)
	for _, info := range resources {
		wg.Go(func() {
			// Retried on a conflict, as Helm's own create is.
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return create(info) })
			mu.Lock()
			defer mu.Unlock()
			switch {
			case apierrors.IsAlreadyExists(err):
				exists = true
			case err != nil:
				errs = append(errs, fmt.Errorf("create %s %q: %w", info.Mapping.GroupVersionKind.Kind, info.Name, err))
			default:
				created = append(created, info)
			}
		})
	}
	wg.Wait()
	return created, exists, errors.Join(errs...)
}

// create creates info's object as Helm's create does, but reads the
// apiserver's answer (the object as created) without decoding it: nothing
// of it is used, and decoding it was a twentieth of what an install
// allocated.
func create(info *resource.Info) error {
	h := resource.NewHelper(info.Client, info.Mapping)
	body, err := info.Client.Post().
		NamespaceIfScoped(info.Namespace, h.NamespaceScoped).
		Resource(h.Resource).
		VersionedParams(&metav1.CreateOptions{FieldManager: FieldManager}, metav1.ParameterCodec).
		Body(info.Object).
		Stream(context.Background())
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	_, err = io.Copy(io.Discard, body)
	return err
}

// deleteCreated deletes objects this operator has just created.
func deleteCreated(created kube.ResourceList) error {
	background := metav1.DeletePropagationBackground
	var errs []error
	for _, info := range created {
		_, err := resource.NewHelper(info.Client, info.Mapping).
			DeleteWithOptions(info.Namespace, info.Name, &metav1.DeleteOptions{PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s %q: %w", info.Mapping.GroupVersionKind.Kind, info.Name, err))
		}
	}
	return errors.Join(errs...)
}
