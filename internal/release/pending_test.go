package release

import (
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// countingDriver counts the writes that reach the store.
type countingDriver struct {
	driver.Driver
	creates, updates int
}

func (c *countingDriver) Create(key string, rls *helmrelease.Release) error {
	c.creates++
	return c.Driver.Create(key, rls)
}

func (c *countingDriver) Update(key string, rls *helmrelease.Release) error {
	c.updates++
	return c.Driver.Update(key, rls)
}

func revision(version int, status helmrelease.Status) *helmrelease.Release {
	return &helmrelease.Release{Name: "resnet", Namespace: "ml", Version: version, Info: &helmrelease.Info{Status: status}}
}

// TestAPendingRevisionIsWrittenOnceInItsFinalState: an install stores one
// record, deployed, with one write; the pending state never reaches the
// store, yet Helm can read it back while the operation runs.
func TestAPendingRevisionIsWrittenOnceInItsFinalState(t *testing.T) {
	store := &countingDriver{Driver: driver.NewMemory()}
	p := &pendingWrittenOnce{Driver: store}
	key := "sh.helm.release.v1.resnet.v1"

	if err := p.Create(key, revision(1, helmrelease.StatusPendingInstall)); err != nil {
		t.Fatal(err)
	}
	if store.creates != 0 {
		t.Fatalf("the pending revision was written (%d creates)", store.creates)
	}
	if got, err := p.Get(key); err != nil || got.Info.Status != helmrelease.StatusPendingInstall {
		t.Fatalf("Get while pending = %v, %v", got, err)
	}
	if err := p.Update(key, revision(1, helmrelease.StatusDeployed)); err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(key)
	if err != nil || got.Info.Status != helmrelease.StatusDeployed {
		t.Fatalf("stored %v, %v; want the deployed revision", got, err)
	}
	if store.creates != 1 || store.updates != 0 {
		t.Errorf("%d creates and %d updates, want 1 create", store.creates, store.updates)
	}

	// Later writes of the same revision, and of revisions never held,
	// are plain updates.
	if err := p.Update(key, revision(1, helmrelease.StatusSuperseded)); err != nil {
		t.Fatal(err)
	}
	if err := p.Create("sh.helm.release.v1.resnet.v2", revision(2, helmrelease.StatusDeployed)); err != nil {
		t.Fatal(err)
	}
	if store.creates != 2 || store.updates != 1 {
		t.Errorf("%d creates and %d updates, want 2 and 1", store.creates, store.updates)
	}
}

// TestAFinalWriteRacingAnotherStillLands: Helm may record a revision's end
// twice (a timed-out context and the operation finishing); the second
// write updates what the first created.
func TestAFinalWriteRacingAnotherStillLands(t *testing.T) {
	store := &countingDriver{Driver: driver.NewMemory()}
	p := &pendingWrittenOnce{Driver: store}
	key := "sh.helm.release.v1.resnet.v1"
	if err := p.Create(key, revision(1, helmrelease.StatusPendingInstall)); err != nil {
		t.Fatal(err)
	}
	if err := store.Create(key, revision(1, helmrelease.StatusFailed)); err != nil {
		t.Fatal(err)
	}
	if err := p.Update(key, revision(1, helmrelease.StatusDeployed)); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Get(key); got.Info.Status != helmrelease.StatusDeployed {
		t.Errorf("stored %s, want deployed", got.Info.Status)
	}
}
