package olm

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/test/olmenv"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// The sample the tests serve, in a namespace of its own.
const (
	sampleNS   = "ml-team"
	sampleName = "half-plus-two"
)

// TestOLMv0InstallsUpgradesAndUninstallsTheOperator walks what a cluster
// admin does with OLM v0, in order, each step building on the last:
// install from the catalog for all namespaces, serve a model, uninstall
// and reinstall without touching the serving pods, upgrade through the
// channel, and install for one namespace with manual approval.
func TestOLMv0InstallsUpgradesAndUninstallsTheOperator(t *testing.T) {
	e := startOLM(t)

	t.Run("packageserver lists the package from the catalog image", func(t *testing.T) {
		eventually(t, 3*time.Minute, "packagemanifest modelserver-operator", func() (bool, string) {
			out, err := e.Kubectl("", "-n", olmenv.OperatorsNamespace, "get", "packagemanifests",
				"-o", "jsonpath={range .items[*]}{.metadata.name} {.status.catalogSource} {.status.defaultChannel} {.status.channels[0].currentCSV}{\"\\n\"}{end}")
			want := fmt.Sprintf("%s %s %s %s", olmenv.Package, olmenv.CatalogSource, olmenv.Channel, olmenv.CurrentCSV)
			return err == nil && strings.Contains(out, want), fmt.Sprint(out, err)
		})
		pod := kubectl(t, e, "", "-n", olmenv.OLMNamespace, "get", "pods", "-l", "olm.catalogSource="+olmenv.CatalogSource,
			"-o", "jsonpath={.items[0].spec.nodeName} {.items[0].spec.containers[0].image}")
		if pod != "real-node "+e.CatalogImage {
			t.Errorf("the catalog's registry pod runs %q, want on the real node from %s", pod, e.CatalogImage)
		}
	})

	var installed time.Duration
	t.Run("a Subscription for all namespaces installs the operator from its bundle image", func(t *testing.T) {
		start := time.Now()
		kubectl(t, e, subscription(olmenv.OperatorsNamespace, olmenv.CatalogSource, olmenv.OLMNamespace, "Automatic", ""), "apply", "-f", "-")
		waitCSV(t, e, olmenv.OperatorsNamespace, olmenv.CurrentCSV)
		waitOperator(t, e, olmenv.OperatorsNamespace)
		installed = time.Since(start)
		t.Logf("Subscription → CSV Succeeded and the operator available: %.1fs", installed.Seconds())
		checkUnpackJob(t, e, olmenv.OLMNamespace, e.BundleImage)
		img := kubectl(t, e, "", "-n", olmenv.OperatorsNamespace, "get", "pods", "-l", "app.kubernetes.io/component=manager",
			"-o", "jsonpath={.items[0].spec.nodeName} {.items[0].status.containerStatuses[0].image}")
		if want := "real-node " + olmenv.PublicRegistry + "/" + olmenv.OperatorRepo + ":" + olmenv.CurrentVersion; img != want {
			t.Errorf("the operator's pod: %q, want %q", img, want)
		}
	})

	t.Run("the operator takes the sample to Ready", func(t *testing.T) {
		start := time.Now()
		createSample(t, e, sampleNS, sampleName)
		waitReady(t, e, sampleNS, sampleName)
		t.Logf("ModelServer → Ready: %.1fs (%.1fs after the Subscription)", time.Since(start).Seconds(), (installed + time.Since(start)).Seconds())
	})

	t.Run("deleting the Subscription and CSV removes the operator and leaves the ModelServers serving; a reinstall adopts them", func(t *testing.T) {
		before := servingPods(t, e, sampleNS)
		revisions := releaseRevisions(t, e, sampleNS)
		kubectl(t, e, "", "-n", olmenv.OperatorsNamespace, "delete", "subscription", olmenv.Package)
		kubectl(t, e, "", "-n", olmenv.OperatorsNamespace, "delete", "csv", olmenv.CurrentCSV)
		kubectl(t, e, "", "-n", olmenv.OperatorsNamespace, "wait", "--for=delete", "deployment/modelserver-controller-manager", "--timeout=2m")
		if out := kubectl(t, e, "", "get", "crd", "modelservers.serving.modelserver.dev", "-o", "name"); out == "" {
			t.Fatal("the CRD went with the operator: OLM must leave it, and the users' ModelServers")
		}
		if after := servingPods(t, e, sampleNS); after != before {
			t.Fatalf("serving pods changed when the operator was removed:\nbefore %s\nafter  %s", before, after)
		}
		waitReady(t, e, sampleNS, sampleName)

		start := time.Now()
		kubectl(t, e, subscription(olmenv.OperatorsNamespace, olmenv.CatalogSource, olmenv.OLMNamespace, "Automatic", ""), "apply", "-f", "-")
		waitCSV(t, e, olmenv.OperatorsNamespace, olmenv.CurrentCSV)
		waitOperator(t, e, olmenv.OperatorsNamespace)
		t.Logf("reinstall: Subscription → operator available: %.1fs", time.Since(start).Seconds())
		waitReconciled(t, e, sampleNS, sampleName)
		if after := servingPods(t, e, sampleNS); after != before {
			t.Errorf("the reinstalled operator restarted serving pods:\nbefore %s\nafter  %s", before, after)
		}
		if after := releaseRevisions(t, e, sampleNS); after != revisions {
			t.Errorf("the reinstalled operator made a release revision: %d → %d", revisions, after)
		}
	})

	var next *olmenv.Release
	t.Run("an automatic upgrade through the channel changes the chart without restarting serving pods", func(t *testing.T) {
		next = nextRelease(t, e)
		before := servingPods(t, e, sampleNS)
		revisions := releaseRevisions(t, e, sampleNS)

		start := time.Now()
		kubectl(t, e, "", "-n", olmenv.OLMNamespace, "patch", "catalogsource", olmenv.CatalogSource, "--type=merge",
			"-p", fmt.Sprintf(`{"spec":{"image":%q}}`, next.CatalogImage))
		waitCSV(t, e, olmenv.OperatorsNamespace, next.CSV)
		kubectl(t, e, "", "-n", olmenv.OperatorsNamespace, "wait", "--for=delete", "csv/"+olmenv.CurrentCSV, "--timeout=2m")
		waitOperatorImage(t, e, olmenv.OperatorsNamespace, next.OperatorImage)
		t.Logf("catalog update → CSV %s Succeeded, %s gone, operator available: %.1fs", next.CSV, olmenv.CurrentCSV, time.Since(start).Seconds())

		eventually(t, 3*time.Minute, "the new chart's Service annotation", func() (bool, string) {
			out, _ := e.Kubectl("", "-n", sampleNS, "get", "service", sampleName,
				"-o", "jsonpath={.metadata.annotations['"+strings.ReplaceAll(olmenv.ChartVersionAnnotation, ".", `\.`)+"']}")
			return strings.TrimSpace(out) == next.Version, out
		})
		waitReady(t, e, sampleNS, sampleName)
		if after := servingPods(t, e, sampleNS); after != before {
			t.Errorf("the upgrade restarted serving pods:\nbefore %s\nafter  %s", before, after)
		}
		after := releaseRevisions(t, e, sampleNS)
		t.Logf("release revisions: %d before the upgrade, %d after", revisions, after)
		if after-revisions != 1 {
			t.Errorf("the upgrade made %d release revisions, want exactly 1 (for the changed chart)", after-revisions)
		}
	})
	if next == nil {
		t.Fatal("no next release to go on with")
	}

	t.Run("uninstalling the upgraded operator", func(t *testing.T) {
		kubectl(t, e, "", "-n", olmenv.OperatorsNamespace, "delete", "subscription", olmenv.Package)
		kubectl(t, e, "", "-n", olmenv.OperatorsNamespace, "delete", "csv", next.CSV)
		kubectl(t, e, "", "-n", olmenv.OperatorsNamespace, "wait", "--for=delete", "deployment/modelserver-controller-manager", "--timeout=2m")
		kubectl(t, e, "", "delete", "namespace", sampleNS, "--wait=false")
	})

	t.Run("an OwnNamespace Subscription with manual approval waits for each InstallPlan", func(t *testing.T) {
		const ns = "team-own"
		// A catalog of the namespace's own: OLM unpacks its bundles in the
		// catalog's namespace, so this install runs the unpack Job anew.
		kubectl(t, e, fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: own
  namespace: %[1]s
spec:
  targetNamespaces: [%[1]s]
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: modelserver
  namespace: %[1]s
spec:
  sourceType: grpc
  image: %[2]s
`, ns, next.CatalogImage), "apply", "-f", "-")
		start := time.Now()
		kubectl(t, e, subscription(ns, "modelserver", ns, "Manual", olmenv.CurrentCSV), "apply", "-f", "-")
		plan := waitPlanAwaitingApproval(t, e, ns, olmenv.CurrentCSV)
		// Nothing is installed while the plan waits.
		time.Sleep(10 * time.Second)
		if out := kubectl(t, e, "", "-n", ns, "get", "csv", "-o", "name"); out != "" {
			t.Fatalf("a CSV was installed before its InstallPlan was approved: %s", out)
		}
		checkUnpackJob(t, e, ns, e.BundleImage)
		kubectl(t, e, "", "-n", ns, "patch", "installplan", plan, "--type=merge", "-p", `{"spec":{"approved":true}}`)
		waitCSV(t, e, ns, olmenv.CurrentCSV)
		waitOperator(t, e, ns)
		t.Logf("OwnNamespace: Subscription → approved → operator available: %.1fs", time.Since(start).Seconds())
		watch := kubectl(t, e, "", "-n", ns, "get", "deployment", "modelserver-controller-manager",
			"-o", "jsonpath={.spec.template.metadata.annotations['olm\\.targetNamespaces']}")
		if watch != ns {
			t.Errorf("the operator's target namespaces are %q, want %q", watch, ns)
		}

		start = time.Now()
		createSample(t, e, ns, sampleName)
		waitReady(t, e, ns, sampleName)
		t.Logf("OwnNamespace: ModelServer → Ready: %.1fs", time.Since(start).Seconds())

		// The catalog has the next release: its upgrade waits too.
		plan = waitPlanAwaitingApproval(t, e, ns, next.CSV)
		if out := kubectl(t, e, "", "-n", ns, "get", "csv", next.CSV, "--ignore-not-found", "-o", "name"); out != "" {
			t.Fatalf("the upgrade was installed before its InstallPlan was approved: %s", out)
		}
		before := servingPods(t, e, ns)
		kubectl(t, e, "", "-n", ns, "patch", "installplan", plan, "--type=merge", "-p", `{"spec":{"approved":true}}`)
		waitCSV(t, e, ns, next.CSV)
		waitOperatorImage(t, e, ns, next.OperatorImage)
		waitReady(t, e, ns, sampleName)
		if after := servingPods(t, e, ns); after != before {
			t.Errorf("the approved upgrade restarted serving pods:\nbefore %s\nafter  %s", before, after)
		}
	})
}

// subscription is a Subscription to the package's channel; startingCSV
// may be empty.
func subscription(ns, source, sourceNS, approval, startingCSV string) string {
	s := fmt.Sprintf(`apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: %s
  namespace: %s
spec:
  name: %s
  channel: %s
  source: %s
  sourceNamespace: %s
  installPlanApproval: %s
`, olmenv.Package, ns, olmenv.Package, olmenv.Channel, source, sourceNS, approval)
	if startingCSV != "" {
		s += "  startingCSV: " + startingCSV + "\n"
	}
	return s
}

func waitCSV(t *testing.T, e *olmenv.Env, ns, csv string) {
	t.Helper()
	eventually(t, 5*time.Minute, "CSV "+csv+" Succeeded in "+ns, func() (bool, string) {
		out, err := e.Kubectl("", "-n", ns, "get", "csv", csv, "-o", "jsonpath={.status.phase} {.status.reason} {.status.message}")
		if err == nil && strings.HasPrefix(out, "Succeeded") {
			return true, ""
		}
		subs, _ := e.Kubectl("", "-n", ns, "get", "subscription", "-o", "jsonpath={range .items[*]}{.status.conditions}{end}")
		return false, fmt.Sprintf("%s %v; subscription conditions: %s", out, err, subs)
	})
}

func waitOperator(t *testing.T, e *olmenv.Env, ns string) {
	t.Helper()
	if _, err := e.Kubectl("", "-n", ns, "rollout", "status", "deployment/modelserver-controller-manager", "--timeout=3m"); err != nil {
		t.Fatalf("%v\n%s", err, e.Describe(ns, "pods", "-l", "app.kubernetes.io/component=manager"))
	}
}

func waitOperatorImage(t *testing.T, e *olmenv.Env, ns, image string) {
	t.Helper()
	eventually(t, 3*time.Minute, "the operator running "+image, func() (bool, string) {
		out, _ := e.Kubectl("", "-n", ns, "get", "deployment", "modelserver-controller-manager",
			"-o", "jsonpath={.spec.template.spec.containers[0].image}")
		return strings.TrimSpace(out) == image, out
	})
	waitOperator(t, e, ns)
}

// checkUnpackJob fails unless OLM's unpack Job for bundle ran to
// completion in ns with OLM's util, the bundle and the opm images.
func checkUnpackJob(t *testing.T, e *olmenv.Env, ns, bundle string) {
	t.Helper()
	out := kubectl(t, e, "", "-n", ns, "get", "jobs", "-l", "operatorframework.io/bundle-unpack-ref",
		"-o", `jsonpath={range .items[*]}{.status.succeeded} {.spec.template.spec.initContainers[*].image} {.spec.template.spec.containers[*].image}{"\n"}{end}`)
	want := fmt.Sprintf("1 %s %s %s", e.OLMImage, bundle, e.OPMImage)
	if !strings.Contains(out, want) {
		t.Errorf("no completed unpack Job in %s for %s; want a line %q, got:\n%s", ns, bundle, want, out)
	}
}

// waitPlanAwaitingApproval returns the InstallPlan for csv once it waits
// for approval.
func waitPlanAwaitingApproval(t *testing.T, e *olmenv.Env, ns, csv string) string {
	t.Helper()
	var plan string
	eventually(t, 5*time.Minute, "an InstallPlan for "+csv+" awaiting approval", func() (bool, string) {
		out, _ := e.Kubectl("", "-n", ns, "get", "installplans",
			"-o", `jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.spec.approved} {.spec.clusterServiceVersionNames}{"\n"}{end}`)
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) >= 4 && f[1] == "RequiresApproval" && f[2] == "false" && strings.Contains(f[3], csv) {
				plan = f[0]
				return true, ""
			}
		}
		return false, out
	})
	return plan
}

func createSample(t *testing.T, e *olmenv.Env, ns, name string) {
	t.Helper()
	kubectl(t, e, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n", "apply", "-f", "-")
	kubectl(t, e, e.CredentialsSecret("s3-creds", ""), "-n", ns, "apply", "-f", "-")
	kubectl(t, e, e.ModelServerYAML(realenv.ModelServer{Name: name, URI: realenv.HalfPlusTwo}), "-n", ns, "apply", "-f", "-")
}

func waitReady(t *testing.T, e *olmenv.Env, ns, name string) { //nolint:unparam // takes the name as createSample and waitReconciled do
	t.Helper()
	if _, err := e.Kubectl("", "-n", ns, "wait", "--for=condition=Ready", "modelserver/"+name, "--timeout=4m"); err != nil {
		t.Fatalf("%v\n%s", err, e.Describe(ns, "modelserver/"+name))
	}
}

// waitReconciled waits until the running operator has reconciled the
// ModelServer's current generation and found it Ready.
func waitReconciled(t *testing.T, e *olmenv.Env, ns, name string) {
	t.Helper()
	eventually(t, 3*time.Minute, "the operator reconciling "+name, func() (bool, string) {
		out, _ := e.Kubectl("", "-n", ns, "get", "modelserver", name,
			"-o", `jsonpath={.metadata.generation} {.status.observedGeneration} {.status.conditions[?(@.type=="Ready")].status}`)
		f := strings.Fields(out)
		return len(f) == 3 && f[0] == f[1] && f[2] == "True", out
	})
}

// servingPods are the ModelServers' pods in ns: name, UID and restart
// counts, which an operator install, uninstall or upgrade must not change.
func servingPods(t *testing.T, e *olmenv.Env, ns string) string {
	t.Helper()
	out := kubectl(t, e, "", "-n", ns, "get", "pods", "-l", "app.kubernetes.io/component=serving",
		"-o", `jsonpath={range .items[*]}{.metadata.name}/{.metadata.uid}/{.status.containerStatuses[*].restartCount}{"\n"}{end}`)
	lines := strings.Fields(out)
	if len(lines) == 0 {
		t.Fatalf("no serving pods in %s", ns)
	}
	sort.Strings(lines)
	return strings.Join(lines, " ")
}

// releaseRevisions counts the Helm release revisions stored in ns.
func releaseRevisions(t *testing.T, e *olmenv.Env, ns string) int { //nolint:unparam // takes the namespace as servingPods does
	t.Helper()
	out := kubectl(t, e, "", "-n", ns, "get", "secrets", "-l", "owner=helm", "-o", "name")
	return len(strings.Fields(out))
}
