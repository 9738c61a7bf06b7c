// Package ociimage builds the operator's container image, and the small
// images the local cluster needs, without a container engine: a Spec of
// files and run-time settings becomes a single-layer linux OCI image (amd64
// unless the Spec names another architecture), several of which make an
// image index (Index), pushed to a registry on this machine (StartRegistry
// runs one) or written as an OCI image layout.
//
// The images are reproducible: the same Spec and file contents give the
// same digest, so a rebuild that changes nothing is a no-op for a node that
// already pulled the image.
package ociimage
