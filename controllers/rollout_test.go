package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
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
