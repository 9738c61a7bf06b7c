package realnode

import (
	"context"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// TestASlowFetchSaysHowFarItHasComeAndWhetherItEndsInTime: a store that
// sends 1 MB/s holds the real fetch of the 200 MiB model. The operator
// reads the fetch pod's log through the apiserver and the real kubelet,
// and the status says how far the fetch has come, and that at this rate
// it will not finish within its 2-minute timeout, with a Warning, while
// there is time to act. A longer timeout applies to the running fetch,
// in the same Job. A store that then sends nothing has the status say for
// how long nothing has come in; once the store sends at full speed, that
// fetch ends, and the progress goes from the status.
func TestASlowFetchSaysHowFarItHasComeAndWhetherItEndsInTime(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)
	store := newStallingStore(t, e.S3Endpoint)
	store.rate.Store(1_000_000)
	e.kubectl(t, strings.Replace(e.CredentialsSecret("proxied", ""), e.S3Endpoint, store.url, 1), "-n", ns, "apply", "-f", "-")
	manifest := func(timeout string) string {
		return e.ModelServerYAML(realenv.ModelServer{Name: "slow", URI: bigModel, Secret: "proxied", Storage: "1Gi", SpecExtra: "  fetch:\n    timeout: " + timeout + "\n"})
	}
	e.kubectl(t, manifest("2m"), "-n", ns, "apply", "-f", "-")
	start := time.Now()

	// The first read is 15 s after the pod's creation.
	var ms *servingv1alpha1.ModelServer
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 90*time.Second, true, func(context.Context) (bool, error) {
		ms = e.get(t, ns, "slow")
		return ms.Status.Model != nil && ms.Status.Model.Progress != nil && ms.Status.Model.Progress.BytesPerSecond > 0, nil
	})
	if err != nil {
		t.Fatalf("no progress in the status: %s: %s %+v", ms.Status.Phase, ms.Status.Message, ms.Status.Model)
	}
	p := ms.Status.Model.Progress
	t.Logf("after %.1fs: %s; %d of %v bytes, %d of %v files, %d B/s, logged at %s by %s", time.Since(start).Seconds(), ms.Status.Message,
		p.Bytes, ptr.Deref(p.TotalBytes, -1), p.Files, ptr.Deref(p.TotalFiles, -1), p.BytesPerSecond, p.Time.UTC().Format(time.RFC3339), p.Pod)
	const model = 200 << 20
	if total := ptr.Deref(p.TotalBytes, -1); total < model || total > model+1<<20 || p.Bytes <= 0 || p.Bytes >= model/2 {
		t.Errorf("progress %d of %d bytes; want some, of the model's 200 MiB and its small files", p.Bytes, total)
	}
	// The fetcher's rate is of its last 30 s, from its start at the
	// first read, and the sockets' buffers between the store and it take
	// bursts: above the store's rate by less than twice. Below it by as
	// much as a loaded machine makes the proxy's pacing and the fetcher's
	// start lose (0.7 MB/s on an idle one).
	if p.BytesPerSecond < 200_000 || p.BytesPerSecond > 2_000_000 {
		t.Errorf("progress at %d B/s, from a store that sends 1 MB/s", p.BytesPerSecond)
	}
	if p.TotalFiles == nil || p.Files >= *p.TotalFiles {
		t.Errorf("progress %d of %v files; want fewer than all", p.Files, p.TotalFiles)
	}
	pods := e.kubectl(t, "", "-n", ns, "get", "pods", "-l", "job-name", "--field-selector=status.phase=Running", "-o", "name")
	if strings.TrimSpace(pods) != "pod/"+p.Pod {
		t.Errorf("progress of pod %q; the running fetch pods are %q", p.Pod, pods)
	}
	if age := time.Since(p.Time.Time); age < 0 || age > 60*time.Second {
		t.Errorf("progress logged at %s, %s ago", p.Time, age)
	}
	said := regexp.MustCompile(`^fetching the model from s3://models/big: \d+\.\d MiB of 200\.\d MiB \(\d+%\), \d\.\d MB/s, about \d+ min left, ` +
		`past spec\.fetch\.timeout, 2m0s, at this rate; raise it, and the running fetch is given the time$`)
	if !said.MatchString(ms.Status.Message) {
		t.Errorf("message %q, want it to match %s", ms.Status.Message, said)
	}
	if ms.Status.Phase != servingv1alpha1.PhaseFetching {
		t.Errorf("phase %s while the fetch runs", ms.Status.Phase)
	}
	var warned int
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		if warned = e.eventCounts(t, ns, "involvedObject.kind=ModelServer")["Warning/FetchOutOfTime"]; warned > 0 {
			break
		}
	}
	if warned != 1 {
		t.Errorf("%d FetchOutOfTime Warnings, want 1", warned)
	}
	slow := e.slowFetches(t, ns)
	if n := slow(status.SlowFetchOutOfTime); n != 1 {
		t.Errorf("modelserver_slow_fetches{cause=%q} = %g, want 1", status.SlowFetchOutOfTime, n)
	}

	job := currentJob(t, e, ns)
	e.kubectl(t, manifest("10m"), "-n", ns, "apply", "-f", "-")
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
		j := currentJob(t, e, ns)
		return j.UID == job.UID && ptr.Deref(j.Spec.ActiveDeadlineSeconds, 0) == 600, nil
	})
	if err != nil {
		t.Fatalf("the running fetch Job %s did not take the 10 minutes", job.Name)
	}
	// A store that sends nothing more: after 30 s, the status says so.
	store.hold.Store(true)
	ms = e.waitMessage(t, ns, "slow", "nothing received for", 90*time.Second)
	if p := ms.Status.Model.Progress; p == nil || p.BytesPerSecond != 0 || p.IdleSeconds < 30 {
		t.Errorf("a fetch held back reads progress %+v; want no rate, and 30 s or more without a byte", p)
	}
	store.rate.Store(0)
	store.hold.Store(false)
	released := time.Now()
	e.waitReady(t, ns, "slow", 3*time.Minute)
	t.Logf("Ready %.1fs after the store sent at full speed, %.1fs after kubectl apply", time.Since(released).Seconds(), time.Since(start).Seconds())
	if ms = e.get(t, ns, "slow"); ms.Status.Model.Progress != nil || ms.Status.Message != "" {
		t.Errorf("Ready with progress %+v, message %q; want neither", ms.Status.Model.Progress, ms.Status.Message)
	}
	if n := slow(status.SlowFetchOutOfTime); n != 0 {
		t.Errorf("modelserver_slow_fetches{cause=%q} = %g once Ready, want 0", status.SlowFetchOutOfTime, n)
	}
	if j := currentJob(t, e, ns); j.UID != job.UID {
		t.Errorf("the model was fetched by Job %s, not the one whose timeout was raised", j.UID)
	}
	if n := e.eventCounts(t, ns, "involvedObject.kind=ModelServer")["Normal/FetchRetried"]; n != 0 {
		t.Errorf("%d FetchRetried Events, want none", n)
	}
}

// currentJob is the only fetch Job in ns.
func currentJob(t *testing.T, e *env, ns string) *batchv1.Job {
	t.Helper()
	jobs, err := e.cs.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + values.ComponentFetch})
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("fetch Jobs: %d, %v; want one", len(jobs.Items), err)
	}
	return &jobs.Items[0]
}

// slowFetches scrapes the operator's modelserver_slow_fetches by cause, as
// a ServiceAccount of ns given the metrics-reader role.
func (e *env) slowFetches(t *testing.T, ns string) func(cause string) float64 {
	t.Helper()
	scrape := e.scraper(t, ns)
	return func(cause string) float64 {
		return gauge(scrape(), `modelserver_slow_fetches{cause="`+cause+`"}`)
	}
}

// scraper reads the operator's metrics, as a ServiceAccount of ns given
// the metrics-reader role.
func (e *env) scraper(t *testing.T, ns string) func() string {
	t.Helper()
	binding := "rn-scraper-" + ns
	e.kubectl(t, "", "create", "serviceaccount", "scraper", "-n", ns)
	e.kubectl(t, "", "create", "clusterrolebinding", binding, "--clusterrole=modelserver-metrics-reader", "--serviceaccount="+ns+":scraper")
	t.Cleanup(func() { _, _ = e.Kubectl("", "delete", "clusterrolebinding", binding) })
	url := "https://" + net.JoinHostPort(e.operatorPod(t).Status.PodIP, "8443") + "/metrics"
	return func() string {
		token := strings.TrimSpace(e.kubectl(t, "", "-n", ns, "create", "token", "scraper"))
		code, body := get(t, url, token)
		if code != http.StatusOK {
			t.Fatalf("scrape of %s: %d", url, code)
		}
		return body
	}
}
