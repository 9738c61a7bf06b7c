package release

import (
	"errors"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// refusingDriver refuses the first updates with the given errors.
type refusingDriver struct {
	driver.Driver
	refusals []error
	updates  int
}

func (r *refusingDriver) Update(key string, rls *helmrelease.Release) error {
	r.updates++
	if len(r.refusals) > 0 {
		err := r.refusals[0]
		r.refusals = r.refusals[1:]
		return err
	}
	return r.Driver.Update(key, rls)
}

func TestARecordUpdateRefusedForAMomentIsMadeAgain(t *testing.T) {
	secrets := schema.GroupResource{Resource: "secrets"}
	key := "sh.helm.release.v1.resnet.v1"
	for _, tc := range []struct {
		name     string
		refusals []error
		ok       bool
		updates  int
	}{
		{"a 500 and a 429", []error{apierrors.NewInternalError(errors.New("etcd")), apierrors.NewTooManyRequests("slow down", 1)}, true, 3},
		{"a conflict", []error{apierrors.NewConflict(secrets, key, errors.New("changed"))}, true, 2},
		{"forbidden, for good", []error{apierrors.NewForbidden(secrets, key, errors.New("no"))}, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := driver.NewMemory()
			if err := store.Create(key, revision(1, helmrelease.StatusDeployed)); err != nil {
				t.Fatal(err)
			}
			refusing := &refusingDriver{Driver: store, refusals: tc.refusals}
			err := retryingUpdates{refusing}.Update(key, revision(1, helmrelease.StatusSuperseded))
			if (err == nil) != tc.ok || refusing.updates != tc.updates {
				t.Errorf("error %v after %d updates; want ok=%v after %d", err, refusing.updates, tc.ok, tc.updates)
			}
		})
	}
}
