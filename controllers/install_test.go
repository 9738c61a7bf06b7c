package controllers_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// releaseKinds are the resources of a default ModelServer's release, and
// the Secrets its record is kept in.
var releaseKinds = []string{"configmaps", "services", "persistentvolumeclaims", "jobs", "deployments", "secrets"}

// inNamespace splits a request the counter logged ("METHOD path?query")
// into its method and the resource and name after namespaces/ns/ (name
// is empty for a list, and holds "/" for a subresource); ok is false for
// a request outside ns.
func inNamespace(req, ns string) (method, resource, name string, ok bool) {
	method, uri, _ := strings.Cut(req, " ")
	u, err := url.Parse(uri)
	if err != nil {
		return "", "", "", false
	}
	prefix := "/namespaces/" + ns + "/"
	i := strings.Index(u.Path, prefix)
	if i < 0 {
		return "", "", "", false
	}
	resource, name, _ = strings.Cut(u.Path[i+len(prefix):], "/")
	return method, resource, name, true
}

// A new ModelServer is installed without Helm's look-before-you-create:
// no read of the release's history and no GET of each object before it is
// created. Each object is created once, and the release record once; the
// fetch's summary is read from the cache.
func TestANewModelServerIsInstalledWithoutReadingFirst(t *testing.T) {
	ns := newNamespace(t)
	_, from := env.requests.requestsSince(0)
	ms := newModelServer(ns, "fresh")
	if err := env.client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ms)
	all, _ := env.requests.requestsSince(from)

	posts, podLists := map[string]int{}, 0
	recorded := false
	for _, req := range all {
		method, resource, _, ok := inNamespace(req, ns)
		if !ok {
			continue
		}
		if resource == "pods" {
			podLists++
		}
		if !slices.Contains(releaseKinds, resource) {
			continue
		}
		switch method {
		case "POST":
			posts[resource]++
			if resource == "secrets" {
				recorded = true
			}
		case "GET":
			if !recorded {
				t.Errorf("%s before the release was recorded: an install that reads first", req)
			}
		}
	}
	for _, resource := range releaseKinds {
		if posts[resource] != 1 {
			t.Errorf("%d creates of %s, want 1 (all creates: %v)", posts[resource], resource, posts)
		}
	}
	// The fetch pod's termination message comes from the cache of fetch
	// pods, not from a list of the namespace's pods.
	if podLists > 0 {
		t.Errorf("%d reads of the namespace's pods, want 0", podLists)
	}
	if rev := latestRevision(t, ns, "fresh"); rev != 1 {
		t.Errorf("release at revision %d, want 1", rev)
	}
}

// A crash after an install created the objects but before it recorded
// the release leaves objects with nobody's record. The next install takes
// them over, as Helm takes over objects marked with its release's name,
// instead of failing on them or making them anew.
func TestAnInstallCutShortBeforeItsRecordIsTakenOver(t *testing.T) {
	ctx := context.Background()
	ms := createUnmanaged(t, "cut-short")
	ns := ms.Namespace
	first := newProcessReconciler(t, nil)
	reconcileUntilReady(t, first, ms)
	deployUID := get(t, ns, names.Deployment("cut-short"), &appsv1.Deployment{}).UID

	// What the crash leaves: the objects, no record, no status.
	for _, s := range releaseSecrets(t, ns, "cut-short") {
		if err := env.client.Delete(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	got := get(t, ns, "cut-short", &servingv1alpha1.ModelServer{})
	got.Status = servingv1alpha1.ModelServerStatus{}
	if err := env.client.Status().Update(ctx, got); err != nil {
		t.Fatal(err)
	}

	after := reconcileUntilReady(t, newProcessReconciler(t, nil), ms)
	cfg := helmConfig(t, ns)
	last, err := cfg.Releases.Last("cut-short")
	if err != nil {
		t.Fatal(err)
	}
	if last.Version != 1 || last.Info.Status != helmrelease.StatusDeployed || after.Status.Release.Revision != 1 {
		t.Errorf("release revision %d %s, status shows %d; want revision 1 deployed", last.Version, last.Info.Status, after.Status.Release.Revision)
	}
	if uid := get(t, ns, names.Deployment("cut-short"), &appsv1.Deployment{}).UID; uid != deployUID {
		t.Errorf("the Deployment was made anew (uid %s → %s), not taken over", deployUID, uid)
	}
}

// A new ModelServer whose ConfigMap name is taken by the user's own
// ConfigMap creates nothing that stays: the objects created before the
// clash was found are removed again, no release is recorded, and the
// user's ConfigMap is not touched.
func TestAConflictOnANewModelServerLeavesNothingBehind(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	users := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ConfigMap("taken")},
		Data:       map[string]string{"models.config": "mine"},
	}
	if err := env.client.Create(ctx, users); err != nil {
		t.Fatal(err)
	}
	ms := newModelServer(ns, "taken")
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitConflict(t, ms)

	assertGone(t, ns, names.Deployment("taken"), &appsv1.Deployment{})
	assertGone(t, ns, names.Service("taken"), &corev1.Service{})
	assertGone(t, ns, names.Claim("taken"), &corev1.PersistentVolumeClaim{})
	jobs := &batchv1.JobList{}
	if err := env.client.List(ctx, jobs, client.InNamespace(ns), client.MatchingLabels{values.LabelModelServer: "taken"}); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.DeletionTimestamp == nil {
			t.Errorf("Job %s was left behind by the conflicting install", j.Name)
		}
	}
	if n := len(releaseSecrets(t, ns, "taken")); n != 0 {
		t.Errorf("%d release records written, want none", n)
	}
	if cm := get(t, ns, users.Name, &corev1.ConfigMap{}); cm.ResourceVersion != users.ResourceVersion {
		t.Errorf("the user's ConfigMap changed: resourceVersion %s → %s", users.ResourceVersion, cm.ResourceVersion)
	}
}

// waitConflict waits until ms's Deployed condition says Conflict.
func waitConflict(t *testing.T, ms *servingv1alpha1.ModelServer) {
	t.Helper()
	waitDeployedReason(t, ms, servingv1alpha1.ReasonConflict)
}

// waitDeployedReason waits until ms's Deployed condition has reason, and
// returns the status's message then.
func waitDeployedReason(t *testing.T, ms *servingv1alpha1.ModelServer, reason string) string {
	t.Helper()
	var message string
	eventually(t, time.Minute, "Deployed reason "+reason, func(ctx context.Context) (bool, string) {
		got := &servingv1alpha1.ModelServer{}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(got.Status.Conditions, servingv1alpha1.ConditionDeployed)
		message = got.Status.Message
		return c != nil && c.Reason == reason, message
	})
	return message
}

// assertGone fails unless the object does not exist or is being deleted.
func assertGone(t *testing.T, ns, name string, obj client.Object) {
	t.Helper()
	err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	case obj.GetDeletionTimestamp() == nil:
		t.Errorf("%T %s was left behind by the conflicting install", obj, name)
	}
}

// An upgrade reads none of the release's objects, and writes only those
// its render changed: Helm's kube client GETs each object two or three
// times, and patches those whose live state differs from the render.
// Here a new image is one patch of the Deployment, and the records'
// two writes.
func TestAnUpgradeReadsNoObjectAndWritesOnlyWhatChanged(t *testing.T) {
	ns := newNamespace(t)
	ms := readyModelServer(t, ns, "reads")
	_, from := env.requests.requestsSince(0)
	changeImage(t, ms, "tensorflow/serving:2.18.0")
	all, _ := env.requests.requestsSince(from)

	var reads, writes []string
	for _, req := range all {
		method, resource, name, ok := inNamespace(req, ns)
		if !ok || !slices.Contains(releaseKinds, resource) || strings.Contains(name, "/") {
			continue
		}
		switch {
		case method == "GET" && name != "":
			reads = append(reads, resource+"/"+name)
		case method != "GET":
			writes = append(writes, method+" "+resource)
		}
	}
	if len(reads) > 0 {
		t.Errorf("the upgrade read %v; want none of the release's objects", reads)
	}
	slices.Sort(writes)
	if want := []string{"PATCH deployments", "POST secrets", "PUT secrets"}; !slices.Equal(writes, want) {
		t.Errorf("the upgrade wrote %v; want %v (the Deployment, the new record, the previous one superseded)", writes, want)
	}
}

// An upgrade that adds an object whose name someone else's object holds
// goes the careful way, Helm's, which refuses to take it over: the
// ModelServer says Conflict, the other object is not touched, and the
// release keeps its revision.
func TestAnUpgradeThatMeetsSomeoneElsesObjectIsRefused(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := readyModelServer(t, ns, "clash")
	revision := ms.Status.Release.Revision
	users := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.Deployment("clash")},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "elsewhere"},
			MaxReplicas:    3,
		},
	}
	if err := env.client.Create(ctx, users); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Replicas = nil
	ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MaxReplicas: 4, TargetCPUUtilizationPercentage: ptr.To[int32](70)}
	if err := env.client.Patch(ctx, ms, patch); err != nil {
		t.Fatal(err)
	}
	waitConflict(t, ms)
	// Its status is kube-controller-manager's to write; its spec and
	// marks are not the operator's.
	hpa := get(t, ns, users.Name, &autoscalingv2.HorizontalPodAutoscaler{})
	if hpa.Spec.ScaleTargetRef.Name != "elsewhere" || hpa.Spec.MaxReplicas != 3 || len(hpa.Annotations) > 0 || len(hpa.Labels) > 0 {
		t.Errorf("the other HorizontalPodAutoscaler changed: spec %+v, labels %v, annotations %v", hpa.Spec, hpa.Labels, hpa.Annotations)
	}
	latest, status := 0, ""
	for _, s := range releaseSecrets(t, ns, "clash") {
		if v, _ := strconv.Atoi(s.Labels["version"]); v > latest {
			latest, status = v, s.Labels["status"]
		}
	}
	if latest != revision || status != "deployed" {
		t.Errorf("latest record: revision %d, %s; want revision %d still deployed", latest, status, revision)
	}
}

// TestAModelChangeWritesOnlyWhatItMust holds a model change to its writes:
// two Helm revisions (fetch beside the model served, then switch), each a
// new record and the previous one superseded; the new Job created, the
// model config and the Deployment patched, the old Job deleted; the status
// at the change and at Ready; an Event for each. From the second change
// on, the records beyond the three kept are deleted too.
func TestAModelChangeWritesOnlyWhatItMust(t *testing.T) {
	ns := newNamespace(t)
	ms := readyModelServer(t, ns, "budget")
	// The install's Ready Event is sent after the status that says Ready:
	// the first change's writes are counted from once it is in.
	eventually(t, 10*time.Second, "the install's Ready Event", func(ctx context.Context) (bool, string) {
		list := &corev1.EventList{}
		if err := env.client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
			return e.InvolvedObject.Kind == "ModelServer" && e.Reason == string(servingv1alpha1.PhaseReady)
		}), eventsIn(t, ns)
	})
	first := []string{
		"DELETE jobs", "PATCH configmaps", "PATCH deployments", "PATCH modelservers/status", "PATCH modelservers/status",
		"POST events", "POST events", "POST jobs", "POST secrets", "POST secrets", "PUT secrets", "PUT secrets",
	}
	for i, want := range [][]string{first, append([]string{"DELETE secrets", "DELETE secrets"}, first...)} {
		_, from := env.requests.requestsSince(0)
		if err := changeModel(ms, fmt.Sprintf("s3://models/budget-v%d", i+2)); err != nil {
			t.Fatal(err)
		}
		ms = waitReady(t, ms)
		// The Ready Event is sent after the status that says Ready.
		var writes []string
		eventually(t, 10*time.Second, "the Ready Event", func(context.Context) (bool, string) {
			all, _ := env.requests.requestsSince(from)
			writes = writes[:0]
			for _, req := range all {
				method, resource, name, ok := inNamespace(req, ns)
				if !ok || method == "GET" {
					continue
				}
				if _, sub, found := strings.Cut(name, "/"); found {
					resource += "/" + sub
				}
				writes = append(writes, method+" "+resource)
			}
			return slices.Contains(writes, "POST events") && len(writes) >= len(want), strings.Join(writes, ", ")
		})
		slices.Sort(writes)
		slices.Sort(want)
		if !slices.Equal(writes, want) {
			t.Errorf("model change %d wrote %d times:\n  %s\nwant %d:\n  %s\nthe namespace's Events:\n  %s", i+1, len(writes), strings.Join(writes, "\n  "),
				len(want), strings.Join(want, "\n  "), eventsIn(t, ns))
		}
	}
}

// eventsIn lists the Events of namespace ns, one a line, for a failure's
// message: which of them was one too many.
func eventsIn(t *testing.T, ns string) string {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, fmt.Sprintf("%s %s %s/%s ×%d (%s): %s", status.EventTime(&e).Format(time.TimeOnly), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name,
			e.Count, e.Reason, e.Message))
	}
	return strings.Join(out, "\n  ")
}

// TestAModelVolumeItsClassCannotGrowIsRefusedInTheApiserversWords: the
// test bed's class does not allow volume expansion, so the apiserver
// refuses the claim's larger size, as it refuses a smaller one. The
// ModelServer says so, naming the claim, its pods keep serving, and set
// back to its size it is deployed again.
func TestAModelVolumeItsClassCannotGrowIsRefusedInTheApiserversWords(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := readyModelServer(t, ns, "grow")
	pods := podNames(t, ns, "grow")
	resize := func(size string) {
		t.Helper()
		patch := client.MergeFrom(ms.DeepCopy())
		q := resource.MustParse(size)
		ms.Spec.Storage.Size = &q
		if err := env.client.Patch(ctx, ms, patch); err != nil {
			t.Fatal(err)
		}
	}
	resize("20Gi")
	message := waitDeployedReason(t, ms, servingv1alpha1.ReasonReleaseFailed)
	if !strings.Contains(message, "grow-model") || !strings.Contains(message, "resize") {
		t.Errorf("status.message %q, want the claim named and the apiserver's reason", message)
	}
	t.Logf("status.message: %s", message)
	if p := podNames(t, ns, "grow"); p != pods {
		t.Errorf("serving pods changed while the claim refused its size: %s → %s", pods, p)
	}
	if got := get(t, ns, "grow-model", &corev1.PersistentVolumeClaim{}).Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "10Gi" {
		t.Errorf("claim's request %s, want 10Gi still", got.String())
	}

	resize("10Gi")
	waitReady(t, ms)

	// A claim cannot shrink either; the apiserver says so, and the size
	// set back is deployed again.
	resize("5Gi")
	message = waitDeployedReason(t, ms, servingv1alpha1.ReasonReleaseFailed)
	if !strings.Contains(message, "grow-model") || !strings.Contains(message, "less than") {
		t.Errorf("status.message %q, want the claim named and the apiserver's reason", message)
	}
	t.Logf("status.message: %s", message)
	resize("10Gi")
	waitReady(t, ms)
}
