package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// A Gateway's status changes with every route it takes up (each
// listener's count of routes): that wakes no ModelServer, or a thousand
// routes on one Gateway would wake each ModelServer a thousand times. A
// change of what a URL is made of does.
func TestGatewayNewsAreWhatAURLIsMadeOf(t *testing.T) {
	gateway := func(address, hostname string, attached int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
			"metadata": map[string]any{"namespace": "ml", "name": "public", "resourceVersion": "7"},
			"spec":     map[string]any{"listeners": []any{map[string]any{"name": "web", "protocol": "HTTP", "port": int64(80), "hostname": hostname}}},
			"status": map[string]any{
				"addresses": []any{map[string]any{"type": "IPAddress", "value": address}},
				"listeners": []any{map[string]any{"name": "web", "attachedRoutes": attached}},
			},
		}}
	}
	was := gateway("198.18.0.40", "", 1)
	for _, tc := range []struct {
		what string
		is   *unstructured.Unstructured
		want bool
	}{
		{"a route more taken up", gateway("198.18.0.40", "", 2), false},
		{"another address", gateway("198.18.0.41", "", 1), true},
		{"a listener's hostname", gateway("198.18.0.40", "models.example.test", 1), true},
	} {
		if got := gatewayNews.Update(event.UpdateEvent{ObjectOld: was, ObjectNew: tc.is}); got != tc.want {
			t.Errorf("%s: woken %v, want %v", tc.what, got, tc.want)
		}
	}
}
