package owned

import (
	"context"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// askedReader stands for the operator's cache: it answers with a Job and
// remembers what it was asked for.
type askedReader struct{ asked []string }

func (r *askedReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.asked = append(r.asked, fmt.Sprintf("%T %s", obj, key))
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return fmt.Errorf("asked for a %T", obj)
	}
	job.Annotations = map[string]string{"a": "1"}
	return nil
}

func (r *askedReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("list")
}

// The cache is asked only for the owned kinds: asked for another, a
// controller-runtime cache would start watching it, with permissions the
// operator may not have.
func TestCachedAsksOnlyForOwnedKinds(t *testing.T) {
	r := &askedReader{}
	c := Cached{Reader: r}
	ann, held := c.Annotations(context.Background(), schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, "ns", "j")
	if !held || ann["a"] != "1" {
		t.Errorf("an owned Job: %v, held %v; want the cache's annotations", ann, held)
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"},
		{Group: "example.com", Version: "v1", Kind: "Job"},
	} {
		if _, held := c.Annotations(context.Background(), gvk, "ns", "x"); held {
			t.Errorf("%s: held; want it read from the apiserver", gvk)
		}
	}
	if len(r.asked) != 1 || r.asked[0] != "*v1.Job ns/j" {
		t.Errorf("the cache was asked for %v; want the owned Job alone", r.asked)
	}
}
