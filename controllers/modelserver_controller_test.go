package controllers_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/controllers"
	helmcharts "github.com/modelserver-dev/modelserver-operator/helm-charts"
)

func TestCreatingAModelServerInstallsAReleaseThatBecomesReady(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "resnet")
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	got := waitReady(t, ms)

	if got.Status.Release == nil || got.Status.Release.Name != "resnet" {
		t.Fatalf("status.release = %+v", got.Status.Release)
	}
	if got.Status.Ready != "2/2" || got.Status.ReadyReplicas != 2 {
		t.Errorf("ready %q, readyReplicas %d", got.Status.Ready, got.Status.ReadyReplicas)
	}
	if want := "http://resnet." + ns + ".svc:8501/v1/models/resnet"; got.Status.Endpoints == nil || got.Status.Endpoints.REST != want {
		t.Errorf("endpoints %+v, want rest %s", got.Status.Endpoints, want)
	}
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}, &corev1.PersistentVolumeClaim{}} {
		name := map[string]string{"*v1.ConfigMap": "resnet-config", "*v1.PersistentVolumeClaim": "resnet-model"}[fmt.Sprintf("%T", obj)]
		if name == "" {
			name = "resnet"
		}
		o := get(t, ns, name, obj)
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != got.UID || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%T %s owner references %+v, want the ModelServer as controller", obj, name, refs)
		}
	}
	if n := len(releaseSecrets(t, ns, "resnet")); n != 1 {
		t.Errorf("%d release records in the ModelServer's namespace, want 1", n)
	}
	// One Helm action: the serving pods start with the first fetch and
	// wait for its data, so the fetch ending costs no upgrade.
	if rev := latestRevision(t, ns, "resnet"); rev != 1 || got.Status.Release.Revision != 1 {
		t.Errorf("release at revision %d, status shows %d; want 1: a new ModelServer is installed once", rev, got.Status.Release.Revision)
	}
	d := get(t, ns, "resnet", &appsv1.Deployment{})
	if ic := d.Spec.Template.Spec.InitContainers; len(ic) != 1 || ic[0].Name != "wait-for-model" {
		t.Errorf("serving pods' init containers %+v, want wait-for-model", ic)
	}
}

// readyModelServer creates a default ModelServer and returns it Ready.
func readyModelServer(t *testing.T, ns, name string) *servingv1alpha1.ModelServer {
	t.Helper()
	ms := newModelServer(ns, name)
	if err := env.client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	return waitReady(t, ms)
}

// changeImage sets a Ready ModelServer's image, and returns it Ready
// again, failing unless that took one upgrade.
func changeImage(t *testing.T, ms *servingv1alpha1.ModelServer, image string) *servingv1alpha1.ModelServer {
	t.Helper()
	before := ms.Status.Release.Revision
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Image = image
	if err := env.client.Patch(context.Background(), ms, patch); err != nil {
		t.Fatal(err)
	}
	after := waitReady(t, ms)
	if after.Status.Release.Revision != before+1 {
		t.Errorf("revision %d after an image change, want %d", after.Status.Release.Revision, before+1)
	}
	return after
}

// changeModel sets a ModelServer's model URI, without waiting.
func changeModel(ms *servingv1alpha1.ModelServer, uri string) error {
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Model.StorageURI = uri
	return env.client.Patch(context.Background(), ms, patch)
}

func TestChangingTheSpecUpgradesAndAnIdleModelServerCostsNoWrites(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := readyModelServer(t, ns, "upgrade")
	after := changeImage(t, ms, "tensorflow/serving:2.18.0")
	d := get(t, ns, "upgrade", &appsv1.Deployment{})
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "tensorflow/serving:2.18.0" {
		t.Errorf("deployment image %s", img)
	}
	if n := len(releaseSecrets(t, ns, "upgrade")); n > 3 {
		t.Errorf("%d release records kept, want at most 3", n)
	}

	// Three reconciles with nothing to do: no Helm operation, no object
	// written, not even the status.
	countsBefore, writesBefore := env.requests.snapshot()
	for range 3 {
		if _, err := env.reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)}); err != nil {
			t.Fatal(err)
		}
	}
	countsAfter, writesAfter := env.requests.snapshot()
	if extra := writesAfter[len(writesBefore):]; len(extra) > 0 {
		t.Errorf("idle reconciles wrote %d times: %v", len(extra), extra)
	}
	t.Logf("3 idle reconciles: %d GET requests (the cache serves the rest)", countsAfter["GET"]-countsBefore["GET"])
	if rev := get(t, ns, "upgrade", &servingv1alpha1.ModelServer{}).Status.Release.Revision; rev != after.Status.Release.Revision {
		t.Errorf("revision moved from %d to %d on idle reconciles", after.Status.Release.Revision, rev)
	}
}

// TestAnImageOfUnknownArchitecturesFreesTheServingPodsButNotTheFetchJob:
// the official image keeps the serving pods and the fetch pod on amd64
// nodes. Another image frees the serving pods at once; the fetch Job,
// whose pod template cannot change, is kept and rendered as it was made,
// so the upgrade neither fails on it nor fetches the model again.
func TestAnImageOfUnknownArchitecturesFreesTheServingPodsButNotTheFetchJob(t *testing.T) {
	ns := newNamespace(t)
	ms := readyModelServer(t, ns, "arch")
	amd64 := map[string]string{corev1.LabelArchStable: "amd64"}
	if got := get(t, ns, "arch", &appsv1.Deployment{}).Spec.Template.Spec.NodeSelector; !maps.Equal(got, amd64) {
		t.Errorf("serving pods of the official image: nodeSelector %v, want %v", got, amd64)
	}
	job := get(t, ns, fetchJob(t, ms), &batchv1.Job{})
	if got := job.Spec.Template.Spec.NodeSelector; !maps.Equal(got, amd64) {
		t.Errorf("fetch pod for the official image: nodeSelector %v, want %v", got, amd64)
	}

	changeImage(t, ms, "registry.example.com/ml/tf-serving:2.19.1")
	if got := get(t, ns, "arch", &appsv1.Deployment{}).Spec.Template.Spec.NodeSelector; len(got) != 0 {
		t.Errorf("serving pods of an image of unknown architectures: nodeSelector %v, want none", got)
	}
	kept := get(t, ns, job.Name, &batchv1.Job{})
	if kept.UID != job.UID || !maps.Equal(kept.Spec.Template.Spec.NodeSelector, amd64) {
		t.Errorf("fetch Job %s (uid %s, nodeSelector %v) after the image change, want the Job made before (uid %s, %v)",
			kept.Name, kept.UID, kept.Spec.Template.Spec.NodeSelector, job.UID, amd64)
	}
}

func TestADeletedServiceIsRecreated(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "svc")
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ms)
	old := get(t, ns, "svc", &corev1.Service{})
	if err := env.client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "Service recreated", func(ctx context.Context) (bool, string) {
		s := &corev1.Service{}
		err := env.client.Get(ctx, client.ObjectKeyFromObject(old), s)
		if err != nil {
			return false, err.Error()
		}
		return s.UID != old.UID, "still the old Service"
	})
	waitReady(t, ms)
}

func TestDeletingAModelServerRemovesItsReleaseAndObjects(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "gone")
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	ready := waitReady(t, ms)
	// Nothing holds it: the garbage collector removes what it owns, the
	// release records as well as the objects.
	if len(ready.Finalizers) > 0 {
		t.Errorf("finalizers %v on a new ModelServer, want none", ready.Finalizers)
	}
	records := releaseSecrets(t, ns, "gone")
	if len(records) == 0 {
		t.Fatal("no release record")
	}
	for _, s := range records {
		if !ownedBy(s.OwnerReferences, ready.UID) {
			t.Errorf("release record %s is not owned by the ModelServer: %v", s.Name, s.OwnerReferences)
		}
	}
	if err := env.client.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitAllGone(t, ns, "gone")
}

// An earlier version held each ModelServer with a finalizer until it had
// uninstalled the release, whose records it did not own; a ModelServer
// that still carries it is uninstalled, then let go.
func TestAModelServerWithTheEarlierFinalizerIsUninstalledThenLetGo(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "legacy", func(ms *servingv1alpha1.ModelServer) {
		ms.Finalizers = []string{controllers.Finalizer}
	})
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ms)
	// Its records as the earlier version wrote them: owned by nobody.
	for _, s := range releaseSecrets(t, ns, "legacy") {
		s.OwnerReferences = nil
		if err := env.client.Update(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.client.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitAllGone(t, ns, "legacy")
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// waitAllGone waits for the ModelServer, its release records and the
// objects of its release to be gone.
func waitAllGone(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, 30*time.Second, "ModelServer gone", func(ctx context.Context) (bool, string) {
		err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &servingv1alpha1.ModelServer{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	eventually(t, 60*time.Second, "release records and objects gone", func(ctx context.Context) (bool, string) {
		if n := len(releaseSecrets(t, ns, name)); n != 0 {
			return false, fmt.Sprintf("%d release records left", n)
		}
		for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &batchv1.JobList{}, &corev1.ServiceList{}, &corev1.PersistentVolumeClaimList{}, &corev1.ConfigMapList{}} {
			if err := env.client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": name}); err != nil {
				return false, err.Error()
			}
			if items, _ := meta.ExtractList(list); len(items) > 0 {
				return false, fmt.Sprintf("%d %T left", len(items), list)
			}
		}
		return true, ""
	})
}

func TestAReleaseLeftPendingByACrashIsRecovered(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "pending")
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	before := waitReady(t, ms).Status.Release.Revision

	// What a crash in the middle of `helm upgrade` leaves behind: the
	// latest record says pending-upgrade, and Helm refuses any operation.
	cfg := helmConfig(t, ns)
	last, err := cfg.Releases.Last("pending")
	if err != nil {
		t.Fatal(err)
	}
	last.SetStatus(helmrelease.StatusPendingUpgrade, "interrupted")
	if err := cfg.Releases.Update(last); err != nil {
		t.Fatal(err)
	}

	// A new operator process reads the record once and recovers it.
	fresh := &controllers.ModelServerReconciler{
		Client: env.reconciler.Client, APIReader: env.reconciler.APIReader, Recorder: env.reconciler.Recorder,
		Releases: env.reconciler.Releases, Chart: env.reconciler.Chart, FetchImage: env.reconciler.FetchImage,
	}
	if _, err := fresh.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)}); err != nil {
		t.Fatal(err)
	}
	latest, err := cfg.Releases.Last("pending")
	if err != nil {
		t.Fatal(err)
	}
	if latest.Info.Status != helmrelease.StatusDeployed || latest.Version != before+1 {
		t.Errorf("after recovery: revision %d %s, want revision %d deployed", latest.Version, latest.Info.Status, before+1)
	}
	got := waitReady(t, ms)
	if got.Status.Release.Revision != latest.Version {
		t.Errorf("status shows revision %d, release is at %d", got.Status.Release.Revision, latest.Version)
	}
}

func TestBadSpecsAreRejectedAtAdmission(t *testing.T) {
	ns := newNamespace(t)
	for _, tc := range []struct {
		name   string
		ms     *servingv1alpha1.ModelServer
		field  string
		phrase string
	}{
		{"bad URI scheme", newModelServer(ns, "scheme", func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "ftp://models/x" }),
			"spec.model.storageUri", "must start with s3://"},
		{"copies of each pod's own of a claim's model", newModelServer(ns, "perpodpvc", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "pvc://models/resnet"
			ms.Spec.Storage.Mode = servingv1alpha1.StoragePerPod
		}), "spec", "spec.storage.mode PerPod does not apply to a pvc:// model"},
		{"copies of each pod's own, shared by pods of several nodes", newModelServer(ns, "perpodrwx", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Storage.Mode = servingv1alpha1.StoragePerPod
			ms.Spec.Storage.AccessMode = corev1.ReadWriteMany
		}), "spec.storage", "spec.storage.accessMode does not apply to mode PerPod"},
		{"oci:// with user info", newModelServer(ns, "ociuser", func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "oci://user:pw@r.example/m:v1" }),
			"spec.model.storageUri", "an oci:// URI names an image"},
		{"oci:// with a fragment", newModelServer(ns, "ocifrag", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "oci://r.example/m:v1#sha256=" + strings.Repeat("0", 64)
		}), "spec.model.storageUri", "an oci:// URI names an image"},
		{"oci:// without a repository", newModelServer(ns, "ocirepo", func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "oci://r.example" }),
			"spec.model.storageUri", "oci://<registry>/<repository>"},
		{"a signature of an s3:// model", newModelServer(ns, "sigs3", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.Signature = &servingv1alpha1.ModelSignature{PublicKeys: []string{"-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----\n"}}
		}), "spec.model", "applies to oci:// models only"},
		{"a web identity for an https:// model", newModelServer(ns, "rolehttp", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "https://models.example.com/resnet.tar.gz"
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{RoleARN: "arn:aws:iam::123456789012:role/r"}
		}), "spec.model", "webIdentity applies to s3://, gs:// and Azure Blob Storage"},
		{"a role for an Azure model", newModelServer(ns, "roleazure", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "https://models.blob.core.windows.net/team/resnet/"
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{RoleARN: "arn:aws:iam::123456789012:role/r"}
		}), "spec.model", "names a Microsoft Entra application (clientId, tenantId), not an IAM role"},
		{"an Entra application for an s3:// model", newModelServer(ns, "clients3", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{ClientID: "00000000-1111-2222-3333-444444444444"}
		}), "spec.model", "not a provider, a service account or an Entra application"},
		{"a pod identity association with a role", newModelServer(ns, "podrole", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{EKSPodIdentity: true, RoleARN: "arn:aws:iam::123456789012:role/r"}
		}), "spec.model", "eksPodIdentity applies to s3:// models, and takes the role and the audience of the service account's association"},
		{"a client ID that is no GUID", newModelServer(ns, "clientbad", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "https://models.blob.core.windows.net/team/resnet"
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{ClientID: "model-reader"}
		}), "spec.model.webIdentity.clientId", "should match"},
		{"a Data Lake path without a container", newModelServer(ns, "abfsnocontainer", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "abfss://models.dfs.core.windows.net/team/resnet"
		}), "spec.model.storageUri", "an abfss:// or wasbs:// URI names a container at a storage account"},
		{"a role for a Data Lake model", newModelServer(ns, "roleabfs", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "abfss://team@models.dfs.core.windows.net/resnet"
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{RoleARN: "arn:aws:iam::123456789012:role/r"}
		}), "spec.model", "names a Microsoft Entra application (clientId, tenantId), not an IAM role"},
		{"a directory at a host not Azure's", newModelServer(ns, "httpdir", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "https://models.blob.core.windows.net.example/team/resnet/"
		}), "spec.model.storageUri", "must name a file or an archive"},
		{"a role for a gs:// model", newModelServer(ns, "rolegs", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "gs://models/resnet"
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{RoleARN: "arn:aws:iam::123456789012:role/r"}
		}), "spec.model", "names its Workload Identity Federation provider, or gkeWorkloadIdentity: true, not an IAM role"},
		{"GKE's metadata server for an s3:// model", newModelServer(ns, "gkes3", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{GKEWorkloadIdentity: true}
		}), "spec.model", "gkeWorkloadIdentity applies to gs:// models"},
		{"GKE's metadata server for a model in Docker Hub", newModelServer(ns, "gkehub", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "oci://docker.io/ml/resnet:v1"
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{GKEWorkloadIdentity: true}
		}), "spec.model", "oci:// models in Artifact Registry (oci://<location>-docker.pkg.dev/...) or Container Registry"},
		{"a role for an oci:// model", newModelServer(ns, "roleoci", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "oci://us-docker.pkg.dev/ml/models/resnet:v1"
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{RoleARN: "arn:aws:iam::123456789012:role/r"}
		}), "spec.model", "with gkeWorkloadIdentity to oci:// models in Artifact Registry"},
		{"GKE's metadata server and a provider", newModelServer(ns, "gkeprovider", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "gs://models/resnet"
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{GKEWorkloadIdentity: true, Provider: "projects/1/locations/global/workloadIdentityPools/p/providers/q"}
		}), "spec.model", "name no provider, service account or audience"},
		{"GKE's metadata server and a Google service account", newModelServer(ns, "gkegsa", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "gs://models/resnet"
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{GKEWorkloadIdentity: true, ServiceAccount: "reader@ml.iam.gserviceaccount.com"}
		}), "spec.model", "or the Google service account it is annotated with"},
		{"a provider for an s3:// model", newModelServer(ns, "providers3", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{Provider: "projects/1/locations/global/workloadIdentityPools/p/providers/q"}
		}), "spec.model", "names an IAM role (roleArn), not a provider"},
		{"a provider that is not one", newModelServer(ns, "providerbad", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "gs://models/resnet"
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{Provider: "ml-cluster"}
		}), "spec.model.webIdentity.provider", "should match"},
		{"a user's ARN as the role", newModelServer(ns, "roleuser", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{RoleARN: "arn:aws:iam::123456789012:user/ci"}
		}), "spec.model.webIdentity.roleArn", "should match"},
		{"a signature key that is no PEM public key", newModelServer(ns, "sigkey", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = "oci://r.example/m:v1"
			ms.Spec.Model.Signature = &servingv1alpha1.ModelSignature{PublicKeys: []string{"cosign.pub"}}
		}), "spec.model.signature.publicKeys[0]", "each key is a PEM public key"},
		{"shell metacharacters in URI", newModelServer(ns, "inject", func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.StorageURI = "s3://m/x;rm -rf /" }),
			"spec.model.storageUri", "should match"},
		{"negative replicas", newModelServer(ns, "negative", func(ms *servingv1alpha1.ModelServer) { ms.Spec.Replicas = ptrTo[int32](-1) }),
			"spec.replicas", "greater than or equal to 0"},
		{"name of 60 characters", newModelServer(ns, strings.Repeat("a", 60)),
			"metadata.name", "at most 53 characters"},
		{"port out of range", newModelServer(ns, "port", func(ms *servingv1alpha1.ModelServer) { ms.Spec.Ports.GRPC = 70000 }),
			"spec.ports.grpc", "less than or equal to 65535"},
		{"grpc == rest", newModelServer(ns, "same", func(ms *servingv1alpha1.ModelServer) { ms.Spec.Ports = servingv1alpha1.Ports{GRPC: 9000, REST: 9000} }),
			"spec", "spec.ports.grpc and spec.ports.rest must differ"},
		{"two version policies", newModelServer(ns, "policy", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.VersionPolicy = &servingv1alpha1.VersionPolicy{All: &servingv1alpha1.AllVersions{}, Latest: &servingv1alpha1.LatestVersions{NumVersions: 1}}
		}), "spec.model.versionPolicy", "exactly one of latest, specific or all"},
		{"model name with a quote", newModelServer(ns, "quote", func(ms *servingv1alpha1.ModelServer) { ms.Spec.Model.Name = `a"b` }),
			"spec.model.name", "should match"},
		{"upper-case name", newModelServer(ns, "Upper"), "metadata.name", "DNS-1035"},
		{"replicas and autoscaling", newModelServer(ns, "both", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MaxReplicas: 3, TargetCPUUtilizationPercentage: ptrTo[int32](50)}
		}), "spec", "mutually exclusive"},
		{"autoscaling without a target", newModelServer(ns, "notarget", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Replicas = nil
			ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MaxReplicas: 3}
		}), "spec.autoscaling", "targetCPUUtilizationPercentage"},
		{"model and models", newModelServer(ns, "twice", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Models = []servingv1alpha1.ModelSpec{{Name: "a", StorageURI: "s3://m/a"}}
		}), "spec", "exactly one of spec.model"},
		{"duplicate model names", newModelServer(ns, "dup", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model = nil
			ms.Spec.Models = []servingv1alpha1.ModelSpec{{Name: "a", StorageURI: "s3://m/a"}, {Name: "a", StorageURI: "s3://m/b"}}
		}), "spec.models", "must be unique"},
		{"pvc:// among several models", newModelServer(ns, "pvcs", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model = nil
			ms.Spec.Models = []servingv1alpha1.ModelSpec{{Name: "a", StorageURI: "pvc://claim/a"}}
		}), "spec.models", "spec.model only"},
		{"drain as long as the grace period", newModelServer(ns, "drain", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.DrainSeconds = ptrTo[int64](30)
		}), "spec.podTemplate", "drainSeconds must be less than"},
		{"no time to load a model", newModelServer(ns, "noload", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.PodTemplate.LoadTimeoutSeconds = ptrTo[int64](5)
		}), "spec.podTemplate.loadTimeoutSeconds", "greater than or equal to 10"},
		{"a flag's value as its own item", newModelServer(ns, "argvalue", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.ExtraArgs = []string{"--rest_api_num_threads", "16"}
		}), "spec.extraArgs[1]", "the server does not read --name and its value as two items"},
		{"a flag the operator sets", newModelServer(ns, "argport", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.ExtraArgs = []string{"--enable_model_warmup=false", "--rest_api_port=9000"}
		}), "spec.extraArgs[1]", "the operator sets this flag from the spec"},
		{"a flag that stops the server", newModelServer(ns, "argversion", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.ExtraArgs = []string{"--version"}
		}), "spec.extraArgs[0]", "it would never serve"},
		{"an SSL config of one's own", newModelServer(ns, "argssl", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.ExtraArgs = []string{"--ssl_config_file=/etc/ssl.config"}
		}), "spec.extraArgs[0]", "--ssl_config_file from spec.tls"},
		{"a TLS Secret that is no name", newModelServer(ns, "tlsname", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "Grpc_Cert"}
		}), "spec.tls.secretName", "should match"},
		{"client authentication of another kind", newModelServer(ns, "tlsauth", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "grpc-cert", ClientAuth: "Optional"}
		}), "spec.tls.clientAuth", `supported values: "None", "Require"`},
		{"a rollout that can neither add nor take away a pod", newModelServer(ns, "rollzero", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Rollout = &servingv1alpha1.Rollout{MaxSurge: ptr.To(intstr.FromInt32(0))}
		}), "spec.rollout", "maxSurge 0 needs a maxUnavailable above 0"},
		{"a rollout of zero percents", newModelServer(ns, "rollzeropct", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Rollout = &servingv1alpha1.Rollout{MaxSurge: ptr.To(intstr.FromString("0%")), MaxUnavailable: ptr.To(intstr.FromString("00%"))}
		}), "spec.rollout", "maxSurge 0 needs a maxUnavailable above 0"},
		{"a negative surge", newModelServer(ns, "rollneg", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Rollout = &servingv1alpha1.Rollout{MaxSurge: ptr.To(intstr.FromInt32(-1))}
		}), "spec.rollout.maxSurge", "a count of pods (0 or more) or a percentage"},
		{"a surge in words", newModelServer(ns, "rollwords", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Rollout = &servingv1alpha1.Rollout{MaxSurge: ptr.To(intstr.FromString("one"))}
		}), "spec.rollout.maxSurge", "a count of pods (0 or more) or a percentage"},
		{"more than every pod down", newModelServer(ns, "rollover", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Rollout = &servingv1alpha1.Rollout{MaxUnavailable: ptr.To(intstr.FromString("150%"))}
		}), "spec.rollout.maxUnavailable", "at most 100%"},
		{"a disruption budget that blocks every drain", newModelServer(ns, "pdbzero", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Disruption = &servingv1alpha1.Disruption{MaxUnavailable: ptr.To(intstr.FromInt32(0))}
		}), "spec.disruption.maxUnavailable", "0 would block every node drain"},
		{"a disruption budget of no percent", newModelServer(ns, "pdbzeropct", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Disruption = &servingv1alpha1.Disruption{MaxUnavailable: ptr.To(intstr.FromString("0%"))}
		}), "spec.disruption.maxUnavailable", "from 1% to 100%"},
		{"a disruption budget over every pod", newModelServer(ns, "pdbover", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Disruption = &servingv1alpha1.Disruption{MaxUnavailable: ptr.To(intstr.FromString("101%"))}
		}), "spec.disruption.maxUnavailable", "from 1% to 100%"},
		{"clients' CAs without asking clients for a certificate", newModelServer(ns, "tlsca", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "grpc-cert", ClientCA: &servingv1alpha1.TLSClientCA{ConfigMapName: "clients"}}
		}), "spec.tls", "spec.tls.clientCA is for clientAuth Require"},
		{"clients' CAs in a ConfigMap and a Secret", newModelServer(ns, "tlscaboth", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "grpc-cert", ClientAuth: servingv1alpha1.TLSClientAuthRequire,
				ClientCA: &servingv1alpha1.TLSClientCA{ConfigMapName: "clients", SecretName: "clients"}}
		}), "spec.tls.clientCA", "names one ConfigMap (configMapName) or one Secret (secretName)"},
		{"clients' CAs nowhere", newModelServer(ns, "tlscanone", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "grpc-cert", ClientAuth: servingv1alpha1.TLSClientAuthRequire,
				ClientCA: &servingv1alpha1.TLSClientCA{Key: "ca.pem"}}
		}), "spec.tls.clientCA", "names one ConfigMap (configMapName) or one Secret (secretName)"},
		{"clients' CAs at a key that is no key", newModelServer(ns, "tlscakey", func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.TLS = &servingv1alpha1.TLSSpec{SecretName: "grpc-cert", ClientAuth: servingv1alpha1.TLSClientAuthRequire,
				ClientCA: &servingv1alpha1.TLSClientCA{ConfigMapName: "clients", Key: "ca/pem"}}
		}), "spec.tls.clientCA.key", "should match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := env.client.Create(context.Background(), tc.ms)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create: %v, want Invalid", err)
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.phrase) {
				t.Errorf("error does not name %s with %q: %v", tc.field, tc.phrase, err)
			}
		})
	}
	// Azure's URIs, read with an Entra application's identity.
	for i, uri := range []string{
		"https://models.blob.core.windows.net/team/resnet/",
		"https://models.dfs.core.windows.net/team/resnet",
		"abfss://team@models.dfs.core.windows.net/resnet",
		"abfss://team@models.dfs.core.windows.net",
		"wasbs://team@models.blob.core.windows.net/resnet",
	} {
		ms := newModelServer(ns, fmt.Sprintf("azure-%d", i), func(ms *servingv1alpha1.ModelServer) {
			ms.Spec.Model.StorageURI = uri
			ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{ClientID: "00000000-1111-2222-3333-444444444444", TenantID: "00000000-1111-2222-3333-555555555555"}
		})
		if err := env.client.Create(context.Background(), ms, client.DryRunAll); err != nil {
			t.Errorf("%s: %v", uri, err)
		}
	}
	// A Hugging Face Hub repository, at a revision, refreshed; not read
	// with the pods' token.
	hub := newModelServer(ns, "hub", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model.StorageURI = "hf://keras-io/ocr-for-captcha@main/saved"
		ms.Spec.Model.RefreshInterval = &metav1.Duration{Duration: time.Hour}
	})
	if err := env.client.Create(context.Background(), hub, client.DryRunAll); err != nil {
		t.Errorf("hf://: %v", err)
	}
	hub.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{}
	if err := env.client.Create(context.Background(), hub, client.DryRunAll); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "webIdentity") {
		t.Errorf("hf:// with spec.model.webIdentity: %v; want it refused", err)
	}
}

// helmConfig opens the release records of a namespace the way the helm
// CLI would.
func helmConfig(t *testing.T, ns string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &env.cluster.Kubeconfig
	flags.Namespace = &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", t.Logf); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestAnOperatorUpgradeUpgradesEachReleaseOnlyWhenTheChartChanged(t *testing.T) {
	ns := ensureUnmanagedNamespace(t)
	ctx := context.Background()
	first := newProcessReconciler(t, nil)
	var servers []*servingv1alpha1.ModelServer
	revisions := map[string]int{}
	pods := map[string]string{}
	for _, name := range []string{"upg-a", "upg-b"} {
		ms := newModelServer(ns, name)
		if err := env.client.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		servers = append(servers, ms)
		revisions[name] = reconcileUntilReady(t, first, ms).Status.Release.Revision
		pods[name] = podNames(t, ns, name)
	}

	// A restarted operator with the same chart: it reads each release
	// once and leaves it alone.
	restarted := newProcessReconciler(t, nil)
	reconcileAll(t, restarted, servers, 2)
	for _, ms := range servers {
		if rev := latestRevision(t, ns, ms.Name); rev != revisions[ms.Name] {
			t.Errorf("%s: revision %d after a restart with the same chart, want %d", ms.Name, rev, revisions[ms.Name])
		}
		if p := podNames(t, ns, ms.Name); p != pods[ms.Name] {
			t.Errorf("%s: pods changed after a restart with the same chart: %s → %s", ms.Name, pods[ms.Name], p)
		}
	}

	// A new build whose chart's templates changed but whose version was
	// not raised: the change still reaches each release, exactly once.
	changedTemplate := func(ch *chart.Chart) {
		i := slices.IndexFunc(ch.Templates, func(f *chart.File) bool { return f.Name == "templates/service.yaml" })
		text := strings.Replace(string(ch.Templates[i].Data), "\nspec:\n", "\nspec:\n  sessionAffinity: ClientIP\n", 1)
		ch.Templates[i] = &chart.File{Name: ch.Templates[i].Name, Data: []byte(text)}
	}
	reconcileAll(t, newProcessReconciler(t, changedTemplate), servers, 3)
	for _, ms := range servers {
		if rev := latestRevision(t, ns, ms.Name); rev != revisions[ms.Name]+1 {
			t.Errorf("%s: revision %d after a template changed, want exactly %d", ms.Name, rev, revisions[ms.Name]+1)
		}
		var svc corev1.Service
		if err := env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ms.Name}, &svc); err != nil {
			t.Fatal(err)
		}
		if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
			t.Errorf("%s: the changed template did not reach the Service: sessionAffinity %q", ms.Name, svc.Spec.SessionAffinity)
		}
		if p := podNames(t, ns, ms.Name); p != pods[ms.Name] {
			t.Errorf("%s: a Service template change restarted the pods: %s → %s", ms.Name, pods[ms.Name], p)
		}
	}

	// Then a new chart version: each release is upgraded exactly once,
	// however often it is reconciled, and its pods stay.
	upgraded := newProcessReconciler(t, func(ch *chart.Chart) {
		changedTemplate(ch)
		ch.Metadata.Version = "0.1.0-next"
	})
	rec := &recordedEvents{}
	upgraded.Recorder = rec
	reconcileAll(t, upgraded, servers, 3)
	if n := rec.count("Upgraded"); n != len(servers) || rec.len() != n ||
		!strings.Contains(rec.all()[0].note, "because the operator's chart changed from version "+first.Chart.Metadata.Version+" to 0.1.0-next.") {
		t.Errorf("events of the operator upgrade:\n%s\nwant one Upgraded per ModelServer, saying the chart's versions", rec)
	}
	for _, ms := range servers {
		if rev := latestRevision(t, ns, ms.Name); rev != revisions[ms.Name]+2 {
			t.Errorf("%s: revision %d after the chart version changed, want exactly %d", ms.Name, rev, revisions[ms.Name]+2)
		}
		if p := podNames(t, ns, ms.Name); p != pods[ms.Name] {
			t.Errorf("%s: a new chart version restarted the pods: %s → %s", ms.Name, pods[ms.Name], p)
		}
	}
}

// newProcessReconciler is a reconciler as a freshly started operator
// process has it: nothing remembered, reading straight from the apiserver.
// A non-nil change makes the embedded chart that of another build. The
// test calls its Reconcile itself.
func newProcessReconciler(t *testing.T, change func(*chart.Chart)) *controllers.ModelServerReconciler {
	t.Helper()
	ch, err := helmcharts.ModelServer()
	if err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(ch)
	}
	r := env.reconciler
	return &controllers.ModelServerReconciler{
		Client: env.client, APIReader: env.client, Recorder: r.Recorder,
		Releases: r.Releases, Chart: ch, FetchImage: r.FetchImage, ProxyEnv: r.ProxyEnv, PodLogs: r.PodLogs,
	}
}

func reconcileAll(t *testing.T, r *controllers.ModelServerReconciler, servers []*servingv1alpha1.ModelServer, times int) {
	t.Helper()
	for range times {
		for _, ms := range servers {
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// reconcileUntilReady plays the controller's event loop for one
// ModelServer: reconcile, wait a little, again, until it is Ready.
func reconcileUntilReady(t *testing.T, r *controllers.ModelServerReconciler, ms *servingv1alpha1.ModelServer) *servingv1alpha1.ModelServer {
	t.Helper()
	got := &servingv1alpha1.ModelServer{}
	eventually(t, 60*time.Second, ms.Name+" Ready", func(ctx context.Context) (bool, string) {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)}); err != nil {
			return false, err.Error()
		}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return false, err.Error()
		}
		return got.Status.Phase == servingv1alpha1.PhaseReady, string(got.Status.Phase) + ": " + got.Status.Message
	})
	return got
}

func latestRevision(t *testing.T, ns, name string) int {
	t.Helper()
	rel, err := helmConfig(t, ns).Releases.Last(name)
	if err != nil {
		t.Fatal(err)
	}
	return rel.Version
}

// podNames lists the serving pods of a ModelServer, sorted, as one string.
func podNames(t *testing.T, ns, name string) string {
	t.Helper()
	list := &corev1.PodList{}
	if err := env.client.List(context.Background(), list, client.InNamespace(ns),
		client.MatchingLabels{"app.kubernetes.io/instance": name, "app.kubernetes.io/component": "serving"}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// TestARefetchThatFindsTheSameModelReplacesNoPod: spec.model.refetch
// fetches the model again; a fetch that reports the model served (the
// same digest) leaves the Deployment as it is, and no pod is replaced.
func TestARefetchThatFindsTheSameModelReplacesNoPod(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	const summary = "localcluster.modelserver.dev/termination-message"
	ms := newModelServer(ns, "refetch")
	ms.Spec.PodTemplate.Annotations = map[string]string{summary: `{"versions":[1],"files":4,"bytes":2048,"digest":"sha256:aa"}`}
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	ms = waitReady(t, ms)
	first, pods := ms.Status.Model.FetchedGeneration, podNames(t, ns, "refetch")
	before := get(t, ns, "refetch", &appsv1.Deployment{})

	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Model.Refetch = "run-2"
	if err := env.client.Patch(ctx, ms, patch); err != nil {
		t.Fatal(err)
	}
	ms = waitReady(t, ms)
	if m := ms.Status.Model; m.FetchedGeneration == first || m.ServedGeneration != first {
		t.Errorf("after the refetch: fetched %q, served from %q; want a new generation fetched, and %q served", m.FetchedGeneration, m.ServedGeneration, first)
	}
	if d := get(t, ns, "refetch", &appsv1.Deployment{}); d.Generation != before.Generation {
		t.Errorf("the Deployment went from generation %d to %d for a model that did not change", before.Generation, d.Generation)
	}
	if now := podNames(t, ns, "refetch"); now != pods {
		t.Errorf("serving pods %s became %s", pods, now)
	}
}
