// Command demo shows the operator at work on this machine, with no cluster
// to bring: it starts a local control plane, the operator, a ModelServer,
// and prints what happens until it is Ready. `make demo` runs it;
// DEMO_EXIT_WHEN_READY=1 makes it exit 0 once Ready instead of staying up
// until Ctrl-C.
//
// Where the machine can run containers (localcluster.RealNodeSupport), the
// demo runs on a real node (realnode.go): the operator from its image,
// a real fetch from a real S3 server, and TF Serving's test double serving
// the model. Elsewhere, or with DEMO_SIMULATED=1, kwok plays the kubelet:
// it installs the CRD, runs the operator binary as its own process and
// applies the sample ModelServer, and no container runs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

// simulatedFetch is what the simulated kubelet reports for the fetch pod:
// the one-line summary a real `manager fetch` writes when it succeeds.
const simulatedFetch = `{"versions":[1],"files":3,"bytes":102445056,"digest":"sha256:5f1d6c2e0b8f4a9e7c3d2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e"}`

func main() {
	sample := flag.String("sample", "config/samples/serving_v1alpha1_modelserver.yaml", "the ModelServer to apply (simulated containers only)")
	crdDir := flag.String("crds", "config/crd/bases", "directory of the CRDs to install (simulated containers only)")
	manager := flag.String("manager", "", "operator binary to run (simulated containers only; default: build ./cmd/manager)")
	namespace := flag.String("namespace", "default", "namespace of the ModelServer")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up if the ModelServer is not Ready by then")
	flag.Parse()
	// The demo's clients log nothing worth showing; without a logger
	// controller-runtime prints a stack trace saying so.
	ctrllog.SetLogger(logr.Discard())

	d := &demo{start: time.Now(), out: os.Stdout}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	exitWhenReady := os.Getenv("DEMO_EXIT_WHEN_READY") == "1"
	var err error
	if why := whySimulated(); why == "" {
		err = d.runReal(ctx, *namespace, *timeout, exitWhenReady)
	} else {
		d.printf("Containers are simulated (%s): kwok plays the kubelet, so no container runs and nothing is downloaded.\n\n", why)
		err = d.run(ctx, *sample, *crdDir, *manager, *namespace, *timeout, exitWhenReady)
	}
	if d.cluster != nil {
		if d.realNode {
			d.say("stopping the local control plane and tearing the real node down")
		} else {
			d.say("stopping the operator and the local control plane")
		}
		d.cluster.Stop()
		if terr := d.cluster.TeardownError(); terr != nil && err == nil {
			err = fmt.Errorf("the real node's teardown: %w", terr)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		os.Exit(1)
	}
}

// whySimulated is why the demo cannot run on a real node, or "" when it
// can.
func whySimulated() string {
	if os.Getenv("DEMO_SIMULATED") == "1" {
		return "DEMO_SIMULATED=1"
	}
	if err := localcluster.RealNodeSupport(""); err != nil {
		return err.Error()
	}
	return ""
}

type demo struct {
	start    time.Time
	mu       sync.Mutex // serialises output lines
	out      io.Writer
	cluster  *localcluster.Cluster
	realNode bool
	op       *localcluster.Process // the operator, when it runs on this machine
	// readyEvent is closed once the Ready Event is printed: the operator
	// sends it just after the status that says Ready.
	readyEvent     chan struct{}
	readyEventOnce sync.Once
}

// say prints one timeline line: seconds since the start, then the text.
func (d *demo) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, _ = fmt.Fprintf(d.out, "[%6.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// printf prints to the terminal. A write that fails there has nowhere else
// to be reported, and the demo goes on without it; say does the same.
func (d *demo) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(d.out, format, args...)
}

func (d *demo) run(ctx context.Context, samplePath, crdDir, manager, ns string, timeout time.Duration, exitWhenReady bool) error {
	ms, err := readSample(samplePath)
	if err != nil {
		return err
	}
	ms.Namespace = ns
	dir, err := os.MkdirTemp("", "modelserver-demo-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if manager == "" {
		// A stable path lets go build skip the link when nothing changed.
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = dir
		}
		manager = filepath.Join(cache, "modelserver-operator", "demo", "manager")
		d.say("building the operator (go build -o %s ./cmd/manager)", manager)
		build := exec.CommandContext(ctx, "go", "build", "-o", manager, "./cmd/manager")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build the operator: %w", err)
		}
	}

	d.say("starting the local control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok")
	c, err := localcluster.Start(ctx, localcluster.Options{})
	if err != nil {
		return err
	}
	d.cluster = c
	d.say("control plane up with %d fake nodes (kwok plays the kubelet: no containers really run)", c.Nodes)

	if err := c.InstallCRDs(ctx, crdDir); err != nil {
		return err
	}
	d.say("installed the CRD modelservers.serving.modelserver.dev")

	d.op, err = c.StartProcess("manager", manager, []string{
		"manager",
		"--kubeconfig=" + c.Kubeconfig,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:0",
		"--fetch-image=ghcr.io/modelserver-dev/modelserver-operator:0.1.0",
	}, nil)
	if err != nil {
		return err
	}
	d.say("started the operator (log: %s)", d.op.LogFile())

	cl, cs, err := clients(c)
	if err != nil {
		return err
	}

	// The simulated kubelet ends the fetch pod with the summary a real
	// fetch leaves, so the status shows a model as it would on a cluster.
	if ms.Spec.PodTemplate.Annotations == nil {
		ms.Spec.PodTemplate.Annotations = map[string]string{}
	}
	ms.Spec.PodTemplate.Annotations[localcluster.AnnotationTerminationMessage] = simulatedFetch

	watchCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	go d.followPods(watchCtx, cs, ns, ms.Name)
	go d.followEvents(watchCtx, cs, ns, ms.Name)
	w, err := watchModelServer(watchCtx, cl, ms)
	if err != nil {
		return err
	}
	if err := cl.Create(ctx, ms); err != nil {
		w.Stop()
		return fmt.Errorf("apply %s: %w", samplePath, err)
	}
	d.say("applied ModelServer %s/%s from %s (model %s, %d replicas)", ns, ms.Name, samplePath, ms.Spec.Model.StorageURI, *ms.Spec.Replicas)

	ready, err := d.followModelServer(watchCtx, cl, ms, w)
	if err != nil {
		if errors.Is(watchCtx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("ModelServer not Ready within %s; operator log tail:\n%s", timeout, d.op.LogTail(30))
		}
		return err
	}
	cancel()
	d.status(ready)
	d.explore(ready, c.Kubeconfig, "The operator's log: "+d.op.LogFile(), "")
	if exitWhenReady {
		return nil
	}
	d.printf("\nThe cluster and the operator stay up until Ctrl-C.\n")
	select {
	case <-ctx.Done():
	case <-d.op.Exited():
		return fmt.Errorf("the operator exited: %v; log tail:\n%s", d.op.Err(), d.op.LogTail(30))
	}
	return nil
}

// clients are the typed and the ModelServer clients the demo watches with.
func clients(c *localcluster.Cluster) (client.WithWatch, kubernetes.Interface, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := servingv1alpha1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	cl, err := client.NewWithWatch(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	cs, err := c.Clientset()
	if err != nil {
		return nil, nil, err
	}
	return cl, cs, nil
}

// watchModelServer watches ms. Opened before ms is applied, the watch sees
// every phase it takes, the first one too: opened after, it would begin
// with whatever phase the operator has written by then.
func watchModelServer(ctx context.Context, cl client.WithWatch, ms *servingv1alpha1.ModelServer) (watch.Interface, error) {
	return cl.Watch(ctx, &servingv1alpha1.ModelServerList{}, client.InNamespace(ms.Namespace), client.MatchingFields{"metadata.name": ms.Name})
}

// followModelServer prints each change of phase, message or ready count
// seen by w, and by the watches that follow it when it ends, until the
// ModelServer is Ready for its current generation.
func (d *demo) followModelServer(ctx context.Context, cl client.WithWatch, ms *servingv1alpha1.ModelServer, w watch.Interface) (*servingv1alpha1.ModelServer, error) {
	var seen statusLines
	for {
		if w == nil {
			var err error
			if w, err = watchModelServer(ctx, cl, ms); err != nil {
				return nil, err
			}
		}
		for ev := range w.ResultChan() {
			got, ok := ev.Object.(*servingv1alpha1.ModelServer)
			if ev.Type == watch.Error || !ok {
				continue
			}
			if line, changed := seen.add(got.Status); changed {
				d.say("ModelServer %s: phase %s", got.Name, line)
			}
			if got.Status.Phase == servingv1alpha1.PhaseReady && got.Status.ObservedGeneration == got.Generation {
				w.Stop()
				took := time.Since(d.start)
				d.awaitReadyEvent(10 * time.Second)
				d.say("Ready after %s, through the phases %s", took.Round(100*time.Millisecond), strings.Join(seen.phases, " → "))
				return got, nil
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		w = nil
	}
}

// statusLines are the lines a ModelServer's statuses are shown as, and
// the phases they went through.
type statusLines struct {
	last   string
	phases []string
}

// add takes a status seen, and returns its line and whether it differs
// from the last one.
func (s *statusLines) add(st servingv1alpha1.ModelServerStatus) (string, bool) {
	msg := st.Message
	if st.Phase == "" {
		msg = "(the operator has not written a status yet)"
	}
	phase := string(orPending(st.Phase))
	line := fmt.Sprintf("%-9s ready %-4s %s", phase, orDash(st.Ready), msg)
	if line == s.last {
		return line, false
	}
	s.last = line
	if len(s.phases) == 0 || s.phases[len(s.phases)-1] != phase {
		s.phases = append(s.phases, phase)
	}
	return line, true
}

// followPods prints the ModelServer's pods as they change state: the
// fetch pod running and completing, serving pods becoming ready.
func (d *demo) followPods(ctx context.Context, cs kubernetes.Interface, ns, name string) {
	seen := map[string]string{}
	follow(ctx, func(ctx context.Context) (watch.Interface, error) {
		return cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + name})
	}, func(ev watch.Event) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return
		}
		state := podState(p)
		if ev.Type == watch.Deleted {
			state = "deleted"
		}
		if seen[p.Name] != state {
			seen[p.Name] = state
			d.say("  pod %s: %s", p.Name, state)
		}
	})
}

func podState(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "terminating"
	}
	if p.Status.Phase == corev1.PodRunning {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return "Running, Ready"
			}
		}
		return "Running, not ready yet"
	}
	if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodPending {
		// kwok reports no container states; a real kubelet does, and they
		// show where a pod's start-up time goes.
		if w := startingState(p); w != "" {
			return "on " + p.Spec.NodeName + ", " + w
		}
		return "scheduled on " + p.Spec.NodeName
	}
	return string(p.Status.Phase)
}

// startingState is what a pending pod's containers are doing: an init
// container running (the serving pods wait for the model in one), or why
// a container waits.
func startingState(p *corev1.Pod) string {
	for _, c := range p.Status.InitContainerStatuses {
		switch {
		case c.State.Running != nil:
			return "init container " + c.Name + " running"
		case c.State.Waiting != nil && c.State.Waiting.Reason != "":
			return c.State.Waiting.Reason
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Waiting != nil && c.State.Waiting.Reason != "" {
			return c.State.Waiting.Reason
		}
	}
	return ""
}

// followEvents prints the operator's Events about the ModelServer.
func (d *demo) followEvents(ctx context.Context, cs kubernetes.Interface, ns, name string) {
	seen := map[string]bool{}
	follow(ctx, func(ctx context.Context) (watch.Interface, error) {
		return cs.EventsV1().Events(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + name})
	}, func(ev watch.Event) {
		e, ok := ev.Object.(*eventsv1.Event)
		if !ok || ev.Type == watch.Deleted || seen[e.Name] || e.Regarding.Kind != "ModelServer" {
			return
		}
		seen[e.Name] = true
		d.say("  event %s %s: %s", e.Type, e.Reason, e.Note)
		if e.Reason == string(servingv1alpha1.PhaseReady) {
			d.readyEventOnce.Do(func() { close(d.readyEvents()) })
		}
	})
}

// awaitReadyEvent waits up to timeout for the Ready Event to be printed,
// so that the timeline shows it before the demo ends.
func (d *demo) awaitReadyEvent(timeout time.Duration) {
	select {
	case <-d.readyEvents():
	case <-time.After(timeout):
	}
}

func (d *demo) readyEvents() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.readyEvent == nil {
		d.readyEvent = make(chan struct{})
	}
	return d.readyEvent
}

// follow runs a watch until ctx ends, starting it again when the server
// closes it.
func follow(ctx context.Context, start func(context.Context) (watch.Interface, error), handle func(watch.Event)) {
	for ctx.Err() == nil {
		w, err := start(ctx)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			handle(ev)
		}
	}
}

// status tells where the model is served and what was fetched, from the
// ModelServer's status.
func (d *demo) status(ms *servingv1alpha1.ModelServer) {
	st := ms.Status
	d.printf("\nModelServer %s/%s is Ready: %s serving pods.\n", ms.Namespace, ms.Name, st.Ready)
	if st.Endpoints != nil {
		d.printf("\nEndpoints (inside the cluster):\n  gRPC  %s\n  REST  %s\n", st.Endpoints.GRPC, st.Endpoints.REST)
	}
	if m := st.Model; m != nil && m.Digest != "" {
		d.printf("\nModel %s: versions %v, %d bytes, %s\n", m.Name, m.Versions, m.SizeBytes, m.Digest)
	}
	if st.Release != nil {
		d.printf("Helm release %s, revision %d, chart %s\n", st.Release.Name, st.Release.Revision, st.Release.ChartVersion)
	}
}

// explore tells how to look around with kubectl; extra holds more
// commands, one per line, indented as the others.
func (d *demo) explore(ms *servingv1alpha1.ModelServer, kubeconfig, operatorLog, extra string) {
	d.printf(`
Explore it with kubectl (bin/kubectl is built by make tools):

  export KUBECONFIG=%s
  export PATH=$PWD/bin:$PATH
  kubectl get modelservers
  kubectl describe ms %[2]s
  kubectl get deploy,svc,job,pvc,configmap -l app.kubernetes.io/instance=%[2]s
  kubectl events --for ms/%[2]s
  kubectl scale ms/%[2]s --replicas=3
  kubectl explain modelserver.spec.model.storageUri
%[3]s
%[4]s
`, kubeconfig, ms.Name, extra, operatorLog)
}

func readSample(path string) (*servingv1alpha1.ModelServer, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ms := &servingv1alpha1.ModelServer{}
	if err := yaml.UnmarshalStrict(raw, ms); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if ms.Spec.Replicas == nil {
		one := int32(1)
		ms.Spec.Replicas = &one
	}
	return ms, nil
}

func orPending(p servingv1alpha1.Phase) servingv1alpha1.Phase {
	if p == "" {
		return servingv1alpha1.PhasePending
	}
	return p
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
