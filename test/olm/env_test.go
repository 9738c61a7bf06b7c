// Package olm installs the operator through OLM v0 for real, on the real
// node, driven with kubectl as a cluster admin would: OLM's own operators
// run from OLM's image, the catalog image built from catalog/ is served by
// a CatalogSource, every bundle is unpacked by OLM's unpack Job, and the
// operator's pod runs from its image and takes a ModelServer to Ready. An
// upgrade goes through the channel to a next release the test builds.
// Where the machine cannot run containers, every test skips with one line.
package olm

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/test/olmenv"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

var shared realenv.Shared[*olmenv.Env]

func TestMain(m *testing.M) {
	shared.Main(m, func(e *olmenv.Env) *localcluster.Cluster {
		if e == nil {
			return nil
		}
		return e.Cluster
	})
}

// startOLM returns the real node with OLM v0 installed, which the tests
// share, starting it on first use; or skips the test in one line where the
// machine cannot run containers.
func startOLM(t *testing.T) *olmenv.Env {
	t.Helper()
	e := shared.Get(t, func() (*olmenv.Env, error) { return start(t) })
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(e.Cluster.LogTails(20))
			for _, d := range []string{"olm-operator", "catalog-operator", "packageserver"} {
				out, _ := e.Kubectl("", "-n", olmenv.OLMNamespace, "logs", "deploy/"+d, "--tail=30")
				t.Logf("%s:\n%s", d, out)
			}
		}
	})
	return e
}

func start(t *testing.T) (*olmenv.Env, error) {
	// The machine runs one real node at a time: this may wait for another.
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	e, err := olmenv.Start(ctx, realenv.Options{Logf: t.Logf, NoBigModel: true}, nextVersion)
	if err != nil {
		return nil, fmt.Errorf("real-node environment: %w", err)
	}
	start := time.Now()
	if err := e.StartOLMv0(ctx); err != nil {
		return e, fmt.Errorf("OLM v0: %w", err)
	}
	t.Logf("OLM v0 (olm-operator, catalog-operator, packageserver) was running %.1fs after kubectl apply", time.Since(start).Seconds())
	return e, nil
}

var release struct {
	once sync.Once
	next *olmenv.Release
	err  error
}

// nextVersion is the operator's next release, which the upgrades go to.
const nextVersion = "0.2.0"

// nextRelease is the operator's next release, built with the environment.
func nextRelease(t *testing.T, e *olmenv.Env) *olmenv.Release {
	t.Helper()
	release.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		release.next, release.err = e.MakeRelease(ctx, nextVersion)
	})
	if release.err != nil {
		t.Fatalf("make release %s: %v", nextVersion, release.err)
	}
	return release.next
}

// The helpers every test here uses.
var (
	kubectl    = olmenv.MustKubectl
	eventually = olmenv.Eventually
)
