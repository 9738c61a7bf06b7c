package olm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/test/olmenv"
)

// operatorSDK runs the pinned operator-sdk from the repository's root as a
// user does, against the cluster, trusting the cluster's CA for the
// registry's certificate.
func operatorSDK(t *testing.T, e *olmenv.Env, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(e.BinDir, "operator-sdk"), append(args, "--kubeconfig", e.Cluster.Kubeconfig)...)
	cmd.Dir = e.Root
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+e.Cluster.CACertFile)
	out, err := cmd.CombinedOutput()
	t.Logf("operator-sdk %s:\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("operator-sdk %s: %v", strings.Join(args, " "), err)
	}
}

// TestOperatorSDKRunsUpgradesAndCleansUpTheBundle is the developer's loop
// with operator-sdk: run the bundle image, upgrade it to the next one,
// clean up; each through OLM on the real node, each image pulled over TLS
// from the registry.
func TestOperatorSDKRunsUpgradesAndCleansUpTheBundle(t *testing.T) {
	e := startOLM(t)
	next := nextRelease(t, e)
	const ns = "sdk-run"
	reg := e.Cluster.RegistryTLS
	bundle := func(version string) string { return reg + "/" + olmenv.BundleRepo + ":v" + version }
	kubectl(t, e, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n", "apply", "-f", "-")

	start := time.Now()
	operatorSDK(t, e, "run", "bundle", bundle(olmenv.CurrentVersion), "--namespace", ns,
		"--install-mode", "OwnNamespace",
		"--index-image", reg+"/"+olmenv.IndexRepo+":test",
		"--decompression-image", reg+"/"+olmenv.OLMRepo+":test",
		"--timeout", "5m")
	waitCSV(t, e, ns, olmenv.CurrentCSV)
	waitOperator(t, e, ns)
	t.Logf("operator-sdk run bundle → operator available: %.1fs", time.Since(start).Seconds())

	start = time.Now()
	createSample(t, e, ns, sampleName)
	waitReady(t, e, ns, sampleName)
	t.Logf("ModelServer → Ready: %.1fs", time.Since(start).Seconds())
	before := servingPods(t, e, ns)

	start = time.Now()
	operatorSDK(t, e, "run", "bundle-upgrade", bundle(next.Version), "--namespace", ns, "--timeout", "5m")
	waitCSV(t, e, ns, next.CSV)
	waitOperatorImage(t, e, ns, next.OperatorImage)
	t.Logf("operator-sdk run bundle-upgrade → %s available: %.1fs", next.CSV, time.Since(start).Seconds())
	waitReady(t, e, ns, sampleName)
	if after := servingPods(t, e, ns); after != before {
		t.Errorf("bundle-upgrade restarted serving pods:\nbefore %s\nafter  %s", before, after)
	}

	// Without --delete-all=false, cleanup deletes the CRD too, and with it
	// every ModelServer of the cluster (docs/olm.md).
	operatorSDK(t, e, "cleanup", olmenv.Package, "--namespace", ns, "--delete-all=false", "--delete-operator-groups", "--timeout", "3m")
	kubectl(t, e, "", "-n", ns, "wait", "--for=delete", "deployment/modelserver-controller-manager", "--timeout=2m")
	for _, kind := range []string{"csv", "subscription", "catalogsource", "operatorgroup"} {
		if out := kubectl(t, e, "", "-n", ns, "get", kind, "-o", "name"); out != "" {
			t.Errorf("operator-sdk cleanup left %s", out)
		}
	}
	// What users created stays theirs.
	waitReady(t, e, ns, sampleName)
	if after := servingPods(t, e, ns); after != before {
		t.Errorf("cleanup changed serving pods:\nbefore %s\nafter  %s", before, after)
	}
}
