package localcluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

// Most tests share one cluster, each in a namespace of its own; starting a
// control plane costs seconds, not milliseconds.
var shared struct {
	once    sync.Once
	cluster *localcluster.Cluster
	err     error
}

func TestMain(m *testing.M) {
	if os.Getenv(holdClusterEnv) != "" {
		holdCluster()
		return
	}
	code := m.Run()
	if shared.cluster != nil {
		shared.cluster.Stop()
	}
	os.Exit(code)
}

func sharedCluster(t *testing.T) kubernetes.Interface {
	t.Helper()
	shared.once.Do(func() {
		shared.cluster, shared.err = localcluster.Start(context.Background(), localcluster.Options{AuditedUser: auditedUser, Logf: t.Logf})
	})
	if shared.err != nil {
		t.Fatalf("start shared cluster: %v", shared.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(shared.cluster.LogTails(30))
		}
	})
	return clientset(t, shared.cluster)
}

func clientset(t *testing.T, c *localcluster.Cluster) kubernetes.Interface {
	t.Helper()
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func namespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// eventually polls cond until it holds, failing the test with the last
// observation after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, seen, err := cond(ctx)
		last = seen
		if err != nil {
			last = err.Error()
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s; last seen: %s", what, timeout, last)
	}
}

func podTemplate(annotations map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "demo"}, Annotations: annotations},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "main",
				Image: "registry.invalid/demo:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("100m"),
					corev1.ResourceMemory: resource.MustParse("64Mi"),
				}},
			}},
		},
	}
}

func deployment(name string, replicas int32, annotations map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "demo"}},
			Template: podTemplate(annotations),
		},
	}
}

func job(name string, annotations map[string]string) *batchv1.Job {
	tmpl := podTemplate(annotations)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: tmpl},
	}
}

func TestDeploymentBecomesReadyAndJobSucceeds(t *testing.T) {
	cs := sharedCluster(t)
	ns := namespace(t, cs)
	ctx := context.Background()

	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment("web", 2, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := job("fetch", map[string]string{localcluster.AnnotationTerminationMessage: `{"versions":[1]}`})
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, done, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, time.Minute, "deployment web has 2 ready replicas", func(ctx context.Context) (bool, string, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return d.Status.ReadyReplicas == 2, fmt.Sprintf("readyReplicas=%d", d.Status.ReadyReplicas), nil
	})
	eventually(t, time.Minute, "job fetch succeeded", func(ctx context.Context) (bool, string, error) {
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, "fetch", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return j.Status.Succeeded == 1, fmt.Sprintf("succeeded=%d failed=%d", j.Status.Succeeded, j.Status.Failed), nil
	})
	if msg := terminationMessage(t, cs, ns, "job-name=fetch"); msg != `{"versions":[1]}` {
		t.Errorf("termination message of the job's pod = %q, want the annotated one", msg)
	}
}

func TestInjectedJobFailureIsVisibleInPodTerminationState(t *testing.T) {
	cs := sharedCluster(t)
	ns := namespace(t, cs)
	ctx := context.Background()

	failing := job("fetch", map[string]string{
		localcluster.AnnotationFail:     "AccessDenied: s3://models/resnet: 403 Forbidden",
		localcluster.AnnotationExitCode: "3",
	})
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, failing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "job fetch failed", func(ctx context.Context) (bool, string, error) {
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, "fetch", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return j.Status.Failed >= 1, fmt.Sprintf("succeeded=%d failed=%d", j.Status.Succeeded, j.Status.Failed), nil
	})
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=fetch"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("list job pods: %v (%d pods)", err, len(pods.Items))
	}
	term := pods.Items[0].Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 3 || term.Message != "AccessDenied: s3://models/resnet: 403 Forbidden" {
		t.Errorf("container terminated state = %+v, want exit code 3 and the injected message", term)
	}
}

func TestNeverReadyPodRunsButIsNotReady(t *testing.T) {
	cs := sharedCluster(t)
	ns := namespace(t, cs)
	ctx := context.Background()

	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment("stuck", 1, map[string]string{localcluster.AnnotationNeverReady: "true"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "pod of deployment stuck is Running", func(ctx context.Context) (bool, string, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=demo"})
		if err != nil || len(pods.Items) == 0 {
			return false, "no pod yet", err
		}
		return pods.Items[0].Status.Phase == corev1.PodRunning, string(pods.Items[0].Status.Phase), nil
	})
	// Give the simulated kubelet time to (wrongly) mark it Ready.
	time.Sleep(2 * time.Second)
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "stuck", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.ReadyReplicas != 0 || d.Status.Replicas != 1 {
		t.Errorf("deployment status replicas=%d ready=%d, want 1 and 0", d.Status.Replicas, d.Status.ReadyReplicas)
	}
}

func TestGPUPodsLandOnlyOnGPUNodes(t *testing.T) {
	cs := sharedCluster(t)
	ns := namespace(t, cs)
	ctx := context.Background()

	d := deployment("gpu", 2, nil)
	d.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{localcluster.GPUResource: resource.MustParse("1")}
	d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: string(localcluster.GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Without the toleration the taint keeps pods off the GPU node, and
	// without the GPU request nothing draws them to it; a pod asking for a
	// GPU but not tolerating the taint cannot be scheduled anywhere.
	eventually(t, time.Minute, "gpu deployment ready", func(ctx context.Context) (bool, string, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "gpu", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return d.Status.ReadyReplicas == 2, fmt.Sprintf("readyReplicas=%d", d.Status.ReadyReplicas), nil
	})
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=demo"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		node, err := cs.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node.Labels["nvidia.com/gpu.present"] != "true" {
			t.Errorf("pod %s requesting a GPU was placed on %s, which has no GPU", p.Name, node.Name)
		}
	}
}

func TestClaimsOfTheDefaultClassAreBound(t *testing.T) {
	cs := sharedCluster(t)
	ns := namespace(t, cs)
	ctx := context.Background()

	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "models"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "claim models bound", func(ctx context.Context) (bool, string, error) {
		got, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "models", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return got.Status.Phase == corev1.ClaimBound, fmt.Sprintf("phase=%s class=%v", got.Status.Phase, ptr.Deref(got.Spec.StorageClassName, "")), nil
	})
}

func TestPodSecurityAdmissionIsEnforced(t *testing.T) {
	cs := sharedCluster(t)
	ns := namespace(t, cs)
	ctx := context.Background()

	nsObj, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if _, err := cs.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "privileged"}, Spec: podTemplate(nil).Spec}
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err == nil {
		t.Fatal("a privileged pod was admitted into a namespace that enforces the restricted standard")
	}
	t.Logf("rejected as expected: %v", err)
}

func TestTwoClustersRunAtOnce(t *testing.T) {
	var wg sync.WaitGroup
	clusters := make([]*localcluster.Cluster, 2)
	errs := make([]error, 2)
	for i := range clusters {
		wg.Go(func() {
			clusters[i], errs[i] = localcluster.Start(context.Background(), localcluster.Options{
				NodePools: []localcluster.NodePool{{Name: fmt.Sprintf("c%d-node", i), Count: 1, CPU: "4", Memory: "8Gi", Pods: 20}},
			})
		})
	}
	wg.Wait()
	for i, c := range clusters {
		if c != nil {
			t.Cleanup(c.Stop)
		}
		if errs[i] != nil {
			t.Fatalf("cluster %d: %v", i, errs[i])
		}
	}
	if clusters[0].Config.Host == clusters[1].Config.Host {
		t.Fatalf("both clusters serve on %s", clusters[0].Config.Host)
	}
	for i, c := range clusters {
		nodes, err := clientset(t, c).CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("c%d-node-0", i)
		if len(nodes.Items) != 1 || nodes.Items[0].Name != want {
			t.Errorf("cluster %d nodes = %v, want only %s", i, nodes.Items, want)
		}
	}
}

func terminationMessage(t *testing.T, cs kubernetes.Interface, ns, selector string) string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("list pods %s: %v (%d pods)", selector, err, len(pods.Items))
	}
	statuses := pods.Items[0].Status.ContainerStatuses
	if len(statuses) == 0 || statuses[0].State.Terminated == nil {
		t.Fatalf("pod %s has not terminated: %+v", pods.Items[0].Name, statuses)
	}
	return statuses[0].State.Terminated.Message
}

// A restarted apiserver serves the same data on the same address, and a
// client made before the restart carries on once it is back.
func TestRestartedAPIServerKeepsItsAddressAndData(t *testing.T) {
	c := localcluster.ForTest(t, localcluster.Options{
		NodePools: []localcluster.NodePool{{Name: "restart-node", Count: 1, CPU: "4", Memory: "8Gi", Pods: 20}},
	})
	cs := clientset(t, c)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before-restart"}, Data: map[string]string{"k": "v"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartAPIServer(ctx, 5*time.Second, time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "before-restart", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read after the restart: %v", err)
	}
	if got.Data["k"] != "v" {
		t.Errorf("data after the restart: %v", got.Data)
	}
	logs, err := filepath.Glob(filepath.Join(c.Dir, "logs", "kube-apiserver.log*"))
	if err != nil || len(logs) != 2 {
		t.Errorf("apiserver logs %v, want the log of each run", logs)
	}
}
