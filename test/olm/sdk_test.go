package olm

import (
	"context"
	"fmt"
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
	if err := tryOperatorSDK(t, e, 8*time.Minute, args...); err != nil {
		t.Fatal(err)
	}
}

func tryOperatorSDK(t *testing.T, e *olmenv.Env, limit time.Duration, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(e.BinDir, "operator-sdk"), append(args, "--kubeconfig", e.Cluster.Kubeconfig)...)
	cmd.Dir = e.Root
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+e.Cluster.CACertFile)
	out, err := cmd.CombinedOutput()
	t.Logf("operator-sdk %s:\n%s", strings.Join(args, " "), out)
	if err != nil {
		return fmt.Errorf("operator-sdk %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// csvCleanupState is what shows why a CSV's deletion waits: its
// finalizers, when it was created and by whom (a CSV that is not being
// deleted was made again after cleanup deleted it), the namespace's
// InstallPlans, OLM's pods and what olm-operator logged of the finalizer.
func csvCleanupState(e *olmenv.Env, ns string) string {
	csvs, _ := e.Kubectl("", "-n", ns, "get", "csv", "-o",
		"custom-columns=NAME:.metadata.name,UID:.metadata.uid,CREATED:.metadata.creationTimestamp,DELETING:.metadata.deletionTimestamp,FINALIZERS:.metadata.finalizers,PHASE:.status.phase,WRITERS:.metadata.managedFields[*].manager")
	plans, _ := e.Kubectl("", "-n", ns, "get", "installplans", "-o",
		"custom-columns=NAME:.metadata.name,CSVS:.spec.clusterServiceVersionNames,APPROVED:.spec.approved,PHASE:.status.phase,CREATED:.metadata.creationTimestamp")
	pods, _ := e.Kubectl("", "-n", olmenv.OLMNamespace, "get", "pods", "-o", "wide")
	logs, _ := e.Kubectl("", "-n", olmenv.OLMNamespace, "logs", "deploy/olm-operator")
	var finalizer []string
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "finalizer") || strings.Contains(line, "CSV deletion") {
			finalizer = append(finalizer, line)
		}
	}
	if len(finalizer) > 40 {
		finalizer = finalizer[len(finalizer)-40:]
	}
	return fmt.Sprintf("CSVs in %s:\n%s\nInstallPlans:\n%s\nOLM's pods:\n%s\nolm-operator on the finalizer:\n%s",
		ns, csvs, plans, pods, strings.Join(finalizer, "\n"))
}

// waitInstallSettled waits, as the README has users wait before cleanup,
// until every InstallPlan of the namespace is Complete, and then for the
// Subscription to be at the latest CSV it knows. operator-sdk returns as
// soon as the CSV is Succeeded; a cleanup then can race the catalog
// operator, which may still execute the plan and create the CSV again
// after cleanup deleted it (docs/olm.md).
func waitInstallSettled(t *testing.T, e *olmenv.Env, ns, csv string) {
	t.Helper()
	start := time.Now()
	subscription := func() string {
		out, _ := e.Kubectl("", "-n", ns, "get", "subscriptions", "-o", `jsonpath={range .items[*]}{.status.state} {.status.installedCSV}{end}`)
		return strings.TrimSpace(out)
	}
	plans, _ := e.Kubectl("", "-n", ns, "get", "installplans", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.phase} {end}`)
	first := "InstallPlans " + plans + "; Subscription " + subscription()
	kubectl(t, e, "", "-n", ns, "wait", "installplan", "--all", "--for=jsonpath={.status.phase}=Complete", "--timeout=3m")
	eventually(t, 3*time.Minute, "the Subscription in "+ns+" at "+csv, func() (bool, string) {
		sub := subscription()
		return sub == "AtLatestKnown "+csv, sub
	})
	t.Logf("OLM done installing %s %.1fs after operator-sdk returned; then: %s", csv, time.Since(start).Seconds(), first)
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

	waitInstallSettled(t, e, ns, next.CSV)
	uid := kubectl(t, e, "", "-n", ns, "get", "csv", next.CSV, "-o", "jsonpath={.metadata.uid}")
	t.Logf("cleanup deletes CSV %s, UID %s", next.CSV, uid)
	// Without --delete-all=false, cleanup deletes the CRD too, and with it
	// every ModelServer of the cluster (docs/olm.md).
	//
	// cleanup waits for the CSV to go, which waits for OLM's finalizer on it
	// (operators.coreos.com/csv-cleanup): olm-operator deletes the CSV's
	// ClusterRoles and bindings and checks they left its cache. It retries
	// a CSV that fails 8 times within about a second, and after that only
	// at its next resync, 5 minutes ±20 %; so the timeout is past that.
	cleanup := func() error {
		return tryOperatorSDK(t, e, 10*time.Minute, "cleanup", olmenv.Package, "--namespace", ns,
			"--delete-all=false", "--delete-operator-groups", "--timeout", "7m")
	}
	start = time.Now()
	err := cleanup()
	if again, _ := e.Kubectl("", "-n", ns, "get", "csv", next.CSV, "--ignore-not-found", "-o", "jsonpath={.metadata.uid}"); again != "" && again != uid {
		// OLM made the CSV again after cleanup had deleted it: cleanup
		// either waited for a CSV nobody deletes, or looked in the gap
		// and left it. A second cleanup cannot find it (it finds the
		// CSV through the Subscription it deleted), so it is deleted
		// as docs/olm.md tells users to, and cleanup run again for
		// what it had left.
		t.Logf("OLM made CSV %s again (UID %s) after cleanup deleted it:\n%s", next.CSV, again, csvCleanupState(e, ns))
		kubectl(t, e, "", "-n", ns, "delete", "csv", next.CSV, "--timeout=7m")
		if err != nil {
			err = cleanup()
		}
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, csvCleanupState(e, ns))
	}
	if took := time.Since(start); took > time.Minute {
		t.Logf("operator-sdk cleanup took %.1fs, waiting for OLM's resync:\n%s", took.Seconds(), csvCleanupState(e, ns))
	} else {
		t.Logf("operator-sdk cleanup: %.1fs", took.Seconds())
	}
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
