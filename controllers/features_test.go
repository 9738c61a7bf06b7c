package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// servingPods lists the serving pods of a ModelServer.
func servingPods(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.client.List(context.Background(), pods, client.InNamespace(ns),
		client.MatchingLabels{"app.kubernetes.io/instance": name, "app.kubernetes.io/component": "serving"}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func TestAGPUModelServerRunsTheGPUImageOnGPUNodesOnly(t *testing.T) {
	ns := newNamespace(t)
	ms := newModelServer(ns, "gpu", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Resources.Limits = corev1.ResourceList{values.GPUResource: resource.MustParse("1")}
		ms.Spec.Batching = &servingv1alpha1.Batching{MaxBatchSize: 16}
	})
	if err := env.client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ms)
	pods := servingPods(t, ns, ms.Name)
	if len(pods) != 2 {
		t.Fatalf("%d serving pods, want 2", len(pods))
	}
	for _, p := range pods {
		node := get(t, "", p.Spec.NodeName, &corev1.Node{})
		if _, gpu := node.Status.Capacity[values.GPUResource]; !gpu {
			t.Errorf("pod %s runs on %s, which has no GPU", p.Name, node.Name)
		}
		if img := p.Spec.Containers[0].Image; img != servingv1alpha1.DefaultImage+"-gpu" {
			t.Errorf("pod %s runs %s, want the GPU image", p.Name, img)
		}
		if args := strings.Join(p.Spec.Containers[0].Args, " "); !strings.Contains(args, "--enable_batching=true") {
			t.Errorf("pod %s args lack batching: %s", p.Name, args)
		}
	}
	cm := get(t, ns, "gpu-config", &corev1.ConfigMap{})
	if !strings.Contains(cm.Data[values.BatchingConfigFile], "max_batch_size { value: 16 }") {
		t.Errorf("batching.config = %q", cm.Data[values.BatchingConfigFile])
	}
}

// createAutoscaled creates a ModelServer in a new namespace whose
// autoscaler keeps 2 to maxReplicas pods, and waits for it to be Ready.
func createAutoscaled(t *testing.T, name string, maxReplicas int32) (string, *servingv1alpha1.ModelServer) {
	t.Helper()
	ns := newNamespace(t)
	ms := newModelServer(ns, name, func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Replicas = nil
		ms.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
		ms.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MinReplicas: ptrTo[int32](2), MaxReplicas: maxReplicas, TargetCPUUtilizationPercentage: ptrTo[int32](70)}
	})
	if err := env.client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	return ns, waitReady(t, ms)
}

func TestAnAutoscaledModelServerIsScaledByItsAutoscaler(t *testing.T) {
	ns, got := createAutoscaled(t, "auto", 4)
	if got.Status.Replicas != 2 || got.Status.ReadyReplicas != 2 {
		t.Errorf("status replicas %d ready %d, want the autoscaler's minimum, 2", got.Status.Replicas, got.Status.ReadyReplicas)
	}
	hpa := get(t, ns, "auto", &autoscalingv2.HorizontalPodAutoscaler{})
	if hpa.Spec.ScaleTargetRef.Name != "auto" || hpa.Spec.MaxReplicas != 4 {
		t.Errorf("hpa = %+v", hpa.Spec)
	}
	get(t, ns, "auto", &policyv1.PodDisruptionBudget{})

	// The autoscaler's choice stands: the operator does not scale back.
	d := get(t, ns, "auto", &appsv1.Deployment{})
	d.Spec.Replicas = ptrTo[int32](3)
	if err := env.client.Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "status follows the autoscaler", func(ctx context.Context) (bool, string) {
		cur := &servingv1alpha1.ModelServer{}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(got), cur); err != nil {
			return false, err.Error()
		}
		return cur.Status.Replicas == 3 && cur.Status.ReadyReplicas == 3, cur.Status.Ready
	})
	time.Sleep(2 * time.Second)
	if r := *get(t, ns, "auto", &appsv1.Deployment{}).Spec.Replicas; r != 3 {
		t.Errorf("deployment replicas = %d after the autoscaler set 3: the operator fought it", r)
	}
	// A spec change upgrades the release; the autoscaler's count stays.
	cur := get(t, ns, "auto", &servingv1alpha1.ModelServer{})
	cur.Spec.Service.Annotations = map[string]string{"example.com/upgraded": "yes"}
	if err := env.client.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	waitReady(t, cur)
	if svc := get(t, ns, "auto", &corev1.Service{}); svc.Annotations["example.com/upgraded"] != "yes" {
		t.Fatal("the release was not upgraded")
	}
	if r := *get(t, ns, "auto", &appsv1.Deployment{}).Spec.Replicas; r != 3 {
		t.Errorf("deployment replicas = %d after an upgrade: the release reset the autoscaler's 3", r)
	}

	// spec.replicas (what kubectl scale sets) is refused while autoscaling.
	cur = get(t, ns, "auto", &servingv1alpha1.ModelServer{})
	cur.Spec.Replicas = ptrTo[int32](5)
	if err := env.client.Update(context.Background(), cur); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "mutually exclusive") {
		t.Errorf("setting replicas with autoscaling: %v, want Invalid naming the rule", err)
	}
}

// An autoscaler's scale is capacity, not a deployment: the ModelServer
// stays Ready through it, with no Event, while its pods are counted.
func TestAnAutoscalersScaleLeavesTheModelServerReady(t *testing.T) {
	ns, ms := createAutoscaled(t, "scaled", 6)
	// The status settles (a Ready write is followed by none) before the
	// history starts.
	time.Sleep(time.Second)
	history := statusHistory(t, ns, "scaled")
	eventsBefore := len(modelServerEvents(t, ns))

	for _, replicas := range []int32{5, 2} {
		// The way an autoscaler sets the count: the scale subresource.
		d := get(t, ns, "scaled", &appsv1.Deployment{})
		scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
		if err := env.client.SubResource("scale").Update(context.Background(), d, client.WithSubResourceBody(scale)); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, fmt.Sprintf("%d pods ready", replicas), func(ctx context.Context) (bool, string) {
			cur := &servingv1alpha1.ModelServer{}
			if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), cur); err != nil {
				return false, err.Error()
			}
			return cur.Status.Ready == fmt.Sprintf("%d/%d", replicas, replicas), cur.Status.Ready
		})
	}
	for _, h := range history() {
		if !strings.HasPrefix(h, string(servingv1alpha1.PhaseReady)+" ") {
			t.Errorf("the ModelServer left Ready while its autoscaler scaled it; its statuses:\n  %s", strings.Join(history(), "\n  "))
			break
		}
	}
	if events := modelServerEvents(t, ns); len(events) != eventsBefore {
		t.Errorf("%d Events while the autoscaler scaled, want none; all of them:\n  %s", len(events)-eventsBefore, strings.Join(events, "\n  "))
	}
}

// A new pod template under an autoscaler, here the one `kubectl rollout
// restart` makes, is a rollout and not the autoscaler's scale: the
// ModelServer is Deploying while its pods are replaced, then Ready again.
func TestARestartOfAnAutoscaledModelServersPodsIsARollout(t *testing.T) {
	ns, ms := createAutoscaled(t, "restarted", 4)
	time.Sleep(time.Second)
	history := statusHistory(t, ns, "restarted")
	before := map[string]bool{}
	for _, p := range servingPods(t, ns, ms.Name) {
		before[p.Name] = true
	}

	d := get(t, ns, "restarted", &appsv1.Deployment{})
	restart := client.MergeFrom(d.DeepCopy())
	d.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": time.Now().Format(time.RFC3339)}
	if err := env.client.Patch(context.Background(), d, restart); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "Ready with only new pods", func(ctx context.Context) (bool, string) {
		cur := &servingv1alpha1.ModelServer{}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), cur); err != nil {
			return false, err.Error()
		}
		pods := servingPods(t, ns, ms.Name)
		for _, p := range pods {
			if before[p.Name] {
				return false, "an old pod is left: " + p.Name
			}
		}
		return cur.Status.Phase == servingv1alpha1.PhaseReady && len(pods) == 2, fmt.Sprintf("%s, %d pods", cur.Status.Phase, len(pods))
	})
	seen := history()
	if !slices.ContainsFunc(seen, func(h string) bool { return strings.HasPrefix(h, string(servingv1alpha1.PhaseDeploying)+" ") }) {
		t.Errorf("the restart's rollout was not told as Deploying; the statuses written:\n  %s", strings.Join(seen, "\n  "))
	}
}

// statusHistory records each status the ModelServer is written with from
// now on, as "phase ready-count (Available: reason)"; the function returns
// those seen so far.
func statusHistory(t *testing.T, ns, name string) func() []string {
	t.Helper()
	wc, err := client.NewWithWatch(env.cluster.Config, client.Options{Scheme: env.scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &servingv1alpha1.ModelServerList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen []string
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			ms, ok := ev.Object.(*servingv1alpha1.ModelServer)
			if !ok {
				continue
			}
			entry := fmt.Sprintf("%s %s", ms.Status.Phase, ms.Status.Ready)
			if c := meta.FindStatusCondition(ms.Status.Conditions, servingv1alpha1.ConditionAvailable); c != nil {
				entry += fmt.Sprintf(" (Available: %s)", c.Message)
			}
			mu.Lock()
			if len(seen) == 0 || seen[len(seen)-1] != entry {
				seen = append(seen, entry)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// modelServerEvents lists the Events about ModelServers in namespace ns,
// one a line.
func modelServerEvents(t *testing.T, ns string) []string {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.client.List(context.Background(), list, client.InNamespace(ns), client.MatchingFields{"involvedObject.kind": "ModelServer"}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
	}
	return out
}

func TestSwitchingToAutoscalingKeepsThePodsServing(t *testing.T) {
	ns := newNamespace(t)
	ms := newModelServer(ns, "switch")
	if err := env.client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	got := waitReady(t, ms)

	lowest := int32(2)
	stop := watchDeployment(ns, "switch", func(d *appsv1.Deployment) {
		if d.Spec.Replicas != nil {
			lowest = min(lowest, *d.Spec.Replicas)
		}
	})
	got.Spec.Replicas = nil
	got.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	got.Spec.Autoscaling = &servingv1alpha1.Autoscaling{MinReplicas: ptrTo[int32](2), MaxReplicas: 5, TargetCPUUtilizationPercentage: ptrTo[int32](70)}
	if err := env.client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	waitReady(t, got)
	get(t, ns, "switch", &autoscalingv2.HorizontalPodAutoscaler{})
	stop()
	if lowest < 2 {
		t.Errorf("the Deployment was scaled down to %d while switching to the autoscaler's minimum of 2", lowest)
	}
}

// watchDeployment reads the Deployment ns/name every 20 ms and hands it
// to each, until the returned stop, which returns once each is done with
// its last.
func watchDeployment(ns, name string, each func(*appsv1.Deployment)) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			d := &appsv1.Deployment{}
			if err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err == nil {
				each(d)
			}
		}
	}()
	return func() { close(quit); <-done }
}

// TestChangingVersionLabelsReconfiguresWithoutRestartingPods: labels
// moved among the versions served reach the pods through TF Serving's
// config polling; a version policy that serves other versions needs
// them fetched first, and where that fetch finds the model the pods have
// (its digest), they serve it from their copy.
func TestChangingVersionLabelsReconfiguresWithoutRestartingPods(t *testing.T) {
	ns := newNamespace(t)
	ms := newModelServer(ns, "versions", func(ms *servingv1alpha1.ModelServer) {
		// What the fetch reports it found: versions 1, 2 and 3.
		ms.Spec.PodTemplate.Annotations = map[string]string{
			"localcluster.modelserver.dev/termination-message": `{"versions":[1,2,3],"files":9,"bytes":4096,"digest":"sha256:abc"}`,
		}
		ms.Spec.Model.VersionPolicy = &servingv1alpha1.VersionPolicy{Latest: &servingv1alpha1.LatestVersions{NumVersions: 2}}
		ms.Spec.Model.VersionLabels = map[string]int64{"stable": 2, "canary": 3}
	})
	if err := env.client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	got := waitReady(t, ms)
	if m := got.Status.Model; m == nil || !slices.Equal(m.Versions, []int64{1, 2, 3}) || !slices.Equal(m.ServedVersions, []int64{2, 3}) || m.VersionLabels["canary"] != 3 {
		t.Fatalf("status.model = %+v, want versions 1-3, served 2 and 3, canary 3", got.Status.Model)
	}
	before := get(t, ns, "versions", &appsv1.Deployment{})
	podsBefore := podNames(t, ns, "versions")
	fetched := got.Status.Model.FetchedGeneration

	got.Spec.Model.VersionLabels = map[string]int64{"stable": 3}
	if err := env.client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the labels in the model config", func(ctx context.Context) (bool, string) {
		config := get(t, ns, "versions-config", &corev1.ConfigMap{}).Data[values.ModelConfigFile]
		return strings.Contains(config, "key: \"stable\"\n      value: 3") && !strings.Contains(config, `"canary"`), config
	})
	got = waitReady(t, got)
	if m := got.Status.Model; m.VersionLabels["stable"] != 3 || len(m.VersionLabels) != 1 || m.FetchedGeneration != fetched {
		t.Errorf("status.model = %+v, want stable 3 alone, from generation %s", m, fetched)
	}
	after := get(t, ns, "versions", &appsv1.Deployment{})
	if after.Generation != before.Generation {
		t.Errorf("the Deployment changed (generation %d → %d): pods would restart for a change TF Serving polls", before.Generation, after.Generation)
	}
	if p := podNames(t, ns, "versions"); p != podsBefore {
		t.Errorf("pods changed: %s → %s", podsBefore, p)
	}

	got.Spec.Model.VersionPolicy = &servingv1alpha1.VersionPolicy{Specific: &servingv1alpha1.SpecificVersions{Versions: []int64{1, 3}}}
	if err := env.client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "versions 1 and 3 fetched and served", func(ctx context.Context) (bool, string) {
		m := get(t, ns, "versions", &servingv1alpha1.ModelServer{}).Status.Model
		return m != nil && m.FetchedGeneration != fetched && slices.Equal(m.ServedVersions, []int64{1, 3}), fmt.Sprintf("%+v", m)
	})
	// The fetch found the model it had (its digest): the pods serve the
	// new policy from the copy they have, without a roll.
	got = waitReady(t, got)
	config := get(t, ns, "versions-config", &corev1.ConfigMap{}).Data[values.ModelConfigFile]
	if !strings.Contains(config, "versions: 1\n        versions: 3") || got.Status.Model.ServedGeneration != fetched || !strings.Contains(config, fetched) {
		t.Errorf("status.model.servedGeneration %q, model config:\n%s\nwant the new policy, served from %s", got.Status.Model.ServedGeneration, config, fetched)
	}
	if now := get(t, ns, "versions", &appsv1.Deployment{}); now.Generation != before.Generation {
		t.Errorf("the Deployment changed (generation %d → %d) for a fetch that found the model the pods have", before.Generation, now.Generation)
	}
	job := get(t, ns, names.FetchJob("versions", got.Status.Model.FetchedGeneration), &batchv1.Job{})
	if args := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, values.VersionsFlag+" 1,3 ") {
		t.Errorf("the new fetch Job's args %q; want %s 1,3", args, values.VersionsFlag)
	}
}

func TestSeveralModelsAreServedFromOneDeployment(t *testing.T) {
	ns := newNamespace(t)
	ms := newModelServer(ns, "zoo", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model = nil
		ms.Spec.Models = []servingv1alpha1.ModelSpec{
			{Name: "resnet", StorageURI: "s3://models/resnet"},
			{Name: "bert", StorageURI: "gs://models/bert"},
		}
		ms.Spec.Ingress = &servingv1alpha1.IngressSpec{Host: "zoo.example.com"}
		ms.Spec.NetworkPolicy = &servingv1alpha1.NetworkPolicySpec{AllowedNamespaces: []string{"clients"}}
		ms.Spec.Service.Annotations = map[string]string{"example.com/team": "vision"}
	})
	if err := env.client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	got := waitReady(t, ms)
	if len(got.Status.Models) != 2 || got.Status.Model != nil {
		t.Fatalf("status models %+v model %+v, want two entries in models", got.Status.Models, got.Status.Model)
	}
	for i, name := range []string{"resnet", "bert"} {
		url := "http://zoo." + ns + ".svc:8501/v1/models/" + name
		if m := got.Status.Models[i]; m.Name != name || m.Fetch != "Succeeded" || m.FetchedGeneration == "" || m.Endpoint != url {
			t.Errorf("status.models[%d] = %+v, want %s fetched, at %s", i, m, name, url)
		}
	}
	if got.Status.ModelNames != "resnet,bert" {
		t.Errorf("status.modelNames = %q, the Model column of kubectl get", got.Status.ModelNames)
	}
	jobs := &batchv1.JobList{}
	if err := env.client.List(context.Background(), jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 2 {
		t.Errorf("%d fetch Jobs, want one per model", len(jobs.Items))
	}
	config := get(t, ns, "zoo-config", &corev1.ConfigMap{}).Data[values.ModelConfigFile]
	if !strings.Contains(config, `name: "resnet"`) || !strings.Contains(config, `name: "bert"`) {
		t.Errorf("model config lacks a model:\n%s", config)
	}
	if len(get(t, ns, "zoo", &appsv1.Deployment{}).Spec.Template.Spec.Containers) != 1 {
		t.Error("not one TF Serving container")
	}
	if svc := get(t, ns, "zoo", &corev1.Service{}); svc.Annotations["example.com/team"] != "vision" {
		t.Errorf("service annotations = %v", svc.Annotations)
	}
	if ing := get(t, ns, "zoo", &networkingv1.Ingress{}); ing.Spec.Rules[0].Host != "zoo.example.com" {
		t.Errorf("ingress = %+v", ing.Spec)
	}
	np := get(t, ns, "zoo", &networkingv1.NetworkPolicy{})
	if vals := np.Spec.Ingress[0].From[0].NamespaceSelector.MatchExpressions[0].Values; !slices.Equal(vals, []string{"clients", ns}) && !slices.Equal(vals, []string{ns, "clients"}) {
		t.Errorf("network policy namespaces = %q", vals)
	}

	// A third model is fetched while the other two keep being served.
	got.Spec.Models = append(got.Spec.Models, servingv1alpha1.ModelSpec{Name: "t5", StorageURI: "s3://models/t5"})
	if err := env.client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	got = waitReady(t, got)
	if len(got.Status.Models) != 3 || got.Status.ReadyReplicas != 2 {
		t.Errorf("after adding a model: %d models, %d ready", len(got.Status.Models), got.Status.ReadyReplicas)
	}
}

// gatewayRouteCRDs stand for the Gateway API's route kinds: enough of
// them for the apiserver to serve the kinds.
func gatewayRouteCRDs() []*apiextensionsv1.CustomResourceDefinition {
	return gatewayCRDs("HTTPRoute", "GRPCRoute")
}

// waitWarning waits for a Warning Event of reason in namespace ns whose
// message holds part.
func waitWarning(t *testing.T, ns, reason, part string) {
	t.Helper()
	waitEvent(t, ns, corev1.EventTypeWarning, reason, part)
}

// waitEvent waits for an Event of the type and reason in ns whose message
// has part.
func waitEvent(t *testing.T, ns, kind, reason, part string) {
	t.Helper()
	eventually(t, 15*time.Second, "Event "+kind+" "+reason, func(ctx context.Context) (bool, string) {
		list := &corev1.EventList{}
		if err := env.client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
			return e.Reason == reason && e.Type == kind && strings.Contains(e.Message, part)
		}), eventsIn(t, ns)
	})
}

// makeGateway makes a Gateway of the listeners, with the address its
// implementation would have given it, once the apiserver serves the kind
// (a CRD just made takes a moment).
func makeGateway(t *testing.T, ns, name, address string, listeners ...any) {
	t.Helper()
	gw := gatewayAPIObject(ns, "Gateway", name)
	gw.Object["spec"] = map[string]any{"gatewayClassName": "example", "listeners": listeners}
	gw.Object["status"] = map[string]any{"addresses": []any{map[string]any{"type": "IPAddress", "value": address}}}
	eventually(t, 30*time.Second, "the Gateway made", func(ctx context.Context) (bool, string) {
		err := env.client.Create(ctx, gw)
		return err == nil, fmt.Sprint(err)
	})
}

// installGatewayAPI makes the CRDs, or finds them made: they outlive
// the test, as an installed Gateway API would.
func installGatewayAPI(t *testing.T, crds ...*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	for _, crd := range crds {
		if err := env.client.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// gatewayCRDs stand for the Gateway API's kinds, without a status
// subresource: a test writes the status a Gateway controller would.
func gatewayCRDs(kinds ...string) []*apiextensionsv1.CustomResourceDefinition {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, kind := range kinds {
		plural := strings.ToLower(kind) + "s"
		if stem, ok := strings.CutSuffix(strings.ToLower(kind), "y"); ok {
			plural = stem + "ies" // backendtlspolicies
		}
		crds = append(crds, &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".gateway.networking.k8s.io",
				// As the Gateway API's own CRDs do: *.k8s.io groups need it.
				Annotations: map[string]string{"api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/2466"}},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "gateway.networking.k8s.io",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptrTo(true),
					}},
				}},
			},
		})
	}
	return crds
}

func TestGatewayRoutesAppearOnceTheGatewayAPIIsInstalled(t *testing.T) {
	ns := newNamespace(t)
	ms := newModelServer(ns, "routed", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Gateway = &servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "gw"}}}
	})
	if err := env.client.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	got := waitReady(t, ms)
	if len(got.Status.Warnings) != 2 || !strings.Contains(got.Status.Warnings[0], "install the Gateway API") {
		t.Fatalf("warnings = %q, want one per missing route kind", got.Status.Warnings)
	}

	installGatewayAPI(t, gatewayRouteCRDs()...)
	eventually(t, 60*time.Second, "routes rendered", func(ctx context.Context) (bool, string) {
		for _, kind := range []string{"HTTPRoute", "GRPCRoute"} {
			u := gatewayAPIObject(ns, kind, "routed")
			if err := env.client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
				return false, fmt.Sprintf("%s: %v", kind, err)
			}
		}
		cur := &servingv1alpha1.ModelServer{}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), cur); err != nil {
			return false, err.Error()
		}
		return len(cur.Status.Warnings) == 0, fmt.Sprintf("warnings %q", cur.Status.Warnings)
	})
}

// TestTheStatusListsTheWaysInFromOutsideOnceTheyCarryTraffic: an
// Ingress, Gateway API routes and a LoadBalancer Service each show in
// status.endpoints.external once what serves them says they carry the
// model's traffic; an IngressClass that does not exist and a route a
// Gateway refuses are warned of, and the warnings go once mended. It
// follows the Gateway API test, which needs the route kinds missing.
func TestTheStatusListsTheWaysInFromOutsideOnceTheyCarryTraffic(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	installGatewayAPI(t, gatewayCRDs("HTTPRoute", "GRPCRoute", "Gateway")...)
	makeGateway(t, ns, "public", "198.18.0.30",
		map[string]any{"name": "web", "protocol": "HTTP", "port": int64(80)},
		map[string]any{"name": "secure", "protocol": "HTTPS", "port": int64(443), "hostname": "*.example.test"})

	ms := newModelServer(ns, "reach", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Ingress = &servingv1alpha1.IngressSpec{Host: "reach.example.test", ClassName: "edge", TLSSecretName: "reach-cert"}
		ms.Spec.Gateway = &servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "public"}},
			Hostnames: []string{"reach.example.test"}}
		ms.Spec.Service.Type = corev1.ServiceTypeLoadBalancer
	})
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ms)
	status := func(cond func(*servingv1alpha1.ModelServer) bool, what string) *servingv1alpha1.ModelServer {
		t.Helper()
		got := &servingv1alpha1.ModelServer{}
		eventually(t, 30*time.Second, what, func(ctx context.Context) (bool, string) {
			if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
				return false, err.Error()
			}
			return cond(got), fmt.Sprintf("external %+v, warnings %q", got.Status.Endpoints, got.Status.Warnings)
		})
		return got
	}
	warned := func(part string) func(*servingv1alpha1.ModelServer) bool {
		return func(got *servingv1alpha1.ModelServer) bool {
			return slices.ContainsFunc(got.Status.Warnings, func(w string) bool { return strings.Contains(w, part) })
		}
	}
	external := func(got *servingv1alpha1.ModelServer) []servingv1alpha1.ExternalEndpoint {
		if got.Status.Endpoints == nil {
			return nil
		}
		return got.Status.Endpoints.External
	}

	// Nothing carries traffic yet; no ingress controller has the class.
	got := status(warned(`spec.ingress.className: the cluster has no IngressClass "edge"`), "the missing IngressClass warned of")
	if e := external(got); len(e) != 0 {
		t.Errorf("external %+v before anything gave an address", e)
	}
	waitWarning(t, ns, "IngressClassNotFound", "")

	// The Gateway refuses the HTTPRoute, then takes up both routes.
	setParents := func(kind string, accepted metav1.Condition) {
		t.Helper()
		setGatewayStatus(t, gatewayAPIObject(ns, kind, "reach"), map[string]any{"parents": []any{map[string]any{
			"parentRef": map[string]any{"name": "public"}, "controllerName": "example.test/gateway",
			"conditions": conditionsJSON(t, []metav1.Condition{accepted}),
		}}})
	}
	setParents("HTTPRoute", metav1.Condition{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "NotAllowedByListeners", Message: "no listener allows routes from this namespace"})
	refused := "HTTPRoute reach: Gateway " + ns + "/public did not accept it (NotAllowedByListeners): no listener allows routes from this namespace"
	status(warned(refused), "the refused route warned of")
	waitWarning(t, ns, "RouteNotAccepted", "NotAllowedByListeners")
	for _, kind := range []string{"HTTPRoute", "GRPCRoute"} {
		setParents(kind, metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"})
	}
	viaGateway := servingv1alpha1.ExternalEndpoint{Via: "Gateway " + ns + "/public", REST: "https://reach.example.test/v1/models/reach", GRPC: "reach.example.test:443"}
	status(func(got *servingv1alpha1.ModelServer) bool {
		return slices.Equal(external(got), []servingv1alpha1.ExternalEndpoint{viaGateway}) && !warned("HTTPRoute")(got)
	}, "the Gateway listed")

	// The class is made: nothing is left to look at again.
	class := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "edge"}, Spec: networkingv1.IngressClassSpec{Controller: "example.test/ingress"}}
	if err := env.client.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), class) })
	got = status(func(got *servingv1alpha1.ModelServer) bool { return !warned("IngressClass")(got) }, "the warning gone once the class exists")
	if len(got.Status.Warnings) != 0 {
		t.Errorf("warnings %q once nothing stands in the way", got.Status.Warnings)
	}

	// The ingress controller gives the Ingress its address: the watch of
	// the Ingress wakes the ModelServer.
	ing := get(t, ns, "reach", &networkingv1.Ingress{})
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "198.18.0.20"}}
	if err := env.client.Status().Update(ctx, ing); err != nil {
		t.Fatal(err)
	}
	viaIngress := servingv1alpha1.ExternalEndpoint{Via: "Ingress", REST: "https://reach.example.test/v1/models/reach"}
	status(func(got *servingv1alpha1.ModelServer) bool {
		return slices.Equal(external(got), []servingv1alpha1.ExternalEndpoint{viaIngress, viaGateway})
	}, "the Ingress listed")

	// A load balancer is given to the Service.
	svc := get(t, ns, "reach", &corev1.Service{})
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.18.0.21"}}
	if err := env.client.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	viaLB := servingv1alpha1.ExternalEndpoint{Via: "LoadBalancer", REST: "http://198.18.0.21:8501/v1/models/reach", GRPC: "198.18.0.21:8500"}
	got = status(func(got *servingv1alpha1.ModelServer) bool {
		return slices.Equal(external(got), []servingv1alpha1.ExternalEndpoint{viaIngress, viaGateway, viaLB})
	}, "the load balancer listed")

	// A Gateway named that does not exist (a typo) would never take the
	// routes up: said at once.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Gateway.ParentRefs = append(got.Spec.Gateway.ParentRefs, servingv1alpha1.GatewayParentRef{Name: "pubilc"})
	if err := env.client.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	status(warned("spec.gateway.parentRefs[1]: Gateway "+ns+"/pubilc does not exist"), "the missing Gateway warned of")
}

// TestRoutesThatTakeAnotherModelServersRequestsAreWarnedOf: two
// ModelServers whose GRPCRoutes take the same hostname on one Gateway are
// each told (the Gateway serves gRPC to one of them alone), with a
// RouteShared Warning: the one made first, its routes taken up and
// nothing left to look at again, by the other's being made. Once one
// routes its REST API alone, which the other's models' paths do not
// take, neither is.
func TestRoutesThatTakeAnotherModelServersRequestsAreWarnedOf(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	installGatewayAPI(t, gatewayCRDs("HTTPRoute", "GRPCRoute", "Gateway")...)
	makeGateway(t, ns, "gw", "198.18.0.33", map[string]any{"name": "web", "protocol": "HTTP", "port": int64(80)})
	gateway := func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Gateway = &servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "gw"}}, Hostnames: []string{"shared.example.test"}}
	}
	first, second := newModelServer(ns, "first", gateway), newModelServer(ns, "second", gateway)
	if err := env.client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitReady(t, first)
	for _, kind := range []string{"HTTPRoute", "GRPCRoute"} {
		setGatewayStatus(t, gatewayAPIObject(ns, kind, "first"), map[string]any{"parents": []any{map[string]any{
			"parentRef": map[string]any{"name": "gw"}, "controllerName": "example.test/gateway",
			"conditions": conditionsJSON(t, []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}}),
		}}})
	}
	waitStatus(t, first, "the first's routes taken up", func(got *servingv1alpha1.ModelServer) bool {
		return got.Status.Endpoints != nil && len(got.Status.Endpoints.External) == 1 && got.Status.Endpoints.External[0].GRPC == "shared.example.test:80"
	})
	if err := env.client.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	shared := func(other string) func(*servingv1alpha1.ModelServer) bool {
		return func(got *servingv1alpha1.ModelServer) bool {
			return slices.ContainsFunc(got.Status.Warnings, func(w string) bool {
				return strings.Contains(w, "ModelServer "+ns+"/"+other+" routes gRPC through Gateway "+ns+"/gw for hostname shared.example.test too")
			})
		}
	}
	waitStatus(t, second, "the second told of the first", shared("first"))
	waitStatus(t, first, "the first told of the second", shared("second"))
	waitWarning(t, ns, "RouteShared", "")

	got := get(t, ns, "second", &servingv1alpha1.ModelServer{})
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Gateway.GRPC = ptrTo(false)
	if err := env.client.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	for _, ms := range []*servingv1alpha1.ModelServer{first, second} {
		waitStatus(t, ms, ms.Name+" told of nothing", func(got *servingv1alpha1.ModelServer) bool {
			return len(got.Status.Warnings) == 0 && got.Status.Phase == servingv1alpha1.PhaseReady
		})
	}
}

// TestTheRoutesAndTheirGatewayAreWatched: once the cluster serves the
// Gateway API, the operator watches the routes and the Gateways, so a
// ModelServer waiting for its Gateway asks for no look again (its
// reconcile returns no wait), and yet hears at once of each step: the
// Gateway made after it, the routes accepted, the address the Gateway is
// given last; then it tells of the URLs in an Event, and of their end
// when the Gateway loses its address.
func TestTheRoutesAndTheirGatewayAreWatched(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	installGatewayAPI(t, gatewayCRDs("HTTPRoute", "GRPCRoute", "Gateway")...)
	ms := newModelServer(ns, "watched", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Gateway = &servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "late"}}}
	})
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ms)
	asksForNoLookAgain := func(what string) {
		t.Helper()
		// The manager reconciles the ModelServer beside this call: a
		// status write of one can conflict with the other's.
		eventually(t, 15*time.Second, what+": no look again asked for", func(ctx context.Context) (bool, string) {
			result, err := env.reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)})
			return err == nil && result.RequeueAfter == 0, fmt.Sprintf("look again in %v (%v)", result.RequeueAfter, err)
		})
	}
	waitStatus(t, ms, "the missing Gateway told of", func(got *servingv1alpha1.ModelServer) bool {
		return slices.ContainsFunc(got.Status.Warnings, func(w string) bool { return strings.Contains(w, "Gateway "+ns+"/late does not exist") })
	})
	asksForNoLookAgain("the Gateway missing")

	makeGateway(t, ns, "late", "", map[string]any{"name": "web", "protocol": "HTTP", "port": int64(80)})
	waitStatus(t, ms, "the Gateway's making heard of", func(got *servingv1alpha1.ModelServer) bool { return len(got.Status.Warnings) == 0 })
	asksForNoLookAgain("the routes not yet accepted")

	for _, kind := range []string{"HTTPRoute", "GRPCRoute"} {
		setGatewayStatus(t, gatewayAPIObject(ns, kind, "watched"), map[string]any{"parents": []any{map[string]any{
			"parentRef": map[string]any{"name": "late"}, "controllerName": "example.test/gateway",
			"conditions": conditionsJSON(t, []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}}),
		}}})
	}
	asksForNoLookAgain("the routes accepted, the Gateway without an address")

	setGatewayStatus(t, gatewayAPIObject(ns, "Gateway", "late"), map[string]any{"addresses": []any{map[string]any{"type": "IPAddress", "value": "198.18.0.34"}}})
	got := waitStatus(t, ms, "the Gateway's address heard of", func(got *servingv1alpha1.ModelServer) bool {
		return got.Status.Endpoints != nil && len(got.Status.Endpoints.External) == 1 && got.Status.Endpoints.External[0].GRPC == "198.18.0.34:80"
	})
	rest := got.Status.Endpoints.External[0].REST
	if !strings.HasPrefix(rest, "http://198.18.0.34") {
		t.Errorf("REST URL %q, want the Gateway's address", rest)
	}
	waitEvent(t, ns, corev1.EventTypeNormal, "Exposed", "Reachable from outside the cluster through Gateway "+ns+"/late: REST API at "+rest+", gRPC API at 198.18.0.34:80.")
	asksForNoLookAgain("the URLs listed")

	// The Gateway loses its address (its load balancer gone): the way in
	// goes from the status, and an Event says so.
	setGatewayStatus(t, gatewayAPIObject(ns, "Gateway", "late"), map[string]any{"addresses": []any{}})
	waitStatus(t, ms, "the address's loss heard of", func(got *servingv1alpha1.ModelServer) bool {
		return got.Status.Endpoints != nil && len(got.Status.Endpoints.External) == 0
	})
	waitEvent(t, ns, corev1.EventTypeNormal, "NoLongerExposed", "No longer reachable from outside the cluster through Gateway "+ns+"/late.")
}

// TestARequestTimeoutTheClustersGatewayAPIDropsIsWarnedOf: a Gateway API
// before v1.2 has no timeouts in its HTTPRoute, and the apiserver prunes
// spec.gateway.requestTimeout's without an error. Here the route loses
// them as it would there (the suite's stand-in CRDs keep any field): the
// status and a Warning say so, not a silent default.
func TestARequestTimeoutTheClustersGatewayAPIDropsIsWarnedOf(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	installGatewayAPI(t, gatewayCRDs("HTTPRoute", "GRPCRoute", "Gateway")...)
	ms := newModelServer(ns, "timed", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Gateway = &servingv1alpha1.GatewaySpec{ParentRefs: []servingv1alpha1.GatewayParentRef{{Name: "gw"}},
			RequestTimeout: &metav1.Duration{Duration: 90 * time.Second}}
	})
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ms)
	route := gatewayAPIObject(ns, "HTTPRoute", "timed")
	eventually(t, 15*time.Second, "the route's timeout pruned", func(ctx context.Context) (bool, string) {
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(route), route); err != nil {
			return false, err.Error()
		}
		rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
		if len(rules) == 0 {
			return false, "no rules"
		}
		delete(rules[0].(map[string]any), "timeouts")
		if err := unstructured.SetNestedSlice(route.Object, rules, "spec", "rules"); err != nil {
			return false, err.Error()
		}
		err := env.client.Update(ctx, route)
		return err == nil, fmt.Sprint(err)
	})
	const said = "spec.gateway.requestTimeout: HTTPRoute timed has no timeouts: the cluster's Gateway API lacks them (they came in v1.2), and the apiserver dropped 1m30s"
	waitStatus(t, ms, "the dropped timeout in the warnings", func(got *servingv1alpha1.ModelServer) bool {
		return slices.ContainsFunc(got.Status.Warnings, func(w string) bool { return strings.HasPrefix(w, said) })
	})
	waitWarning(t, ns, "RouteFieldDropped", "HTTPRoute timed has no timeouts")
}

// TestExtraServerFlagsReachTheServerAndOneItLacksIsWarnedOf: extra args
// follow the operator's flags in the serving container; a flag TF Serving
// lacks is named in status.warnings, which needs no look again (it changes
// only with the spec); a change of them rolls the pods and clears the
// warning.
func TestExtraServerFlagsReachTheServerAndOneItLacksIsWarnedOf(t *testing.T) {
	ctx := context.Background()
	r := newProcessReconciler(t, nil)
	ms := createUnmanaged(t, "flags", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.ExtraArgs = []string{"--rest_api_num_threads=8", "--rest_api_timeout_ms=5000"}
	})
	got := reconcileUntilReady(t, r, ms)
	want := []string{"spec.extraArgs[1]: tensorflow_model_server 2.19 has no flag --rest_api_timeout_ms; TF Serving ignores a flag it does not have"}
	if !slices.Equal(got.Status.Warnings, want) {
		t.Errorf("warnings %q, want %q", got.Status.Warnings, want)
	}
	if result, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ms)}); err != nil || result.RequeueAfter != 0 {
		t.Errorf("Ready with a flag warned of: look again in %v (%v), want never", result.RequeueAfter, err)
	}
	d := get(t, ms.Namespace, ms.Name, &appsv1.Deployment{})
	args := d.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--model_config_file=/etc/modelserver/models.config") || !slices.Equal(args[len(args)-2:], ms.Spec.ExtraArgs) {
		t.Errorf("serving args %q: want the operator's, then %q", args, ms.Spec.ExtraArgs)
	}

	got.Spec.ExtraArgs = []string{"--rest_api_num_threads=8", "--rest_api_timeout_in_ms=5000"}
	if err := env.client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	got = reconcileUntilReady(t, r, got)
	if len(got.Status.Warnings) != 0 {
		t.Errorf("warnings %q after the flag was mended", got.Status.Warnings)
	}
	after := get(t, ms.Namespace, ms.Name, &appsv1.Deployment{})
	if args := after.Spec.Template.Spec.Containers[0].Args; args[len(args)-1] != "--rest_api_timeout_in_ms=5000" {
		t.Errorf("serving args %q after the change", args)
	}
	if after.Spec.Template.Annotations["checksum/config"] == d.Spec.Template.Annotations["checksum/config"] {
		t.Error("the pods' checksum did not change with their flags")
	}
}

// TestServingPodsRunWithTheRuntimeClassAndAMissingOneIsNamed: the serving
// pods carry spec.podTemplate.runtimeClassName, the fetch pod does not;
// a runtime class the cluster lacks is named in the status, from the
// Deployment's refused pods, and once it is created the ModelServer
// becomes Ready.
func TestServingPodsRunWithTheRuntimeClassAndAMissingOneIsNamed(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	class := "gpu-runtime-" + ns
	ms := newModelServer(ns, "runtime", func(ms *servingv1alpha1.ModelServer) { ms.Spec.PodTemplate.RuntimeClassName = class })
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the missing runtime class named", func(ctx context.Context) (bool, string) {
		got := &servingv1alpha1.ModelServer{}
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return false, err.Error()
		}
		return strings.Contains(got.Status.Message, `RuntimeClass "`+class+`" not found`), string(got.Status.Phase) + ": " + got.Status.Message
	})
	t.Logf("status.message: %s", get(t, ns, "runtime", &servingv1alpha1.ModelServer{}).Status.Message)
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Handler: "runc"}
	if err := env.client.Create(ctx, rc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), rc) })
	waitReady(t, ms)
	d := get(t, ns, "runtime", &appsv1.Deployment{})
	if got := d.Spec.Template.Spec.RuntimeClassName; got == nil || *got != class {
		t.Errorf("serving pods' runtime class %v, want %q", got, class)
	}
	var jobs batchv1.JobList
	if err := env.client.List(ctx, &jobs, client.InNamespace(ns)); err != nil || len(jobs.Items) == 0 {
		t.Fatalf("fetch Jobs: %v (%d)", err, len(jobs.Items))
	}
	if rc := jobs.Items[0].Spec.Template.Spec.RuntimeClassName; rc != nil {
		t.Errorf("the fetch pod runs with runtime class %q", *rc)
	}
}

// TestARolloutInPlaceReplacesThePodsWithoutASurge: spec.rollout reaches
// the Deployment's rolling update, and changing it alone replaces no pod;
// then a change that rolls the pods replaces them in place, never running
// more than the count asked for (a GPU pool with no room for one more).
// A rolling update changed on the Deployment is put back.
func TestARolloutInPlaceReplacesThePodsWithoutASurge(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ms := newModelServer(ns, "inplace", func(ms *servingv1alpha1.ModelServer) { ms.Spec.Replicas = ptr.To[int32](3) })
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	got := waitReady(t, ms)
	before := get(t, ns, ms.Name, &appsv1.Deployment{})
	podsBefore := podNames(t, ns, ms.Name)

	got.Spec.Rollout = &servingv1alpha1.Rollout{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromString("34%"))}
	if err := env.client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the rolling update set", func(context.Context) (bool, string) {
		ru := get(t, ns, ms.Name, &appsv1.Deployment{}).Spec.Strategy.RollingUpdate
		return ru != nil && ru.MaxSurge.String() == "0" && ru.MaxUnavailable.String() == "34%", fmt.Sprintf("%+v", ru)
	})
	got = waitReady(t, got)
	if after := get(t, ns, ms.Name, &appsv1.Deployment{}); !equality.Semantic.DeepEqual(after.Spec.Template, before.Spec.Template) {
		t.Error("spec.rollout changed the pod template: the pods would roll for how they roll")
	}
	if p := podNames(t, ns, ms.Name); p != podsBefore {
		t.Errorf("pods changed: %s → %s", podsBefore, p)
	}

	// Count the pods while the roll runs: the Deployment's status, as
	// its controller counts them, never above 3.
	var peak int32
	stop := watchDeployment(ns, ms.Name, func(d *appsv1.Deployment) { peak = max(peak, d.Status.Replicas) })
	generation := get(t, ns, ms.Name, &appsv1.Deployment{}).Generation
	got.Spec.ExtraArgs = []string{"--rest_api_timeout_in_ms=10000"}
	if err := env.client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the pods replaced", func(context.Context) (bool, string) {
		d := get(t, ns, ms.Name, &appsv1.Deployment{})
		return d.Generation > generation && d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == 3 && d.Status.Replicas == 3 && d.Status.ReadyReplicas == 3,
			fmt.Sprintf("generation %d (was %d): %d updated of %d, %d ready", d.Generation, generation, d.Status.UpdatedReplicas, d.Status.Replicas, d.Status.ReadyReplicas)
	})
	stop()
	if peak > 3 {
		t.Errorf("%d pods ran during the roll: maxSurge 0 lets none run above the 3 asked for", peak)
	}
	waitReady(t, got)

	// Someone puts the surge back on the Deployment: the ModelServer's
	// rolling update is restored.
	d := get(t, ns, ms.Name, &appsv1.Deployment{})
	d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(1))
	if err := env.client.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the rolling update restored", func(context.Context) (bool, string) {
		ru := get(t, ns, ms.Name, &appsv1.Deployment{}).Spec.Strategy.RollingUpdate
		return ru != nil && ru.MaxSurge.String() == "0", fmt.Sprintf("%+v", ru)
	})
}
