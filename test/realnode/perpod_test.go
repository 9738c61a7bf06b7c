package realnode

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
	"github.com/modelserver-dev/modelserver-operator/test/s3server"
)

// TestEachPodFetchesACopyOfItsOwnPinnedToWhatTheJobVerified: in storage
// mode PerPod, each serving pod's fetch-model container really downloads
// the model from the S3 server into the pod's own emptyDir, and TF Serving
// (the double) serves it. Once the store is changed in place, a pod added
// by a scale-up refuses the model its Job did not verify (ModelChanged,
// said in the status), and the pods that serve go on; a refetch verifies
// what the store holds now and rolls every pod onto it.
func TestEachPodFetchesACopyOfItsOwnPinnedToWhatTheJobVerified(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)
	prefix := "per-pod/" + ns
	uri, _ := e.storeModel(t, prefix)
	spec := func(replicas int, extra string) string {
		return e.ModelServerYAML(realenv.ModelServer{Name: "copies", URI: uri, Replicas: replicas, Storage: "64Mi\n    mode: PerPod", ModelExtra: extra})
	}
	start := time.Now()
	e.kubectl(t, spec(2, ""), "-n", ns, "apply", "-f", "-")
	first := e.waitNewModelReady(t, ns, "copies", nil)
	t.Logf("2 pods with copies of their own: kubectl apply to Ready in %.1fs", time.Since(start).Seconds())
	verified := e.get(t, ns, "copies").Status.Model.Digest
	e.expectCopies(t, ns, verified, 2)
	if claims := e.kubectlOut("-n", ns, "get", "pvc", "-o", "name"); strings.TrimSpace(claims) != "" {
		t.Errorf("claims %s, want none", claims)
	}
	if got := e.modelStatus(t, ns, "copies"); got["123"] != "AVAILABLE" {
		t.Errorf("TF Serving (double) reports %v, want version 123 AVAILABLE", got)
	}
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		cm, err := e.cs.CoreV1().ConfigMaps(ns).Get(ctx, "copies-config", metav1.GetOptions{})
		return err == nil && strings.Contains(cm.Data[values.PinsFile], `"`+first+`":{"digest":"`+verified+`","versions":[123]}`), nil
	})
	if err != nil {
		t.Fatalf("the model is not pinned: %s", e.kubectlOut("-n", ns, "get", "configmap", "copies-config", "-o", "yaml"))
	}

	// The pipeline overwrites a file of version 123 in place; a third pod
	// must not serve that.
	client := s3server.Client(e.S3Endpoint, e.S3Creds)
	if err := s3server.PutObject(context.Background(), client, realenv.Bucket, prefix+"/00000123/assets/foo.txt", []byte("changed in place\n")); err != nil {
		t.Fatal(err)
	}
	serving := e.servingPodNames(t, ns)
	e.kubectl(t, spec(3, ""), "-n", ns, "apply", "-f", "-")
	ms := e.waitMessage(t, ns, "copies", `cannot fetch its copy of the model (container "fetch-model"): ModelChanged: `, 3*time.Minute)
	if ms.Status.ReadyReplicas != 2 || !strings.Contains(ms.Status.Message, "not "+verified[:len("sha256:")+12]+"): a new spec.model.refetch") {
		t.Errorf("%d ready, message %q; want the 2 pods serving, and the verified digest named", ms.Status.ReadyReplicas, ms.Status.Message)
	}
	if now := e.servingPodNames(t, ns); !slices.Equal(now, serving) && len(now) != 3 {
		t.Errorf("serving pods %v, then %v", serving, now)
	}

	start = time.Now()
	e.kubectl(t, spec(3, "    refetch: run-2\n"), "-n", ns, "apply", "-f", "-")
	second := e.waitNewModelReady(t, ns, "copies", []string{first})
	t.Logf("refetch to Ready, 3 pods rolled onto the new copy: %.1fs", time.Since(start).Seconds())
	now := e.get(t, ns, "copies").Status.Model
	if now.Digest == verified || now.FetchedGeneration != second {
		t.Errorf("after the refetch, digest %s of generation %s; want a new digest", now.Digest, now.FetchedGeneration)
	}
	e.expectCopies(t, ns, now.Digest, 3)
}

// expectCopies checks that n serving pods are ready, each of whose
// fetch-model container fetched a copy with digest.
func (e *env) expectCopies(t *testing.T, ns, digest string, n int) {
	t.Helper()
	pods, err := e.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=serving"})
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || !status.PodReady(&p) {
			continue
		}
		ready++
		i := slices.IndexFunc(p.Status.InitContainerStatuses, func(cs corev1.ContainerStatus) bool { return cs.Name == "fetch-model" })
		if i < 0 || p.Status.InitContainerStatuses[i].State.Terminated == nil {
			t.Errorf("pod %s: no fetch-model that ended: %+v", p.Name, p.Status.InitContainerStatuses)
			continue
		}
		end := p.Status.InitContainerStatuses[i].State.Terminated
		if sum, ok := fetch.ParseSummary(end.Message); end.ExitCode != 0 || !ok || sum.Digest != digest || !slices.Equal(sum.Versions, []int64{123}) {
			t.Errorf("pod %s fetched %q (exit %d), want version 123 of digest %s", p.Name, end.Message, end.ExitCode, digest)
		}
	}
	if ready != n {
		t.Errorf("%d serving pods ready, want %d", ready, n)
	}
}

// TestPodsFetchingTheirCopiesSayHowFarTheyHaveCome: a scale-up of a
// PerPod ModelServer whose store sends 1 MB/s leaves the new pod
// downloading the 200 MiB model in its fetch-model container. Once its
// rollout has stood still for 30 s, the status says so, with how far the
// download has come, read from the container's log through the real
// kubelet, and the stalled-rollouts gauge counts it under Fetching, with
// no RolloutStalled Warning: a download is no fault. At 2 min the
// download runs out of spec.fetch.timeout, which the status says, and the
// kubelet starts it again; a longer timeout reaches that attempt without
// replacing the pod, and once the store sends at full speed, the pod
// serves and the message goes.
func TestPodsFetchingTheirCopiesSayHowFarTheyHaveCome(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)
	store := newStallingStore(t, e.S3Endpoint)
	e.kubectl(t, strings.Replace(e.CredentialsSecret("proxied", ""), e.S3Endpoint, store.url, 1), "-n", ns, "apply", "-f", "-")
	spec := func(replicas int, timeout string) string {
		return e.ModelServerYAML(realenv.ModelServer{Name: "big-copies", URI: bigModel, Secret: "proxied", Replicas: replicas, Storage: "1Gi\n    mode: PerPod",
			SpecExtra: "  fetch:\n    timeout: " + timeout + "\n"})
	}
	start := time.Now()
	e.kubectl(t, spec(1, "2m"), "-n", ns, "apply", "-f", "-")
	e.waitReady(t, ns, "big-copies", 3*time.Minute)
	t.Logf("1 pod with its own copy of the 200 MiB model: kubectl apply to Ready in %.1fs", time.Since(start).Seconds())
	scrape := e.scraper(t, ns)

	store.rate.Store(1_000_000)
	e.kubectl(t, spec(2, "2m"), "-n", ns, "apply", "-f", "-")
	scaled := time.Now()
	ms := e.waitMessage(t, ns, "big-copies", "1 serving pod is fetching its copy of the model: ", 2*time.Minute)
	said := regexp.MustCompile(`; 1 serving pod is fetching its copy of the model: \d+\.\d MiB of 200\.\d MiB \(\d+%\), \d\.\d MB/s, about \d+ min left$`)
	if !said.MatchString(ms.Status.Message) {
		t.Errorf("message %q, want it to match %s", ms.Status.Message, said)
	}
	if ms.Status.ReadyReplicas != 1 {
		t.Errorf("%d pods ready while the new one fetches, want the first", ms.Status.ReadyReplicas)
	}
	if n := gauge(scrape(), `modelserver_stalled_rollouts{cause="`+status.CauseFetching+`"}`); n < 1 {
		t.Errorf("modelserver_stalled_rollouts{cause=%q} = %g while a pod fetches its copy, want it counted", status.CauseFetching, n)
	}
	if n := e.eventCounts(t, ns, "involvedObject.kind=ModelServer")["Warning/RolloutStalled"]; n != 0 {
		t.Errorf("%d RolloutStalled Warnings for a pod downloading, want none", n)
	}
	// Read again 30 s later, further on.
	first := ms.Status.Message
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 75*time.Second, true, func(context.Context) (bool, error) {
		ms = e.get(t, ns, "big-copies")
		return ms.Status.Message != first, nil
	})
	if err != nil || !said.MatchString(ms.Status.Message) {
		t.Errorf("message %q after %q, want a new progress matching %s", ms.Status.Message, first, said)
	}

	// spec.fetch.timeout bounds each attempt of a pod's fetch as it bounds
	// the Job: this one ends at 2 min, and the kubelet starts the fetch
	// again within seconds, so the status says how the attempt before
	// ended beside how far this one has come. A longer timeout reaches the
	// pod's next attempt through the ConfigMap, without replacing the pod.
	ms = e.waitMessage(t, ns, "big-copies", `; its attempt before failed, Timeout: the fetch did not finish within 2m0s (spec.fetch.timeout)`, 2*time.Minute)
	if !strings.Contains(ms.Status.Message, " MiB of 200.0 MiB") {
		t.Errorf("message %q, want how far the new attempt has come too", ms.Status.Message)
	}
	// The new attempt takes up the ranges the one before completed.
	list, err := e.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=serving"})
	if err != nil {
		t.Fatal(err)
	}
	again := ""
	for _, p := range list.Items {
		for _, cs := range p.Status.InitContainerStatuses {
			if cs.Name == "fetch-model" && cs.RestartCount > 0 {
				again = p.Name
			}
		}
	}
	if logs := e.kubectlOut("-n", ns, "logs", again, "-c", "fetch-model"); !strings.Contains(logs, "resuming a stopped fetch") {
		t.Errorf("pod %s's new attempt does not resume the one before; its log:\n%s", again, logs)
	}
	pods := e.servingPodNames(t, ns)
	e.kubectl(t, spec(2, "1h"), "-n", ns, "apply", "-f", "-")
	store.rate.Store(0)
	e.waitReady(t, ns, "big-copies", 3*time.Minute)
	if now := e.servingPodNames(t, ns); !slices.Equal(now, pods) {
		t.Errorf("serving pods %v became %v with a new fetch timeout, want them kept", pods, now)
	}
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(context.Context) (bool, error) {
		ms = e.get(t, ns, "big-copies")
		return ms.Status.ReadyReplicas == 2 && ms.Status.Message == "", nil
	})
	if err != nil {
		t.Errorf("%d ready, message %q; want both pods, and no message", ms.Status.ReadyReplicas, ms.Status.Message)
	}
	t.Logf("the scaled-up pod was ready %.1fs after the scale", time.Since(scaled).Seconds())
}
