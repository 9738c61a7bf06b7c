package release

import (
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
)

// retryingUpdates retries an update of a release record that the apiserver
// refused for a moment. Helm ignores a failed write of the previous
// revision's "superseded" after an upgrade, which would leave two revisions
// deployed for good: every later upgrade supersedes only the latest.
// Creates are not retried: one refused after it was stored would fail its
// retry with "exists" instead of its own error.
type retryingUpdates struct {
	driver.Driver
}

func (d retryingUpdates) Update(key string, rls *helmrelease.Release) error {
	return retry.OnError(retry.DefaultBackoff, transient, func() error {
		return d.Driver.Update(key, rls)
	})
}

// transient says whether a refused write may succeed when made again.
func transient(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsConflict(err)
}
