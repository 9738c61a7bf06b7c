package controllers_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

// TestAModelOverTheMemoryLimitIsWarnedOf: a fetched model larger than the
// serving container's memory limit is warned of in status.warnings and
// by one Warning Event, before any pod is OOM-killed; a limit raised
// above it ends the warning.
func TestAModelOverTheMemoryLimitIsWarnedOf(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	ms := newModelServer(ns, "big", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.PodTemplate.Annotations = map[string]string{localcluster.AnnotationTerminationMessage: `{"versions":[1],"files":4,"bytes":3221225472,"digest":"sha256:aa"}`}
		ms.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
	})
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	const want = "spec.resources.limits.memory: 2Gi is less than the 3.0 GiB of model big, which TF Serving holds in memory"
	warned := func(ms *servingv1alpha1.ModelServer) bool {
		return slices.ContainsFunc(ms.Status.Warnings, func(w string) bool { return strings.HasPrefix(w, want) })
	}
	eventually(t, 30*time.Second, "the warning in the status", func(ctx context.Context) (bool, string) {
		got := get(t, ns, "big", &servingv1alpha1.ModelServer{})
		return warned(got), strings.Join(got.Status.Warnings, "; ")
	})
	eventually(t, 15*time.Second, "one ModelOverMemoryLimit Warning", func(ctx context.Context) (bool, string) {
		list := &corev1.EventList{}
		if err := env.client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		n := 0
		for _, e := range list.Items {
			if e.Reason == "ModelOverMemoryLimit" && e.Type == corev1.EventTypeWarning && strings.HasPrefix(e.Message, "S"+want[1:]) {
				n++
			}
		}
		return n == 1, eventsIn(t, ns)
	})

	got := get(t, ns, "big", &servingv1alpha1.ModelServer{})
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("4Gi")
	if err := env.client.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	waitReady(t, got)
	eventually(t, 30*time.Second, "no warning with a limit above the model", func(ctx context.Context) (bool, string) {
		got := get(t, ns, "big", &servingv1alpha1.ModelServer{})
		return !warned(got), strings.Join(got.Status.Warnings, "; ")
	})
}
