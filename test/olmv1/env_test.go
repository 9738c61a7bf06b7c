// Package olmv1 installs the operator through OLM v1 for real, on the real
// node, driven with kubectl as a cluster admin would: catalogd and
// operator-controller run from images of the pinned release, catalogd
// serves the catalog image built from catalog/ through a ClusterCatalog,
// and a ClusterExtension installs the operator from its bundle image as a
// ServiceAccount holding only the permissions the install needs. The
// operator's pod takes a ModelServer to Ready; a version constraint then
// upgrades it to a next release the test builds. Where the machine cannot
// run containers, every test skips with one line.
package olmv1

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/test/olmenv"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// olmv1 is the real node with OLM v1 installed.
type olmv1 struct {
	env *olmenv.Env
	olm *olmenv.OLMv1
}

var shared realenv.Shared[olmv1]

func TestMain(m *testing.M) {
	shared.Main(m, func(s olmv1) *localcluster.Cluster {
		if s.env == nil {
			return nil
		}
		return s.env.Cluster
	})
}

// startOLMv1 brings up the real node with OLM v1 installed, or skips the
// test in one line where the machine cannot run containers.
func startOLMv1(t *testing.T) (*olmenv.Env, *olmenv.OLMv1) {
	t.Helper()
	s := shared.Get(t, func() (olmv1, error) {
		// The real node's lock may be held by another package's whole suite.
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
		defer cancel()
		e, err := olmenv.Start(ctx, realenv.Options{Logf: t.Logf, NoBigModel: true}, nextVersion)
		if err != nil {
			return olmv1{}, err
		}
		start := time.Now()
		o, err := e.StartOLMv1(ctx)
		if err != nil {
			return olmv1{env: e}, fmt.Errorf("OLM v1: %w", err)
		}
		t.Logf("OLM v1 %s (catalogd, operator-controller) was available %.1fs after kubectl apply; pods pull from the registry at %s",
			o.Version, time.Since(start).Seconds(), o.PodRegistry)
		return olmv1{env: e, olm: o}, nil
	})
	e, o := s.env, s.olm
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(e.Cluster.LogTails(20))
			t.Log(o.Logs(40))
			t.Log(e.Describe("", "clustercatalogs,clusterextensions"))
			out, _ := e.Kubectl("", "-n", installNS, "logs", "deployment/"+operatorDeployment, "--tail=40")
			t.Logf("the operator:\n%s", out)
		}
	})
	return e, o
}

// The helpers every test here uses.
var (
	kubectl    = olmenv.MustKubectl
	eventually = olmenv.Eventually
)

// kubectlWait runs a `kubectl wait` (or `rollout status`) and fails the
// test with a description of what did not get there.
func kubectlWait(t *testing.T, e *olmenv.Env, o *olmenv.OLMv1, describeNS, describe string, args ...string) {
	t.Helper()
	if _, err := e.Kubectl("", args...); err != nil {
		t.Fatalf("%v\n%s\n%s", err, e.Describe(describeNS, describe), o.Logs(20))
	}
}
