package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// Scaling past the namespace's pod quota: the apiserver refuses the new
// pod at every retry, and the status says so, in the apiserver's words,
// rather than only that 2 of 3 pods are there.
func TestServingPodsTheQuotaRefusesAreNamedInTheStatus(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := readyModelServer(t, ns, "quota")
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}},
	}
	if err := env.client.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Replicas = ptr.To[int32](3)
	if err := env.client.Patch(ctx, ms, patch); err != nil {
		t.Fatal(err)
	}
	got := &servingv1alpha1.ModelServer{}
	eventually(t, 60*time.Second, "the refusal in the status", func(ctx context.Context) (bool, string) {
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return false, err.Error()
		}
		return strings.Contains(got.Status.Message, "serving pods cannot be created: ") && strings.Contains(got.Status.Message, "quota"),
			string(got.Status.Phase) + ": " + got.Status.Message
	})
	t.Logf("%s: %s", got.Status.Phase, got.Status.Message)
	if got.Status.Phase != servingv1alpha1.PhaseDeploying || strings.Contains(got.Status.Message, `pods "`) {
		t.Errorf("%s: %s; want Deploying, without the refused pod's name", got.Status.Phase, got.Status.Message)
	}
}

// A serving image that cannot be pulled: the pod waits, and once the
// rollout has stood still the status says why, in the kubelet's words.
// The kubelet alternates between pulling again and backing off; the
// status says the same either way, so that its retries cost no write.
// (Here the simulated kubelet is the test, writing the pod's status as
// the kubelet would; test/realnode has a real one fail a real pull.)
func TestAServingImageThatCannotBePulledIsNamedInTheStatus(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "nopull", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Replicas = ptr.To[int32](1)
		ms.Spec.PodTemplate.Annotations = map[string]string{localcluster.AnnotationNeverReady: "true"}
	})
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	eventually(t, 60*time.Second, "a running serving pod", func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := env.client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{values.LabelComponent: "serving"}); err != nil {
			return false, err.Error()
		}
		for i := range pods.Items {
			if pods.Items[i].Status.Phase == corev1.PodRunning {
				pod = &pods.Items[i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d serving pods, none running", len(pods.Items))
	})
	image := pod.Spec.Containers[0].Image
	const pullError = `rpc error: code = NotFound desc = failed to pull and unpack image: not found`
	kubelet := func(state corev1.ContainerState, ready corev1.ConditionStatus) {
		t.Helper()
		pod.Status.ContainerStatuses[0].State = state
		pod.Status.ContainerStatuses[0].Ready = ready == corev1.ConditionTrue
		for i, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				pod.Status.Conditions[i].Status = ready
			}
		}
		if err := env.client.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	kubelet(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: pullError}}, corev1.ConditionFalse)

	want := fmt.Sprintf("1 serving pod cannot pull image %q: %s", image, pullError)
	got := &servingv1alpha1.ModelServer{}
	eventually(t, 60*time.Second, "the failed pull in the status", func(ctx context.Context) (bool, string) {
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return false, err.Error()
		}
		return strings.HasSuffix(got.Status.Message, "; "+want), string(got.Status.Phase) + ": " + got.Status.Message
	})
	t.Logf("%s: %s", got.Status.Phase, got.Status.Message)
	if got.Status.Phase != servingv1alpha1.PhaseDeploying {
		t.Errorf("phase %s, want Deploying: the pull may yet succeed", got.Status.Phase)
	}

	// Backing off: the pods are read every 2 s here (twice the suite's
	// grace), and a change on the way to Ready is written once it has
	// stood for 10 s (progressHold): after 13 s, the status is as it was.
	kubelet(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "ImagePullBackOff", Message: fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s", image, pullError),
	}}, corev1.ConditionFalse)
	time.Sleep(13 * time.Second)
	after := &servingv1alpha1.ModelServer{}
	if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != got.ResourceVersion {
		t.Errorf("the status was rewritten while the kubelet backed off: %q, then %q", got.Status.Message, after.Status.Message)
	}

	// The image turns up: the pod runs and is ready, and so is the
	// ModelServer, with nothing left of the failure.
	kubelet(corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}, corev1.ConditionTrue)
	if ready := waitReady(t, ms); ready.Status.Message != "" {
		t.Errorf("Ready with message %q", ready.Status.Message)
	}
}
