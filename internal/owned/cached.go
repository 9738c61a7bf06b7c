package owned

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cached reads the objects of the owned kinds from the operator's cache,
// which watches them all: what the release's upgrade asks of a live
// object costs no request. It holds no other kind, so it never makes the
// cache start watching one.
type Cached struct{ Reader client.Reader }

// Annotations are the cached object's; held is false for a kind that is
// not owned, and for an object the cache does not have (not yet seen, or
// no longer labelled as a ModelServer's), which the caller then reads
// from the apiserver.
func (c Cached) Annotations(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (map[string]string, bool) {
	for i := range Kinds {
		if Kinds[i].Name != gvk.Kind || Kinds[i].Group != gvk.Group {
			continue
		}
		obj := Kinds[i].New()
		if err := c.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
			return nil, false
		}
		return obj.GetAnnotations(), true
	}
	return nil, false
}
