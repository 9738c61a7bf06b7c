package controllers_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// fetchModelArg is the value of flag in the serving pods' fetch-model
// container of Deployment d, "" if it has none.
func fetchModelArg(d *appsv1.Deployment, flag string) string {
	for _, c := range d.Spec.Template.Spec.InitContainers {
		if c.Name == values.PodFetchContainerName(0) {
			if i := slices.Index(c.Args, flag); i >= 0 && i+1 < len(c.Args) {
				return c.Args[i+1]
			}
		}
	}
	return ""
}

// fetchSummary is what a fetch of a model of digest leaves as its
// termination message.
func fetchSummary(digest string) string {
	return `{"versions":[1],"files":4,"bytes":2048,"digest":"` + digest + `"}`
}

// TestPerPodCopiesNeedNoClaimAndFollowTheVerifiedModel: in storage mode
// PerPod there is no claim; the serving pods fetch their own copies beside
// the first fetch Job, whose digest is then pinned in the ConfigMap
// without rolling them. A new model leaves the pods as they are while its
// Job runs, and rolls them onto it once it is verified, pinned too.
func TestPerPodCopiesNeedNoClaimAndFollowTheVerifiedModel(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "copies", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Storage.Mode = servingv1alpha1.StoragePerPod
		ms.Spec.PodTemplate.Annotations = map[string]string{localcluster.AnnotationTerminationMessage: fetchSummary("sha256:aa")}
	})
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	ms = waitReady(t, ms)
	first := ms.Status.Model.FetchedGeneration

	claims := &corev1.PersistentVolumeClaimList{}
	if err := env.client.List(ctx, claims, client.InNamespace(ns)); err != nil || len(claims.Items) != 0 {
		t.Errorf("claims %d (%v), want none in storage mode PerPod", len(claims.Items), err)
	}
	d := get(t, ns, "copies", &appsv1.Deployment{})
	if fetchModelArg(d, "--dest") != "/models/"+first || fetchModelArg(d, values.PinsFlag) == "" {
		t.Fatalf("serving pods' init containers %+v, want fetch-model into /models/%s, pinned", d.Spec.Template.Spec.InitContainers, first)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "model" && v.EmptyDir == nil {
			t.Errorf("model volume %+v, want an emptyDir of the pod's own", v)
		}
	}
	eventually(t, 30*time.Second, "the first model pinned", func(ctx context.Context) (bool, string) {
		cm := get(t, ns, "copies-config", &corev1.ConfigMap{})
		return cm.Data[values.PinsFile] == `{"`+first+`":{"digest":"sha256:aa","versions":[1]}}`+"\n", cm.Data[values.PinsFile]
	})
	if now := get(t, ns, "copies", &appsv1.Deployment{}); now.Generation != d.Generation {
		t.Errorf("pinning the first model moved the Deployment from generation %d to %d: its pods would fetch again", d.Generation, now.Generation)
	}

	// A new fetch timeout reaches the pods' next fetches through the
	// ConfigMap, which their fetch reads at each start, and rolls none.
	if got := fetchModelArg(d, values.SettingsFlag); got != values.ConfigMountPath+"/"+values.PodFetchSettingsFile {
		t.Errorf("fetch-model reads its settings from %q, want the ConfigMap's %s", got, values.PodFetchSettingsFile)
	}
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Fetch = &servingv1alpha1.FetchSpec{Timeout: &metav1.Duration{Duration: 2 * time.Hour}}
	if err := env.client.Patch(ctx, ms, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the new timeout in the ConfigMap", func(ctx context.Context) (bool, string) {
		got := get(t, ns, "copies-config", &corev1.ConfigMap{}).Data[values.PodFetchSettingsFile]
		return got == `{"timeout":"2h0m0s"}`+"\n", got
	})
	if now := get(t, ns, "copies", &appsv1.Deployment{}); now.Generation != d.Generation {
		t.Errorf("a new fetch timeout moved the Deployment from generation %d to %d: its pods would fetch again", d.Generation, now.Generation)
	}

	// A new model, whose fetch runs on: the pods keep fetching the one
	// they serve, as they did.
	patch = client.MergeFrom(ms.DeepCopy())
	ms.Spec.Model.StorageURI = "s3://models/copies-v2"
	ms.Spec.PodTemplate.Annotations[localcluster.AnnotationKeepRunning] = "true"
	if err := env.client.Patch(ctx, ms, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the new model's Job running", func(ctx context.Context) (bool, string) {
		jobs := &batchv1.JobList{}
		if err := env.client.List(ctx, jobs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, j := range jobs.Items {
			if slices.Contains(j.Spec.Template.Spec.Containers[0].Args, "s3://models/copies-v2") && j.Status.Active > 0 {
				return true, ""
			}
		}
		return false, "no running Job of the new model"
	})
	// (The pods roll for the annotation, which pod templates share.)
	held := get(t, ns, "copies", &appsv1.Deployment{})
	if !equality.Semantic.DeepEqual(held.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.InitContainers) {
		t.Errorf("while the new model is fetched, the pods' init containers became %+v", held.Spec.Template.Spec.InitContainers)
	}

	patch = client.MergeFrom(ms.DeepCopy())
	ms.Spec.PodTemplate.Annotations = map[string]string{localcluster.AnnotationTerminationMessage: fetchSummary("sha256:bb")}
	if err := env.client.Patch(ctx, ms, patch); err != nil {
		t.Fatal(err)
	}
	ms = waitReady(t, ms)
	second := ms.Status.Model.FetchedGeneration
	rolled := get(t, ns, "copies", &appsv1.Deployment{})
	if fetchModelArg(rolled, "--uri") != "s3://models/copies-v2" || fetchModelArg(rolled, "--dest") != "/models/"+second {
		t.Errorf("after the new model's fetch, the pods fetch %q into %q", fetchModelArg(rolled, "--uri"), fetchModelArg(rolled, "--dest"))
	}
	if got := get(t, ns, "copies-config", &corev1.ConfigMap{}).Data[values.PinsFile]; got != `{"`+second+`":{"digest":"sha256:bb","versions":[1]}}`+"\n" {
		t.Errorf("pins %s, want the new model's alone", got)
	}
}

// copyWarnings are the CopyNotVerified Warnings of the ModelServers of ns.
func copyWarnings(t *testing.T, ns string) []string {
	var out []string
	for _, e := range modelServerEvents(t, ns) {
		if strings.HasPrefix(e, "Warning CopyNotVerified: ") {
			out = append(out, e)
		}
	}
	return out
}

// firstPodsOfAnotherCopy is a new ModelServer whose fetch Job finds digest
// sha256:aa while its first pods, fetching beside it, end with sha256:bb:
// the store changed in place between. On kwok the pods made in their
// place end with sha256:bb too, where a real pod's fetch, pinned, would
// end with sha256:aa or fail ModelChanged. So with two replicas, where
// the operator finds both first pods' copies at once (a loaded CI), it
// evicts one, the budget refuses the other, and it looks again: each
// pod made in a place is evicted in turn, and the ModelServer is never
// Ready for long. It is waited for Ready with one replica alone.
func firstPodsOfAnotherCopy(t *testing.T, ns, name string, replicas int32) *servingv1alpha1.ModelServer {
	ms := newModelServer(ns, name, func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Replicas = ptrTo(replicas)
		ms.Spec.Storage.Mode = servingv1alpha1.StoragePerPod
		ms.Spec.PodTemplate.Annotations = map[string]string{
			localcluster.AnnotationTerminationMessage:     fetchSummary("sha256:aa"),
			localcluster.AnnotationInitTerminationMessage: fetchSummary("sha256:bb"),
		}
	})
	if err := env.client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	if replicas == 1 {
		waitReady(t, ms)
	}
	return ms
}

// TestAFirstPodsCopyOfAnotherModelThanTheJobsIsEvicted: once the rollout
// of a new ModelServer's first pods is done, a pod whose copy has another
// digest than the Job's is evicted, with a Warning, and a pod that fetches
// the pinned model takes its place; the disruption budget keeps the other
// serving meanwhile.
func TestAFirstPodsCopyOfAnotherModelThanTheJobsIsEvicted(t *testing.T) {
	ns := newNamespace(t)
	ms := firstPodsOfAnotherCopy(t, ns, "raced", 2)
	// As long as waitReady allows a new ModelServer: a first pod is
	// evicted once they are all ready.
	eventually(t, 2*time.Minute, "a first pod evicted", func(ctx context.Context) (bool, string) {
		return len(copyWarnings(t, ns)) > 0, strings.Join(modelServerEvents(t, ns), "\n")
	})
	e := copyWarnings(t, ns)[0]
	want := "its copy of the model (container fetch-model), fetched before the fetch Job had verified it, has digest sha256:bb, not the Job's sha256:aa; the pod made in its place fetches the verified model, or fails ModelChanged if the store no longer holds it."
	if !strings.HasPrefix(e, "Warning CopyNotVerified: Evicted serving pod raced-") || !strings.HasSuffix(e, want) {
		t.Errorf("event %q, want a serving pod named and %q", e, want)
	}
	// Here every pod ends with the first pods' copy; pods that fetch the
	// pinned model instead roll out, and nothing is evicted after.
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.PodTemplate.Annotations[localcluster.AnnotationInitTerminationMessage] = fetchSummary("sha256:aa")
	if err := env.client.Patch(context.Background(), ms, patch); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ms)
	time.Sleep(2 * time.Second)
	before := len(copyWarnings(t, ns))
	time.Sleep(3 * time.Second)
	if after := len(copyWarnings(t, ns)); after != before {
		t.Errorf("%d evictions, then %d once every pod has the pinned copy", before, after)
	}
}

// TestTheOnlyPodOfAnUnverifiedCopyIsKeptAndNamed: a first pod of another
// copy than the Job's that is the only one ready is not evicted, which
// would take the endpoint down; a Warning names it, and what to do.
func TestTheOnlyPodOfAnUnverifiedCopyIsKeptAndNamed(t *testing.T) {
	ns := newNamespace(t)
	firstPodsOfAnotherCopy(t, ns, "alone", 1)
	pod := podNames(t, ns, "alone")
	eventually(t, 30*time.Second, "the pod named", func(ctx context.Context) (bool, string) {
		return len(copyWarnings(t, ns)) > 0, strings.Join(modelServerEvents(t, ns), "\n")
	})
	want := "Warning CopyNotVerified: Serving pod " + pod + " is not evicted, being the only one ready, but its copy of the model (container fetch-model), fetched before the fetch Job had verified it, has digest sha256:bb, not the Job's sha256:aa: delete it,"
	if e := copyWarnings(t, ns); len(e) != 1 || !strings.HasPrefix(e[0], want) {
		t.Errorf("events %q, want one starting %q", e, want)
	}
	time.Sleep(3 * time.Second)
	if now := podNames(t, ns, "alone"); now != pod {
		t.Errorf("serving pods %s, then %s; want the only one kept", pod, now)
	}
}
