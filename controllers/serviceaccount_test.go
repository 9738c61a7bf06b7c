package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// TestAnOCIModelsFetchMountsTheServiceAccountsPullSecrets: with no pull
// secret in the pod template, an oci:// model's fetch Job mounts those of
// the pods' service account, as the pods get them; a pull secret added to
// the account later makes a new Job that mounts it too.
func TestAnOCIModelsFetchMountsTheServiceAccountsPullSecrets(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	sa := &corev1.ServiceAccount{
		ObjectMeta:       metav1.ObjectMeta{Namespace: ns, Name: "puller"},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}},
	}
	if err := env.client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	ms := newModelServer(ns, "sa-pulls", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model.StorageURI = "oci://registry.example.com/models/resnet:v1"
		ms.Spec.PodTemplate.ServiceAccountName = "puller"
	})
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	mounted := func(want ...string) {
		t.Helper()
		eventually(t, 30*time.Second, fmt.Sprintf("a fetch Job mounting %q", want), func(ctx context.Context) (bool, string) {
			jobs := &batchv1.JobList{}
			if err := env.client.List(ctx, jobs, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			var seen []string
			for _, j := range jobs.Items {
				got := jobPullSecrets(j)
				if slices.Equal(got, want) {
					return true, ""
				}
				seen = append(seen, fmt.Sprintf("%s: %q", j.Name, got))
			}
			return false, fmt.Sprint(seen)
		})
	}
	mounted("regcred")
	// Settled: only the account's change can wake it now.
	waitReady(t, ms)

	patch := client.MergeFrom(sa.DeepCopy())
	sa.ImagePullSecrets = append(sa.ImagePullSecrets, corev1.LocalObjectReference{Name: "mirror"})
	if err := env.client.Patch(ctx, sa, patch); err != nil {
		t.Fatal(err)
	}
	mounted("regcred", "mirror")
}

// jobPullSecrets are the pull secrets a fetch Job's pod mounts.
func jobPullSecrets(j batchv1.Job) []string {
	var out []string
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.Name != "pull-secrets" || v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				out = append(out, s.Secret.Name)
			}
		}
	}
	return out
}

// TestAWebIdentityWithoutARoleTakesTheServiceAccountsAnnotatedRole: a
// webIdentity that names no role waits, Failed and saying so, for the
// service account to be annotated with one, as eksctl annotates it; the
// annotation wakes the ModelServer, whose fetch assumes that role.
func TestAWebIdentityWithoutARoleTakesTheServiceAccountsAnnotatedRole(t *testing.T) {
	const role = "arn:aws:iam::123456789012:role/model-reader"
	waitForTheAccountsIdentity(t, "s3://models/resnet",
		`spec.model.webIdentity.roleArn: is not set, and service account "model-reader" has no eks.amazonaws.com/role-arn annotation to take it from`,
		map[string]string{"eks.amazonaws.com/role-arn": role}, role)
}

// TestAnAzureWebIdentityTakesTheServiceAccountsAnnotatedApplication: the
// same for an Azure model and Microsoft Entra Workload ID's annotations.
func TestAnAzureWebIdentityTakesTheServiceAccountsAnnotatedApplication(t *testing.T) {
	const app = "00000000-1111-2222-3333-444444444444"
	waitForTheAccountsIdentity(t, "https://models.blob.core.windows.net/team/resnet",
		`spec.model.webIdentity.clientId: is not set, and service account "model-reader" has no azure.workload.identity/client-id annotation to take it from`,
		map[string]string{"azure.workload.identity/client-id": app, "azure.workload.identity/tenant-id": "contoso.onmicrosoft.com"}, app)
}

// waitForTheAccountsIdentity makes a ModelServer of the model at uri whose
// webIdentity names nothing, sees it Failed with message, annotates its
// service account, and waits for a fetch Job whose arguments hold want,
// and for the ModelServer to be Ready.
func waitForTheAccountsIdentity(t *testing.T, uri, message string, annotations map[string]string, want string) {
	t.Helper()
	ns := newNamespace(t)
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "model-reader"}}
	if err := env.client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	ms := newModelServer(ns, "sa-identity", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model.StorageURI = uri
		ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{}
		ms.Spec.PodTemplate.ServiceAccountName = "model-reader"
	})
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the missing identity named", func(ctx context.Context) (bool, string) {
		got := get(t, ns, ms.Name, &servingv1alpha1.ModelServer{})
		return got.Status.Phase == servingv1alpha1.PhaseFailed && got.Status.Message == message, got.Status.Message
	})

	patch := client.MergeFrom(sa.DeepCopy())
	sa.Annotations = annotations
	if err := env.client.Patch(ctx, sa, patch); err != nil {
		t.Fatal(err)
	}
	waitForFetchJob(t, ns, "a fetch Job taking the annotated identity", func(args []string) bool { return slices.Contains(args, want) })
	waitReady(t, ms)
}

// waitForFetchJob waits for a Job in ns whose fetch arguments match, and
// returns it.
func waitForFetchJob(t *testing.T, ns, what string, match func(args []string) bool) *batchv1.Job {
	t.Helper()
	var found *batchv1.Job
	eventually(t, 30*time.Second, what, func(ctx context.Context) (bool, string) {
		jobs := &batchv1.JobList{}
		if err := env.client.List(ctx, jobs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for i, j := range jobs.Items {
			if match(j.Spec.Template.Spec.Containers[0].Args) {
				found = &jobs.Items[i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Jobs", len(jobs.Items))
	})
	return found
}

// TestGKEsMetadataServerIsExpectedToAnswerAsTheAnnotatedAccount: with
// gkeWorkloadIdentity, the fetch Job projects no token and expects the
// pod's principal while the service account is annotated with no Google
// service account; annotated, the ModelServer is fetched again expecting
// that account; an annotation that names none fails it, saying so.
func TestGKEsMetadataServerIsExpectedToAnswerAsTheAnnotatedAccount(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "model-reader"}}
	if err := env.client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	ms := newModelServer(ns, "gke", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model.StorageURI = "gs://models/resnet"
		ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{GKEWorkloadIdentity: true}
		ms.Spec.PodTemplate.ServiceAccountName = "model-reader"
	})
	if err := env.client.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	unannotated := waitForFetchJob(t, ns, "a fetch Job expecting the pod's principal", func(args []string) bool {
		return slices.Contains(args, "--gke-workload-identity") && !slices.Contains(args, "--web-identity-service-account")
	})
	for _, v := range unannotated.Spec.Template.Spec.Volumes {
		if v.Projected != nil {
			t.Errorf("the fetch Job projects volume %s; GKE's metadata server needs no token", v.Name)
		}
	}
	waitReady(t, ms)

	annotate := func(gsa string) {
		t.Helper()
		patch := client.MergeFrom(sa.DeepCopy())
		sa.Annotations = map[string]string{"iam.gke.io/gcp-service-account": gsa}
		if err := env.client.Patch(ctx, sa, patch); err != nil {
			t.Fatal(err)
		}
	}
	const gsa = "model-reader@ml.iam.gserviceaccount.com"
	annotate(gsa)
	waitForFetchJob(t, ns, "a fetch Job expecting the annotated account", func(args []string) bool {
		i := slices.Index(args, "--web-identity-service-account")
		return i >= 0 && args[i+1] == gsa
	})
	waitReady(t, ms)

	// A model in Artifact Registry is admitted, and fetched the same way.
	inRegistry := newModelServer(ns, "gke-oci", func(ms *servingv1alpha1.ModelServer) {
		ms.Spec.Model.StorageURI = "oci://us-docker.pkg.dev/ml/models/resnet:v1"
		ms.Spec.Model.WebIdentity = &servingv1alpha1.WebIdentity{GKEWorkloadIdentity: true}
		ms.Spec.PodTemplate.ServiceAccountName = "model-reader"
	})
	if err := env.client.Create(ctx, inRegistry); err != nil {
		t.Fatal(err)
	}
	waitForFetchJob(t, ns, "a fetch Job pulling from Artifact Registry with GKE's tokens", func(args []string) bool {
		return slices.Contains(args, "oci://us-docker.pkg.dev/ml/models/resnet:v1") && slices.Contains(args, "--gke-workload-identity") && slices.Contains(args, gsa)
	})

	annotate("model-reader")
	eventually(t, 30*time.Second, "the annotation refused", func(ctx context.Context) (bool, string) {
		got := get(t, ns, ms.Name, &servingv1alpha1.ModelServer{})
		return strings.Contains(got.Status.Message, `service account "model-reader" is annotated iam.gke.io/gcp-service-account: "model-reader", which is not a Google service account's email`), got.Status.Message
	})
}
