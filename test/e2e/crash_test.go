package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

// crashIterations is how many times the crash scenario kills the operator:
// $CRASH_ITERATIONS, default 6 (`make test-soak` runs 24).
func crashIterations(t *testing.T) int {
	if v := os.Getenv("CRASH_ITERATIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CRASH_ITERATIONS=%q: want a positive number", v)
		}
		return n
	}
	return 6
}

// TestKillingTheOperatorMidOperationNeverWedgesAModelServer cycles a
// ModelServer through install, upgrade and uninstall and SIGKILLs the
// operator a random (seeded) moment after each step. After each restart
// the ModelServer must converge, Ready at its latest generation or fully
// deleted, with no release record left pending and no object left over.
func TestKillingTheOperatorMidOperationNeverWedgesAModelServer(t *testing.T) {
	iterations := crashIterations(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CRASH_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CRASH_SEED=%q: %v", v, err)
		}
		seed = s
	}
	t.Logf("crash seed %d (CRASH_SEED=%d repeats this run's kill points)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	c := dedicatedCluster(t)
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ns := kubectlNamespace(t, c)
	op := newOperator(t, c, "crashing-operator", false)
	op.start()

	steps := []string{"install", "upgrade", "uninstall"}
	killed := map[string]int{}
	midOperation := map[string]int{}
	var converge []time.Duration
	for i := range iterations {
		step := steps[i%len(steps)]
		name := fmt.Sprintf("crash-%d", i/len(steps))
		watchRecords(t, cs, ns, name)
		switch step {
		case "install":
			kubectlStdin(t, c, fmt.Sprintf(crashSpec, name, "tensorflow/serving:2.19.1", 2), "apply", "-n", ns, "-f", "-")
		case "upgrade":
			kubectlStdin(t, c, fmt.Sprintf(crashSpec, name, "tensorflow/serving:2.18.0", 3), "apply", "-n", ns, "-f", "-")
		case "uninstall":
			kubectl(t, c, "delete", "-n", ns, "ms/"+name, "--wait=false")
		}
		// A Helm operation here takes tens of milliseconds, so a kill at a
		// random time mostly lands before or after it. Every other kill
		// therefore waits for the release record to turn pending (or
		// uninstalling) and strikes then, inside the operation.
		targeted := rng.IntN(2) == 0
		if targeted {
			if !awaitPendingRecord(ns, name, 5*time.Second) {
				t.Logf("iteration %d: no pending record of %s seen; killing anyway", i, name)
			}
		} else {
			time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		}
		op.kill()
		killed[step]++
		for _, s := range helmRecordStatuses(t, c, ns) {
			if strings.Contains(s, "=pending-") || strings.HasSuffix(s, "=uninstalling") {
				midOperation[step]++
				break
			}
		}
		restarted := time.Now()
		op.start()
		if step == "uninstall" {
			kubectl(t, c, "wait", "-n", ns, "--for=delete", "ms/"+name, "--timeout=90s")
			checkNothingLeft(t, c, ns, name)
		} else {
			waitObserved(t, c, ns, name)
			kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/"+name, "--timeout=90s")
			checkOneDeployedRelease(t, c, ns, name)
		}
		converge = append(converge, time.Since(restarted))
	}
	for _, step := range steps {
		report(t, "operator SIGKILLed during "+step+" (after a random 0-400ms, or the moment the release record turns pending)", killed[step],
			"converged every time (Ready at the latest generation, or gone with every object and record); %d kills left a release record pending-*/uninstalling, recovered on restart (seed %d)",
			midOperation[step], seed)
	}
	t.Logf("time from restart to converged: %s", summarize(converge))
}

// pendingRecords carries, per release, a signal each time a record of it
// turns pending-* or uninstalling; watchRecords starts the watch (or
// drops stale signals) before the step that causes it.
var pendingRecords = map[string]chan struct{}{}

func watchRecords(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	if ch, ok := pendingRecords[ns+"/"+name]; ok {
		// Signals of an earlier step are stale.
		for len(ch) > 0 {
			<-ch
		}
		return
	}
	ch := make(chan struct{}, 64)
	pendingRecords[ns+"/"+name] = ch
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := cs.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*corev1.Secret)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			if st := s.Labels["status"]; strings.HasPrefix(st, "pending-") || st == "uninstalling" {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}()
}

// awaitPendingRecord waits for a record of the release to turn pending.
func awaitPendingRecord(ns, name string, timeout time.Duration) bool {
	select {
	case <-pendingRecords[ns+"/"+name]:
		return true
	case <-time.After(timeout):
		return false
	}
}

const crashSpec = `
apiVersion: serving.modelserver.dev/v1alpha1
kind: ModelServer
metadata:
  name: %s
spec:
  model:
    storageUri: s3://models/resnet
  image: %s
  replicas: %d
`

// checkOneDeployedRelease fails unless the release's newest record is
// deployed and none is pending, and the release's objects are one of each,
// owned by the ModelServer.
func checkOneDeployedRelease(t *testing.T, c *localcluster.Cluster, ns, name string) {
	t.Helper()
	statuses := helmRecordStatuses(t, c, ns)
	deployed := 0
	for _, s := range statuses {
		if !strings.HasPrefix(s, name+".") {
			continue
		}
		if strings.Contains(s, "=pending-") || strings.HasSuffix(s, "=uninstalling") {
			t.Errorf("release record %s after convergence", s)
		}
		if strings.HasSuffix(s, "=deployed") {
			deployed++
		}
	}
	if deployed != 1 {
		t.Errorf("%d deployed records of release %s, want 1: %v", deployed, name, statuses)
	}
	uid := kubectl(t, c, "get", "-n", ns, "ms/"+name, "-o", "jsonpath={.metadata.uid}")
	for _, kind := range []string{"deployments", "services", "configmaps", "persistentvolumeclaims", "jobs"} {
		owners := kubectl(t, c, "get", kind, "-n", ns, "-l", "serving.modelserver.dev/modelserver="+name,
			"-o", `jsonpath={range .items[*]}{.metadata.ownerReferences[0].uid}{"\n"}{end}`)
		lines := strings.Fields(owners)
		if len(lines) != 1 || lines[0] != uid {
			t.Errorf("%s of %s: owners %v, want exactly one object owned by %s", kind, name, lines, uid)
		}
	}
}

// checkNothingLeft waits for the garbage collector to remove what the
// ModelServer owned, its objects and its release records, and reports what
// is still there after a minute.
func checkNothingLeft(t *testing.T, c *localcluster.Cluster, ns, name string) {
	t.Helper()
	var left []string
	_ = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		left = nil
		for _, kind := range []string{"deployments", "services", "configmaps", "persistentvolumeclaims", "jobs"} {
			if out := kubectl(t, c, "get", kind, "-n", ns, "-l", "serving.modelserver.dev/modelserver="+name, "-o", "name"); out != "" {
				left = append(left, out)
			}
		}
		for _, s := range helmRecordStatuses(t, c, ns) {
			if strings.HasPrefix(s, name+".") {
				left = append(left, "release record "+s)
			}
		}
		return len(left) == 0, nil
	})
	for _, l := range left {
		t.Errorf("left a minute after deleting %s: %s", name, l)
	}
}

func summarize(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	lo, hi, sum := ds[0], ds[0], time.Duration(0)
	for _, d := range ds {
		lo, hi, sum = min(lo, d), max(hi, d), sum+d
	}
	return fmt.Sprintf("min %s, mean %s, max %s over %d", lo.Round(time.Millisecond), (sum / time.Duration(len(ds))).Round(time.Millisecond), hi.Round(time.Millisecond), len(ds))
}
