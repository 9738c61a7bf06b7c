// The Gateway API, pinned in a module of its own for its CRDs, which its
// module holds as its releases ship them: test/e2e has the apiserver check
// the routes and the BackendTLSPolicy against them. Nothing here is
// compiled, so no package names it: go mod tidy would drop the
// requirement.
module github.com/modelserver-dev/modelserver-operator/hack/tools/gateway-api

go 1.26.0

require sigs.k8s.io/gateway-api v1.6.3
