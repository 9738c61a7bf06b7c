package realnode

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// history keeps each change of what the serving pods' containers, the
// serving Deployment and the ModelServer say, a line each with the time
// it was seen, for a test whose counts went wrong to print: Events say
// how often, not in what order.
type history struct {
	mu      sync.Mutex
	start   time.Time
	entries []seen
	last    map[string]string
}

// seen is a change of what an object says: when, whose ("modelserver",
// "deployment", "pod <name>"), and what it says now.
type seen struct {
	at        time.Time
	key, line string
}

// watchHistory records the history of ModelServer name in ns until the
// test ends.
func (e *env) watchHistory(t *testing.T, ns, name string) *history {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &history{start: time.Now(), last: map[string]string{}}
	dyn, err := dynamic.NewForConfig(e.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	watches := []func() (watch.Interface, error){
		func() (watch.Interface, error) {
			return e.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: values.LabelModelServer + "=" + name + "," + values.LabelComponent + "=serving"})
		},
		func() (watch.Interface, error) {
			return e.cs.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		},
		func() (watch.Interface, error) {
			return dyn.Resource(modelServersResource).Namespace(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		},
	}
	var wg sync.WaitGroup
	for _, start := range watches {
		w, err := start()
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		wg.Go(func() {
			defer w.Stop()
			follow(ctx, w, h.saw)
		})
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return h
}

func (h *history) saw(o runtime.Object, at time.Time) {
	key, line := "", ""
	switch o := o.(type) {
	case *corev1.Pod:
		key, line = "pod "+o.Name, podLine(o)
	case *appsv1.Deployment:
		st := o.Status
		key, line = "deployment", fmt.Sprintf("%d replicas, %d ready, %d available", st.Replicas, st.ReadyReplicas, st.AvailableReplicas)
	case *unstructured.Unstructured:
		phase, _, _ := unstructured.NestedString(o.Object, "status", "phase")
		message, _, _ := unstructured.NestedString(o.Object, "status", "message")
		key, line = "modelserver", phase+": "+message
	default:
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last[key] == line {
		return
	}
	h.last[key] = line
	h.entries = append(h.entries, seen{at, key, line})
}

// modelServerSince lists the ModelServer's phases and messages seen since
// from, the one it had then first.
func (h *history) modelServerSince(from time.Time) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var then string
	var out []string
	for _, p := range h.entries {
		if p.key != "modelserver" {
			continue
		}
		if p.at.After(from) {
			out = append(out, p.line)
		} else {
			then = p.line
		}
	}
	return append([]string{then}, out...)
}

// podLine says what the kubelet reports of a pod's containers: ready,
// started, restarts and state.
func podLine(p *corev1.Pod) string {
	var parts []string
	for _, c := range p.Status.ContainerStatuses {
		state := "waiting"
		switch {
		case c.State.Running != nil:
			state = "running since " + c.State.Running.StartedAt.Format("15:04:05")
		case c.State.Terminated != nil:
			state = fmt.Sprintf("terminated (%d)", c.State.Terminated.ExitCode)
		case c.State.Waiting != nil:
			state = "waiting (" + c.State.Waiting.Reason + ")"
		}
		parts = append(parts, fmt.Sprintf("%s ready=%t started=%t restarts=%d %s", c.Name, c.Ready, ptr.Deref(c.Started, false), c.RestartCount, state))
	}
	return strings.Join(parts, "; ")
}

func (h *history) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	lines := make([]string, len(h.entries))
	for i, e := range h.entries {
		lines[i] = fmt.Sprintf("%7.2fs %s: %s", e.at.Sub(h.start).Seconds(), e.key, e.line)
	}
	return strings.Join(lines, "\n")
}
