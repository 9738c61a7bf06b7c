package realnode

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// TestAFetchOutOfTimeIsStoppedThenServedOnceGivenMore: a store that
// answers nothing holds the real fetch until spec.fetch.timeout, when the
// Job controller stops its pod and the fetch fails with reason Timeout; a
// longer timeout makes the Job again, which, the store answering now,
// fetches the model, and the ModelServer becomes Ready.
func TestAFetchOutOfTimeIsStoppedThenServedOnceGivenMore(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)

	archive := tarGzOf(t, filepath.Join(e.Root, "test/testdata/tf-serving/saved_model_half_plus_two_cpu"), nil)
	var stalled atomic.Bool
	stalled.Store(true)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stalled.Load() {
			<-r.Context().Done() // no answer, until the client gives up
			return
		}
		http.ServeContent(w, r, "model.tar.gz", time.Time{}, bytes.NewReader(archive))
	})}
	l, err := net.Listen("tcp", localcluster.HostAddress+":0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	manifest := func(timeout string) string {
		return fmt.Sprintf(`apiVersion: serving.modelserver.dev/v1alpha1
kind: ModelServer
metadata:
  name: stalled
spec:
  model:
    name: %s
    storageUri: http://%s/model.tar.gz
  replicas: 1
  image: %s
  storage:
    size: 64Mi
  fetch:
    timeout: %s
`, realenv.ModelName, l.Addr(), e.DoubleImage, timeout)
	}
	e.kubectl(t, manifest("1m"), "-n", ns, "apply", "-f", "-")
	start := time.Now()
	msg := e.waitFetchFailed(t, ns, "stalled", "Timeout")
	t.Logf("the fetch failed %.1fs after kubectl apply: %s", time.Since(start).Seconds(), msg)
	if want := "the fetch did not finish within spec.fetch.timeout, 1m0s, and was stopped"; !strings.HasPrefix(msg, want) {
		t.Errorf("ModelFetched message %q, want it to begin %q", msg, want)
	}
	pods, err := e.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + values.ComponentFetch})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == "Running" {
			t.Errorf("fetch pod %s still runs after its Job's deadline", p.Name)
		}
	}

	stalled.Store(false)
	e.kubectl(t, manifest("5m"), "-n", ns, "apply", "-f", "-")
	e.waitReady(t, ns, "stalled", 3*time.Minute)
	if got := e.modelStatus(t, ns, "stalled"); got["123"] != "AVAILABLE" {
		t.Errorf("TF Serving (double) reports %v, want version 123 AVAILABLE", got)
	}
	if n := e.eventCounts(t, ns, "involvedObject.kind=ModelServer")["Normal/FetchRetried"]; n != 1 {
		t.Errorf("%d FetchRetried Events, want 1", n)
	}
}
