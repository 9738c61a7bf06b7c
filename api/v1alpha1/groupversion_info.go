// Package v1alpha1 holds the serving.modelserver.dev/v1alpha1 API: the
// ModelServer resource.
// +kubebuilder:object:generate=true
// +groupName=serving.modelserver.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the ModelServer resource.
	GroupVersion = schema.GroupVersion{Group: "serving.modelserver.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the API's types with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
