package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// fetchJobs are the names of a ModelServer's fetch Jobs.
func fetchJobs(t *testing.T, ms *servingv1alpha1.ModelServer) []string {
	t.Helper()
	var jobs batchv1.JobList
	if err := env.client.List(context.Background(), &jobs, client.InNamespace(ms.Namespace),
		client.MatchingLabels{values.LabelModelServer: ms.Name}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range jobs.Items {
		names = append(names, j.Name)
	}
	return names
}

// fetchJob is the name of the one fetch Job of a ModelServer.
func fetchJob(t *testing.T, ms *servingv1alpha1.ModelServer) string {
	t.Helper()
	jobs := fetchJobs(t, ms)
	if len(jobs) != 1 {
		t.Fatalf("fetch Jobs of %s: %v, want 1", ms.Name, jobs)
	}
	return jobs[0]
}

// markToKeep annotates a Job helm.sh/resource-policy: keep by hand, as a
// user who wants its logs kept would, and waits until reader sees it.
func markToKeep(t *testing.T, ns, name string, reader client.Reader) {
	t.Helper()
	job := get(t, ns, name, &batchv1.Job{})
	patch := client.MergeFrom(job.DeepCopy())
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[kube.ResourcePolicyAnno] = kube.KeepPolicy
	if err := env.client.Patch(context.Background(), job, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the mark seen", func(ctx context.Context) (bool, string) {
		seen := &batchv1.Job{}
		if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, seen); err != nil {
			return false, err.Error()
		}
		return seen.Annotations[kube.ResourcePolicyAnno] == kube.KeepPolicy, "annotations " + fmt.Sprint(seen.Annotations)
	})
}

// assertKept fails unless the Job is there and not being deleted.
func assertKept(t *testing.T, ns, name string) {
	t.Helper()
	job := &batchv1.Job{}
	err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, job)
	switch {
	case apierrors.IsNotFound(err):
		t.Errorf("Job %s, marked to keep, was deleted", name)
	case err != nil:
		t.Fatal(err)
	case job.DeletionTimestamp != nil:
		t.Errorf("Job %s, marked to keep, is being deleted", name)
	}
}

// A fetch Job marked helm.sh/resource-policy: keep after it was made
// outlives the revision that drops it, as with Helm's upgrade, which reads
// the mark from the live object. The operator's cache holds the Job, so
// the mark costs no request.
func TestAJobMarkedToKeepByHandOutlivesItsRevision(t *testing.T) {
	ns := newNamespace(t)
	ms := readyModelServer(t, ns, "keep")
	old := fetchJob(t, ms)
	markToKeep(t, ns, old, env.reconciler.Client)
	_, from := env.requests.requestsSince(0)
	if err := changeModel(ms, "s3://models/keep-v2"); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ms)
	assertKept(t, ns, old)
	all, _ := env.requests.requestsSince(from)
	for _, req := range all {
		if method, resource, name, ok := inNamespace(req, ns); ok && resource == "jobs" && (method == "DELETE" || method == "GET" && name != "") {
			t.Errorf("the model change sent %s", req)
		}
	}
}

// Where the cache does not hold the object (here, a namespace it does not
// watch), the mark is read from the apiserver; an unmarked Job is deleted.
func TestAKeepMarkOutsideTheCacheIsReadFromTheAPIServer(t *testing.T) {
	ns, r, _ := recordingReconciler(t)
	ms := createUnmanaged(t, "keep-uncached")
	ms = reconcileUntilReady(t, r, ms)
	first := fetchJob(t, ms)
	markToKeep(t, ns, first, env.client)
	if err := changeModel(ms, "s3://models/keep-uncached-v2"); err != nil {
		t.Fatal(err)
	}
	ms = reconcileUntilReady(t, r, ms)
	assertKept(t, ns, first)

	var second string
	jobs := fetchJobs(t, ms)
	for _, j := range jobs {
		if j != first {
			second = j
		}
	}
	if second == "" {
		t.Fatalf("no Job of the second model beside %s: %v", first, jobs)
	}
	if err := changeModel(ms, "s3://models/keep-uncached-v3"); err != nil {
		t.Fatal(err)
	}
	reconcileUntilReady(t, r, ms)
	assertKept(t, ns, first)
	assertGone(t, ns, second, &batchv1.Job{})
}
