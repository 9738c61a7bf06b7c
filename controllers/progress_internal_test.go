package controllers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/modelserver-dev/modelserver-operator/internal/status"
)

// logServer answers pods' log reads with the lines set, and counts them.
type logServer struct {
	lines atomic.Value // string
	reads atomic.Int32
	fail  atomic.Bool
}

func newLogServer(t *testing.T) (*logServer, corev1client.PodsGetter) {
	s := &logServer{}
	s.lines.Store("")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/log") || r.URL.Query().Get("container") != "fetch" || r.URL.Query().Get("tailLines") == "" {
			http.Error(w, "unexpected "+r.URL.String(), http.StatusBadRequest)
			return
		}
		s.reads.Add(1)
		if s.fail.Load() {
			http.Error(w, `Get "https://:10250/containerLogs/ns/p/fetch": dial tcp :10250: connect: connection refused`, http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(s.lines.Load().(string)))
	}))
	t.Cleanup(srv.Close)
	c, err := corev1client.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// A running fetch's log is read once its pod has run for 15 s, then
// every 30 s, whatever else wakes its ModelServer in between, and each
// read asks for a look when the next is due.
func TestAFetchPodsLogIsReadForItsProgressEvery30s(t *testing.T) {
	logs, pods := newLogServer(t)
	logs.lines.Store(`{"time":"2026-12-06T09:00:00Z","level":"INFO","msg":"progress","files":2,"totalFiles":5,"bytes":100,"totalBytes":400,"mbPerSecond":1.5,"elapsed":"15s"}` + "\n")
	r := &ModelServerReconciler{PodLogs: pods}
	created := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "m-fetch-g1", UID: "job-1"}}
	running := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m-fetch-g1-abcde", Namespace: "ns", CreationTimestamp: metav1.NewTime(created)}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	pending := running
	pending.Status.Phase = corev1.PodPending
	creating, nowhere := *fetchPod(corev1.PodPending, nil, creatingIt), *fetchPod(corev1.PodPending, unschedulable, nil)
	creating.CreationTimestamp, nowhere.CreationTimestamp = running.CreationTimestamp, running.CreationTimestamp

	var news bool // the last look read a progress, to be written at once
	look := func(at time.Duration, pods ...corev1.Pod) (*status.FetchJob, time.Duration) {
		t.Helper()
		fj := &status.FetchJob{Job: job}
		obs := &observed{}
		r.observeProgress(context.Background(), "ms-1", fj, pods, obs, created.Add(at))
		news = obs.progressRead
		return fj, obs.lookAgainIn
	}
	for _, step := range []struct {
		name   string
		at     time.Duration
		pods   []corev1.Pod
		reads  int32
		again  time.Duration
		pod    string
		bytes  int64 // -1: no progress read
		failed bool
	}{
		{"a pod about to start", 4 * time.Second, []corev1.Pod{pending}, 0, 11 * time.Second, "", -1, false},
		// Looked at again after their grace, for what keeps them.
		{"a pod being created on its node", 4 * time.Second, []corev1.Pod{creating}, 0, 0, "", -1, false},
		{"a pod no node takes", 4 * time.Second, []corev1.Pod{nowhere}, 0, 0, "", -1, false},
		{"a pod that has just started", 10 * time.Second, []corev1.Pod{running}, 0, 5 * time.Second, running.Name, -1, false},
		{"15 s after", 15 * time.Second, []corev1.Pod{running}, 1, 30 * time.Second, running.Name, 100, false},
		// What the last read found, which the status may not hold yet.
		{"woken in between", 20 * time.Second, []corev1.Pod{running}, 1, 25 * time.Second, running.Name, 100, false},
		{"30 s after the read", 45 * time.Second, []corev1.Pod{running}, 2, 30 * time.Second, running.Name, -1, true},
		{"after a failed read", 50 * time.Second, []corev1.Pod{running}, 2, 25 * time.Second, running.Name, -1, false},
		{"a pod pending long", 2 * time.Minute, []corev1.Pod{pending}, 2, 0, "", -1, false},
	} {
		logs.fail.Store(step.failed)
		readsBefore := logs.reads.Load()
		fj, again := look(step.at, step.pods...)
		switch {
		case logs.reads.Load() != step.reads:
			t.Fatalf("%s: %d reads, want %d", step.name, logs.reads.Load(), step.reads)
		case again != step.again:
			t.Errorf("%s: look again in %s, want %s", step.name, again, step.again)
		case fj.Pod != step.pod:
			t.Errorf("%s: running pod %q, want %q", step.name, fj.Pod, step.pod)
		case step.bytes < 0 && fj.Progress != nil:
			t.Errorf("%s: progress %+v, want none read", step.name, *fj.Progress)
		case step.bytes >= 0 && (fj.Progress == nil || fj.Progress.Bytes != step.bytes || fj.Progress.BytesPerSecond != 1_500_000):
			t.Errorf("%s: progress %+v, want %d bytes at 1.5 MB/s", step.name, fj.Progress, step.bytes)
		case news != (logs.reads.Load() > readsBefore && !step.failed):
			t.Errorf("%s: news to write at once %v, with %d reads before and %d now", step.name, news, readsBefore, logs.reads.Load())
		}
	}
	r.progressReads.forget(job.UID)
	if fj, _ := look(3*time.Minute, running); logs.reads.Load() != 3 || fj.Progress == nil {
		t.Errorf("a Job whose reads were forgotten: %d reads, progress %v; want it read at once", logs.reads.Load(), fj.Progress)
	}

	r.PodLogs = nil
	if fj, again := look(4*time.Minute, running); fj.Pod != "" || again != 0 || logs.reads.Load() != 3 {
		t.Errorf("without a log reader: pod %q, look again in %s, %d reads; want none of it", fj.Pod, again, logs.reads.Load())
	}
}

func TestRunningPodIsTheNewestThatRuns(t *testing.T) {
	at := func(name string, phase corev1.PodPhase, created time.Duration, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(0, 0).Add(created))}, Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &p.CreationTimestamp
		}
		return p
	}
	for _, tc := range []struct {
		pods []corev1.Pod
		want string
	}{
		{nil, ""},
		{[]corev1.Pod{at("failed", corev1.PodFailed, 0, false), at("pending", corev1.PodPending, time.Second, false)}, ""},
		{[]corev1.Pod{at("old", corev1.PodRunning, 0, false), at("new", corev1.PodRunning, time.Second, false)}, "new"},
		{[]corev1.Pod{at("old", corev1.PodRunning, 0, false), at("stopping", corev1.PodRunning, time.Second, true)}, "old"},
	} {
		got := ""
		if p := runningPod(tc.pods); p != nil {
			got = p.Name
		}
		if got != tc.want {
			t.Errorf("runningPod(%v) = %q, want %q", tc.pods, got, tc.want)
		}
	}
}

// Reads of many fetches' logs are spread to 2 a second: every 30 s for up
// to 60 fetches, every 500 s for a thousand.
func TestProgressReadsOfManyFetchesAreSpread(t *testing.T) {
	for fetches, want := range map[int]time.Duration{
		0: 30 * time.Second, 1: 30 * time.Second, 60: 30 * time.Second, 61: 30500 * time.Millisecond, 1000: 500 * time.Second,
	} {
		if got := progressInterval(fetches); got != want {
			t.Errorf("progressInterval(%d) = %s, want %s", fetches, got, want)
		}
	}
}
