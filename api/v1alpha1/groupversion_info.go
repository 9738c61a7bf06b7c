// Package v1alpha1 holds the serving.modelserver.dev/v1alpha1 API: the
// ModelServer resource.
// +kubebuilder:object:generate=true
// +groupName=serving.modelserver.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of the ModelServer resource.
	GroupVersion = schema.GroupVersion{Group: "serving.modelserver.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the API's types with a scheme. It is
	// apimachinery's, so that importing the API brings in no controller
	// library.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ModelServer{}, &ModelServerList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
