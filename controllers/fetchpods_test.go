package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// A busy Job controller marks a Job complete seconds after its pod has
// exited; the model is in place from the pod's exit, and the ModelServer
// says so then. Here the Job controller cannot write the Job's status at
// all, so the ModelServer can only become Ready from what its pod says.
func TestAFetchIsDoneWhenItsPodSucceedsBeforeTheJobSaysSo(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	holdJobStatus(t, ns)

	ms := newModelServer(ns, "early")
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	got := waitReady(t, ms)

	jobs := &batchv1.JobList{}
	if err := env.client.List(ctx, jobs, client.InNamespace(ns), client.MatchingLabels{values.LabelComponent: values.ComponentFetch}); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		t.Fatalf("%d fetch Jobs, want 1", len(jobs.Items))
	}
	if s := status.FetchStateOf(&jobs.Items[0]); s != status.FetchRunning {
		t.Fatalf("the fetch Job's conditions say %s: the Job controller was not held, so this test shows nothing", s)
	}
	if m := got.Status.Model; m == nil || m.Fetch != string(status.FetchSucceeded) || m.FetchedGeneration == "" {
		t.Errorf("status.model = %+v, want the fetch succeeded", m)
	}
	// A later reconcile, woken here by a label on the Service, still sees
	// only the pod's word, and must not take the fetch back.
	svc := get(t, ns, "early", &corev1.Service{})
	patch := client.MergeFrom(svc.DeepCopy())
	svc.Labels["example.com/poke"] = "1"
	if err := env.client.Patch(ctx, svc, patch); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		time.Sleep(time.Second)
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != servingv1alpha1.PhaseReady {
			t.Fatalf("phase %s after Ready: %s", got.Status.Phase, got.Status.Message)
		}
	}
}

// holdJobStatus makes the apiserver refuse every write of a Job's status
// in ns, as long as the test runs: the Job controller then creates a Job's
// pod but never records what became of it.
func holdJobStatus(t *testing.T, ns string) {
	t.Helper()
	const heldMessage = "Job status held by the test"
	ctx := context.Background()
	name := "hold-job-status-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptrTo(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs/status"},
						},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: heldMessage}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := env.client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := env.client.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("remove %s: %v", obj.GetName(), err)
			}
		})
	}

	// The apiserver takes a moment to apply a new policy. A Job that the
	// Job controller leaves alone shows when it does.
	probe := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
		Spec: batchv1.JobSpec{
			ManagedBy: ptrTo("example.com/nobody"),
			Suspend:   ptrTo(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "example.com/none"}},
			}},
		},
	}
	if err := env.client.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the policy holding Job status", func(ctx context.Context) (bool, string) {
		// Admission sees even an empty patch.
		err := env.client.Status().Patch(ctx, probe, client.RawPatch(types.MergePatchType, []byte("{}")))
		if err == nil {
			return false, "a status write was let through"
		}
		return strings.Contains(err.Error(), heldMessage), err.Error()
	})
	if err := env.client.Delete(ctx, probe, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
}
