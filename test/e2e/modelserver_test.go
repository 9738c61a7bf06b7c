package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/servingtls/tlstest"
)

// The ModelServer scenarios share one cluster and one operator process,
// each in a namespace of its own, and talk to them as a user does: with
// kubectl.
var operator struct {
	once    sync.Once
	cluster *localcluster.Cluster
	op      *localcluster.Process
	err     error
}

func runningOperator(t *testing.T) (*localcluster.Cluster, kubernetes.Interface) {
	t.Helper()
	operator.once.Do(func() {
		c, err := localcluster.Start(context.Background(), localcluster.Options{CRDDir: repoPath("config/crd/bases")})
		if err != nil {
			operator.err = err
			return
		}
		operator.cluster = c
		operator.op, operator.err = c.StartProcess("manager", managerBinary, []string{
			"manager",
			"--kubeconfig=" + c.Kubeconfig,
			"--metrics-bind-address=0",
			"--health-probe-bind-address=127.0.0.1:0",
			"--fetch-image=example.com/modelserver-operator:e2e",
		}, nil)
	})
	if operator.err != nil {
		t.Fatalf("start cluster and operator: %v", operator.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator log (tail):\n%s", operator.op.LogTail(60))
		}
	})
	cs, err := operator.cluster.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return operator.cluster, cs
}

func stopSharedOperator() {
	if operator.cluster != nil {
		operator.cluster.Stop()
	}
}

func TestApplyingTheSampleServesTheModel(t *testing.T) {
	c, _ := runningOperator(t)
	ns := kubectlNamespace(t, c)
	kubectl(t, c, "apply", "-n", ns, "-f", repoPath("config/samples/serving_v1alpha1_modelserver.yaml"))
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=60s")

	out := kubectl(t, c, "get", "-n", ns, "ms", "resnet")
	for _, want := range []string{"Ready", "2/2", "resnet", "http://resnet." + ns + ".svc:8501/v1/models/resnet"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get ms lacks %q:\n%s", want, out)
		}
	}
}

func TestChangingTheImageRollsPodsWithoutDroppingCapacity(t *testing.T) {
	c, cs := runningOperator(t)
	ns := kubectlNamespace(t, c)
	kubectl(t, c, "apply", "-n", ns, "-f", repoPath("config/samples/serving_v1alpha1_modelserver.yaml"))
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=60s")

	lowestReady := watchLowestReady(t, cs, ns, "resnet")
	kubectl(t, c, "patch", "-n", ns, "ms/resnet", "--type=merge", "-p", `{"spec":{"image":"tensorflow/serving:2.18.0"}}`)
	waitObserved(t, c, ns, "resnet")
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=60s")
	if lowest := lowestReady(); lowest < 2 {
		t.Errorf("ready replicas fell to %d during the rollout, want never below 2", lowest)
	}
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=serving"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.Containers[0].Image != "tensorflow/serving:2.18.0" {
			t.Errorf("serving pod %s still runs %s", p.Name, p.Spec.Containers[0].Image)
		}
	}
}

func TestChangingTheStorageURIFetchesAgainThenRollsThePods(t *testing.T) {
	c, cs := runningOperator(t)
	ns := kubectlNamespace(t, c)
	kubectl(t, c, "apply", "-n", ns, "-f", repoPath("config/samples/serving_v1alpha1_modelserver.yaml"))
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=60s")
	oldJob := kubectl(t, c, "get", "jobs", "-n", ns, "-o", "name")
	oldConfig := kubectl(t, c, "get", "-n", ns, "configmap/resnet-config", "-o", "jsonpath={.data.models\\.config}")

	lowestReady := watchLowestReady(t, cs, ns, "resnet")
	kubectl(t, c, "patch", "-n", ns, "ms/resnet", "--type=merge", "-p", `{"spec":{"model":{"storageUri":"s3://models/resnet-v2"}}}`)
	waitObserved(t, c, ns, "resnet")
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=60s")

	newJob := kubectl(t, c, "get", "jobs", "-n", ns, "-o", "name")
	if newJob == oldJob || strings.Contains(newJob, "\n") {
		t.Errorf("jobs after the change: %q (before: %q), want exactly one new Job", newJob, oldJob)
	}
	args := kubectl(t, c, "get", "-n", ns, newJob, "-o", "jsonpath={.spec.template.spec.containers[0].args}")
	if !strings.Contains(args, "s3://models/resnet-v2") {
		t.Errorf("new Job fetches %s", args)
	}
	newConfig := kubectl(t, c, "get", "-n", ns, "configmap/resnet-config", "-o", "jsonpath={.data.models\\.config}")
	if newConfig == oldConfig {
		t.Error("the model config still points at the old fetch")
	}
	if got := kubectl(t, c, "get", "-n", ns, "rs", "-o", "name"); strings.Count(got, "replicaset") < 2 {
		t.Errorf("no rollout: replica sets %q", got)
	}
	if lowest := lowestReady(); lowest < 2 {
		t.Errorf("ready replicas fell to %d while the new model was fetched and rolled out", lowest)
	}
}

// watchLowestReady watches a Deployment from now on; the function it
// returns stops the watch and gives the lowest ready count seen.
func watchLowestReady(t *testing.T, cs kubernetes.Interface, ns, name string) func() int32 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := cs.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	lowest := make(chan int32, 1)
	go func() {
		low := int32(1 << 30)
		for ev := range w.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok && ev.Type != watch.Deleted {
				low = min(low, d.Status.ReadyReplicas)
			}
		}
		lowest <- low
	}()
	return func() int32 { cancel(); return <-lowest }
}

func TestKubectlScaleChangesTheReplicas(t *testing.T) {
	c, _ := runningOperator(t)
	ns := kubectlNamespace(t, c)
	kubectl(t, c, "apply", "-n", ns, "-f", repoPath("config/samples/serving_v1alpha1_modelserver.yaml"))
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=60s")

	kubectl(t, c, "scale", "-n", ns, "ms/resnet", "--replicas=3")
	waitObserved(t, c, ns, "resnet")
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=60s")
	if got := kubectl(t, c, "get", "-n", ns, "deploy/resnet", "-o", "jsonpath={.status.readyReplicas}"); got != "3" {
		t.Errorf("deployment readyReplicas %s, want 3", got)
	}
	if got := kubectl(t, c, "get", "-n", ns, "ms/resnet", "-o", "jsonpath={.status.ready}"); got != "3/3" {
		t.Errorf("status.ready %s, want 3/3", got)
	}
}

func TestAFailingFetchIsReportedAndFixingTheSpecRecovers(t *testing.T) {
	c, _ := runningOperator(t)
	ns := kubectlNamespace(t, c)
	// The local cluster's simulated kubelet makes the fetch container exit
	// with code 3 and this message, as the fetcher does for a missing model.
	broken := `
apiVersion: serving.modelserver.dev/v1alpha1
kind: ModelServer
metadata:
  name: missing
spec:
  model:
    storageUri: s3://models/missing
  podTemplate:
    annotations:
      localcluster.modelserver.dev/fail: "NotFound: s3://models/missing: no objects under this prefix"
      localcluster.modelserver.dev/exit-code: "3"
`
	kubectlStdin(t, c, broken, "apply", "-n", ns, "-f", "-")
	kubectl(t, c, "wait", "-n", ns, "--for=jsonpath={.status.phase}=Failed", "ms/missing", "--timeout=60s")

	msg := kubectl(t, c, "get", "-n", ns, "ms/missing", "-o", "jsonpath={.status.message}")
	if !strings.Contains(msg, "s3://models/missing: no objects under this prefix") || !strings.Contains(msg, "NotFound") {
		t.Errorf("status.message %q does not carry the fetch Job's message", msg)
	}
	reason := kubectl(t, c, "get", "-n", ns, "ms/missing", "-o", `jsonpath={.status.conditions[?(@.type=="ModelFetched")].reason}`)
	if reason != "NotFound" {
		t.Errorf("ModelFetched reason %q, want NotFound", reason)
	}
	events := kubectl(t, c, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=missing,type=Warning", "-o", "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}")
	if !strings.Contains(events, "no objects under this prefix") {
		t.Errorf("no Warning event carries the failure; events:\n%s", events)
	}

	kubectl(t, c, "patch", "-n", ns, "ms/missing", "--type=json", "-p", `[{"op":"remove","path":"/spec/podTemplate/annotations"}]`)
	waitObserved(t, c, ns, "missing")
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/missing", "--timeout=60s")
}

func TestDeletingAModelServerRemovesEverythingItCreated(t *testing.T) {
	c, _ := runningOperator(t)
	ns := kubectlNamespace(t, c)
	kubectl(t, c, "apply", "-n", ns, "-f", repoPath("config/samples/serving_v1alpha1_modelserver.yaml"))
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=60s")
	// Something of the user's in the same namespace, which must survive.
	kubectl(t, c, "create", "configmap", "-n", ns, "users-own", "--from-literal=k=v")

	kubectl(t, c, "delete", "-n", ns, "ms/resnet", "--wait", "--timeout=60s")
	for _, kind := range []string{"deployments", "jobs", "services", "persistentvolumeclaims"} {
		if out := kubectl(t, c, "get", kind, "-n", ns, "-o", "name"); out != "" {
			t.Errorf("%s left after delete: %s", kind, out)
		}
	}
	if out := kubectl(t, c, "get", "configmaps", "-n", ns, "-l", "serving.modelserver.dev/modelserver", "-o", "name"); out != "" {
		t.Errorf("configmaps left after delete: %s", out)
	}
	if out := kubectl(t, c, "get", "secrets", "-n", ns, "-l", "owner=helm", "-o", "name"); out != "" {
		t.Errorf("release records left after delete: %s", out)
	}
	kubectl(t, c, "get", "configmap", "-n", ns, "users-own")
}

// waitObserved waits until the operator has reconciled the ModelServer's
// latest generation, so that a following wait for Ready is about it.
func waitObserved(t *testing.T, c *localcluster.Cluster, ns, name string) {
	t.Helper()
	gen := kubectl(t, c, "get", "-n", ns, "ms/"+name, "-o", "jsonpath={.metadata.generation}")
	kubectl(t, c, "wait", "-n", ns, "--for=jsonpath={.status.observedGeneration}="+gen, "ms/"+name, "--timeout=60s")
}

func kubectlNamespace(t *testing.T, c *localcluster.Cluster) string {
	t.Helper()
	name := fmt.Sprintf("e2e-%d", time.Now().UnixNano()%1_000_000_000)
	kubectl(t, c, "create", "namespace", name)
	// Every pod the chart renders must pass the restricted Pod Security
	// Standard; the apiserver refuses any that does not.
	kubectl(t, c, "label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted")
	return name
}

func kubectl(t *testing.T, c *localcluster.Cluster, args ...string) string {
	t.Helper()
	out, err := kubectlWith(c, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

func kubectlStdin(t *testing.T, c *localcluster.Cluster, stdin string, args ...string) {
	t.Helper()
	cmd := exec.Command(repoPath("bin/kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func kubectlWith(c *localcluster.Cluster, args ...string) (string, error) {
	cmd := exec.Command(repoPath("bin/kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// repoPath resolves a path from the repository root (tests run in test/e2e).
func repoPath(rel string) string {
	return filepath.Join("..", "..", rel)
}

// TestEverySampleBecomesReady applies each sample of config/samples, one
// per feature, as a user would, and waits for it to serve.
func TestEverySampleBecomesReady(t *testing.T) {
	c, cs := runningOperator(t)
	ns := kubectlNamespace(t, c)
	// The exposed sample names a PriorityClass; a cluster admin makes it.
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "model-serving"}, Value: 1000}
	if _, err := cs.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	samples, err := filepath.Glob(repoPath("config/samples/serving_v1alpha1_*.yaml"))
	if err != nil || len(samples) < 6 {
		t.Fatalf("samples %v: %v", samples, err)
	}
	for _, s := range samples {
		kubectl(t, c, "apply", "-n", ns, "-f", s)
	}
	// The exposed sample serves gRPC with the certificate of a Secret that
	// cert-manager would make: until it exists, nothing is created.
	kubectl(t, c, "wait", "-n", ns, "ms/resnet-exposed", "--timeout=60s",
		`--for=jsonpath={.status.conditions[?(@.type=="Deployed")].reason}=SecretNotFound`)
	crt, key := tlstest.CA(t, "issuer").Server(t, "resnet-exposed."+ns+".svc").WriteTo(t, t.TempDir())
	kubectl(t, c, "create", "secret", "tls", "-n", ns, "resnet-exposed-grpc", "--cert="+crt, "--key="+key)
	// The operator watches TLS Secrets (their metadata alone): the new one
	// wakes the ModelServer, where its look again would take a minute.
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet-exposed", "--timeout=45s")
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms", "--all", "--timeout=90s")
	if args := kubectl(t, c, "get", "-n", ns, "deploy", "resnet-exposed", "-o", "jsonpath={.spec.template.spec.initContainers[0].name} {.spec.template.spec.containers[0].args}"); !strings.HasPrefix(args, "tls-config ") || !strings.Contains(args, "--ssl_config_file=") {
		t.Errorf("the exposed sample's pods: %s, want tls-config first and the SSL config read", args)
	}
	if got := kubectl(t, c, "get", "-n", ns, "svc", "resnet-exposed", "-o", "jsonpath={.spec.trafficDistribution}"); got != "PreferSameZone" {
		t.Errorf("the exposed sample's Service prefers %q, want its client's zone (PreferSameZone)", got)
	}
	if got := kubectl(t, c, "get", "-n", ns, "deploy", "resnet-gpu", "-o", "jsonpath={.spec.strategy.rollingUpdate.maxSurge} {.spec.strategy.rollingUpdate.maxUnavailable}"); got != "0 1" {
		t.Errorf("the GPU sample's rolling update: maxSurge and maxUnavailable %q, want in place (0 1)", got)
	}
	if got := kubectl(t, c, "get", "-n", ns, "deploy", "resnet-autoscaled", "-o", "jsonpath={.spec.template.spec.initContainers[*].name} {.spec.template.spec.volumes[0].emptyDir.sizeLimit}"); got != "fetch-model 4Gi" {
		t.Errorf("the autoscaled sample's pods: %q, want each to fetch its own copy into an emptyDir of 4Gi", got)
	}
	// The disruption controller reads the sample's 25% of 2 pods as one
	// eviction at a time (rounded up), not none.
	if got := kubectl(t, c, "get", "-n", ns, "pdb", "resnet-autoscaled", "-o", "jsonpath={.spec.maxUnavailable}"); got != "25%" {
		t.Errorf("the autoscaled sample's disruption budget: maxUnavailable %q, want 25%%", got)
	}
	kubectl(t, c, "wait", "-n", ns, "pdb", "resnet-autoscaled", "--for=jsonpath={.status.disruptionsAllowed}=1", "--timeout=60s")
	if claims := kubectl(t, c, "get", "-n", ns, "pvc", "-o", "name"); strings.Contains(claims, "resnet-autoscaled") {
		t.Errorf("claims %s: the autoscaled sample's pods have copies of their own", claims)
	}
	out := kubectl(t, c, "get", "-n", ns, "ms")
	for _, name := range []string{"resnet-autoscaled", "resnet-gpu", "resnet-canary", "model-zoo", "resnet-exposed"} {
		if !strings.Contains(out, name) {
			t.Errorf("kubectl get ms lacks %s:\n%s", name, out)
		}
	}
	// Without the Gateway API and the Prometheus Operator here, the
	// exposed sample serves and says what it left out.
	warnings := kubectl(t, c, "get", "-n", ns, "ms", "resnet-exposed", "-o", "jsonpath={.status.warnings}")
	if !strings.Contains(warnings, "Gateway API") || !strings.Contains(warnings, "Prometheus Operator") {
		t.Errorf("warnings = %s", warnings)
	}
	// Nor is there an ingress controller: the sample's class is missing,
	// which it says. Once a controller takes the Ingress on (writes its
	// address), its URL is the model's from outside.
	if !strings.Contains(warnings, `no IngressClass \"nginx\"`) {
		t.Errorf("warnings = %s, want the missing IngressClass named", warnings)
	}
	kubectl(t, c, "patch", "-n", ns, "ingress", "resnet-exposed", "--subresource=status", "--type=merge",
		"-p", `{"status":{"loadBalancer":{"ingress":[{"ip":"198.18.0.20"}]}}}`)
	url := "http://resnet.models.example.com/v1/models/resnet-exposed"
	kubectl(t, c, "wait", "-n", ns, "ms/resnet-exposed", "--timeout=30s", "--for=jsonpath={.status.endpoints.external[0].rest}="+url)
	if wide := kubectl(t, c, "get", "-n", ns, "ms", "resnet-exposed", "-o", "wide"); !strings.Contains(wide, url) {
		t.Errorf("kubectl get ms -o wide lacks the URL from outside:\n%s", wide)
	}
}

// TestAPausedModelServerLeavesAHandMadeChangeUntilResumed: during an
// incident, a user pauses a ModelServer, changes its Deployment's image by
// hand and scales it; the operator leaves both (phase Paused, saying what
// waits) until the annotation goes, then makes the Deployment what the
// spec says, at the new scale.
func TestAPausedModelServerLeavesAHandMadeChangeUntilResumed(t *testing.T) {
	c, _ := runningOperator(t)
	ns := kubectlNamespace(t, c)
	kubectl(t, c, "apply", "-n", ns, "-f", repoPath("config/samples/serving_v1alpha1_modelserver.yaml"))
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=60s")
	image := kubectl(t, c, "get", "-n", ns, "deploy/resnet", "-o", "jsonpath={.spec.template.spec.containers[0].image}")

	kubectl(t, c, "annotate", "-n", ns, "ms/resnet", "serving.modelserver.dev/paused=true")
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Paused", "ms/resnet", "--timeout=30s")
	const hotfix = "tensorflow/serving:hotfix"
	kubectl(t, c, "patch", "-n", ns, "deploy/resnet", "--type=json", "-p", `[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"`+hotfix+`"}]`)
	kubectl(t, c, "scale", "-n", ns, "ms/resnet", "--replicas=3")
	kubectl(t, c, "wait", "-n", ns, "--for=jsonpath={.status.phase}=Paused", "ms/resnet", "--timeout=30s")
	if msg := kubectl(t, c, "get", "-n", ns, "ms/resnet", "-o", "jsonpath={.status.message}"); !strings.Contains(msg, "waits for it to resume") {
		t.Errorf("status.message %q; want what waits said", msg)
	}
	time.Sleep(3 * time.Second)
	if got := kubectl(t, c, "get", "-n", ns, "deploy/resnet", "-o", "jsonpath={.spec.template.spec.containers[0].image} {.spec.replicas}"); got != hotfix+" 2" {
		t.Errorf("paused, the Deployment has image and replicas %q; want the hand-made %q and the first 2", got, hotfix)
	}

	kubectl(t, c, "annotate", "-n", ns, "ms/resnet", "serving.modelserver.dev/paused-")
	waitObserved(t, c, ns, "resnet")
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=60s")
	if got := kubectl(t, c, "get", "-n", ns, "deploy/resnet", "-o", "jsonpath={.spec.template.spec.containers[0].image} {.spec.replicas}"); got != image+" 3" {
		t.Errorf("resumed, the Deployment has image and replicas %q; want %q", got, image+" 3")
	}
	if got := kubectl(t, c, "get", "-n", ns, "ms/resnet", "-o", `jsonpath={.status.conditions[?(@.type=="Paused")].status}`); got != "" {
		t.Errorf("resumed, the Paused condition is %q; want none", got)
	}
}
