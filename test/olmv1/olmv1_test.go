package olmv1

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/test/olmenv"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// The sample the test serves, in a namespace of its own.
const (
	sampleNS   = "ml-team"
	sampleName = "half-plus-two"
)

// nextVersion is the operator's next release, which the upgrade goes to;
// the environment builds it before taking the real node.
const nextVersion = "0.2.0"

// installer is the installer ServiceAccount as kubectl impersonates it.
const installer = "system:serviceaccount:" + installNS + ":" + installerSA

// TestOLMv1InstallsAndUpgradesTheOperator walks what a cluster admin does
// with OLM v1, in order, each step building on the last: give an installer
// ServiceAccount the least it needs, serve the catalog, install the
// operator with a ClusterExtension pinned to this release, serve a model,
// then move the pin to the next release.
func TestOLMv1InstallsAndUpgradesTheOperator(t *testing.T) {
	e, o := startOLMv1(t)

	t.Run("the installer ServiceAccount holds no power to escalate", func(t *testing.T) {
		kubectl(t, e, installerRBAC, "apply", "-f", "-")
		for _, check := range []struct{ verb, resource, ns string }{
			{"escalate", "clusterroles", ""},
			{"bind", "clusterroles", ""},
			{"delete", "customresourcedefinitions", ""},
			{"delete", "clusterroles/cluster-admin", ""},
			{"patch", "clusterrolebindings/cluster-admin", ""},
			{"update", "clusterextensions", ""},
			{"create", "serviceaccounts", "default"},
			{"create", "pods", installNS},
			{"impersonate", "serviceaccounts", ""},
			{"create", "namespaces", ""},
		} {
			args := []string{"auth", "can-i", check.verb, check.resource, "--as=" + installer}
			if check.ns != "" {
				args = append(args, "-n", check.ns)
			}
			// can-i answers "no" with exit status 1, on its last line (after
			// warnings about cluster-scoped resources).
			out, _ := e.Kubectl("", args...)
			if lines := strings.Split(strings.TrimSpace(out), "\n"); lines[len(lines)-1] != "no" {
				t.Errorf("the installer can %s %s (namespace %q): %q", check.verb, check.resource, check.ns, out)
			}
		}
	})

	t.Run("catalogd serves the catalog image", func(t *testing.T) {
		start := time.Now()
		kubectl(t, e, clusterCatalog(e.CatalogImage), "apply", "-f", "-")
		kubectlWait(t, e, o, "", "clustercatalog/"+catalogName,
			"wait", "--for=condition=Serving=True", "clustercatalog/"+catalogName, "--timeout=3m")
		t.Logf("ClusterCatalog → Serving: %.1fs", time.Since(start).Seconds())
		got := kubectl(t, e, "", "get", "clustercatalog", catalogName, "-o",
			`jsonpath={.status.resolvedSource.image.ref} {.metadata.labels.olm\.operatorframework\.io/metadata\.name}`)
		repo, _, _ := strings.Cut(e.CatalogImage, ":")
		if !strings.HasPrefix(got, repo+"@sha256:") || !strings.HasSuffix(got, " "+catalogName) {
			t.Errorf("ClusterCatalog: resolved image and webhook's name label %q, want %s@sha256:... and %s", got, repo, catalogName)
		}
	})

	var created time.Time
	t.Run("a ClusterExtension installs the operator from its bundle image", func(t *testing.T) {
		created = time.Now()
		kubectl(t, e, clusterExtension(olmenv.Package, olmenv.Channel, olmenv.CurrentVersion), "apply", "-f", "-")
		waitInstalled(t, e, o, olmenv.CurrentVersion)
		t.Logf("ClusterExtension → Installed %s: %.1fs", olmenv.CurrentVersion, time.Since(created).Seconds())
		kubectlWait(t, e, o, installNS, "pods",
			"-n", installNS, "wait", "--for=condition=Available", "deployment/"+operatorDeployment, "--timeout=4m")
		t.Logf("ClusterExtension → the operator's Deployment available: %.1fs", time.Since(created).Seconds())

		pod := kubectl(t, e, "", "-n", installNS, "get", "pods", "-l", "app.kubernetes.io/component=manager",
			"-o", "jsonpath={.items[0].spec.nodeName} {.items[0].status.containerStatuses[0].image}")
		if want := localcluster.RealNodeName + " " + operatorImage(olmenv.CurrentVersion); pod != want {
			t.Errorf("the operator's pod: %q, want %q", pod, want)
		}
		owner := kubectl(t, e, "", "-n", installNS, "get", "deployment", operatorDeployment,
			"-o", "jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}")
		if owner != "ClusterExtension/"+extensionName {
			t.Errorf("the operator's Deployment is owned by %q, want ClusterExtension/%s", owner, extensionName)
		}
	})

	t.Run("the operator takes the sample to Ready", func(t *testing.T) {
		start := time.Now()
		kubectl(t, e, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+sampleNS+"\n", "apply", "-f", "-")
		kubectl(t, e, e.CredentialsSecret("s3-creds", ""), "-n", sampleNS, "apply", "-f", "-")
		kubectl(t, e, e.ModelServerYAML(realenv.ModelServer{Name: sampleName, URI: realenv.HalfPlusTwo}), "-n", sampleNS, "apply", "-f", "-")
		waitReady(t, e, sampleNS, sampleName)
		t.Logf("ModelServer → Ready: %.1fs; ClusterExtension → sample Ready: %.1fs",
			time.Since(start).Seconds(), time.Since(created).Seconds())
	})

	t.Run("a version constraint upgrades the operator to the next release", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		next, err := e.MakeRelease(ctx, nextVersion)
		if err != nil {
			t.Fatalf("make release %s: %v", nextVersion, err)
		}
		readySince := readyTransition(t, e)

		start := time.Now()
		before := kubectl(t, e, "", "get", "clustercatalog", catalogName, "-o", "jsonpath={.status.resolvedSource.image.ref}")
		kubectl(t, e, "", "patch", "clustercatalog", catalogName, "--type=merge",
			"-p", fmt.Sprintf(`{"spec":{"source":{"image":{"ref":%q}}}}`, next.CatalogImage))
		eventually(t, 3*time.Minute, "catalogd serving "+next.CatalogImage, func() (bool, string) {
			out, _ := e.Kubectl("", "get", "clustercatalog", catalogName, "-o",
				`jsonpath={.status.resolvedSource.image.ref} {.status.conditions[?(@.type=="Serving")].status}`)
			f := strings.Fields(out)
			return len(f) == 2 && f[0] != before && f[1] == "True", out
		})
		t.Logf("ClusterCatalog → Serving %s: %.1fs", next.CatalogImage, time.Since(start).Seconds())
		// Pinned, the extension stays where it is whatever the catalog holds.
		if v := installedVersion(t, e); v != olmenv.CurrentVersion {
			t.Fatalf("the ClusterExtension pinned to %s moved to %s when the catalog changed", olmenv.CurrentVersion, v)
		}

		start = time.Now()
		kubectl(t, e, "", "patch", "clusterextension", extensionName, "--type=merge",
			"-p", fmt.Sprintf(`{"spec":{"source":{"catalog":{"version":%q}}}}`, next.Version))
		waitInstalled(t, e, o, next.Version)
		t.Logf("version %s → Installed: %.1fs", next.Version, time.Since(start).Seconds())
		kubectlWait(t, e, o, installNS, "pods",
			"-n", installNS, "rollout", "status", "deployment/"+operatorDeployment, "--timeout=4m")
		t.Logf("version %s → the new operator's Deployment rolled out: %.1fs", next.Version, time.Since(start).Seconds())
		if img := kubectl(t, e, "", "-n", installNS, "get", "deployment", operatorDeployment,
			"-o", "jsonpath={.spec.template.spec.containers[0].image}"); img != next.OperatorImage {
			t.Errorf("the operator's Deployment runs %s, want %s", img, next.OperatorImage)
		}

		eventually(t, 3*time.Minute, "the new chart's Service annotation", func() (bool, string) {
			out, _ := e.Kubectl("", "-n", sampleNS, "get", "service", sampleName,
				"-o", "jsonpath={.metadata.annotations['"+strings.ReplaceAll(olmenv.ChartVersionAnnotation, ".", `\.`)+"']}")
			return strings.TrimSpace(out) == next.Version, out
		})
		t.Logf("version %s → the new operator reconciled the sample with its chart: %.1fs", next.Version, time.Since(start).Seconds())
		waitReady(t, e, sampleNS, sampleName)
		if after := readyTransition(t, e); after != readySince {
			t.Errorf("the sample's Ready condition changed during the upgrade (last transition %s, was %s)", after, readySince)
		}
	})
}

// operatorImage is the operator's image for version, as its CSV names it.
func operatorImage(version string) string {
	return olmenv.PublicRegistry + "/" + olmenv.OperatorRepo + ":" + version
}

// waitInstalled waits, as docs/olm.md does, until the ClusterExtension has
// installed version and says so, and has reached the state it was asked
// for: OLM says Installed before it watches what it installed (as the
// installer, which must be allowed to), and Progressing after.
func waitInstalled(t *testing.T, e *olmenv.Env, o *olmenv.OLMv1, version string) {
	t.Helper()
	ext := "clusterextension/" + extensionName
	for _, cond := range []string{
		"--for=jsonpath={.status.install.bundle.version}=" + version,
		"--for=condition=Installed=True",
		`--for=jsonpath={.status.conditions[?(@.type=="Progressing")].reason}=Succeeded`,
	} {
		kubectlWait(t, e, o, "", ext, "wait", cond, ext, "--timeout=5m")
	}
	out := kubectl(t, e, "", "get", ext, "-o",
		`jsonpath={.metadata.generation} {.status.conditions[?(@.type=="Progressing")].observedGeneration}`)
	if gen, observed, _ := strings.Cut(out, " "); gen != observed {
		t.Fatalf("%s: Progressing is about generation %s, not the current %s\n%s", ext, observed, gen, e.Describe("", ext))
	}
}

func installedVersion(t *testing.T, e *olmenv.Env) string {
	t.Helper()
	return kubectl(t, e, "", "get", "clusterextension", extensionName, "-o", "jsonpath={.status.install.bundle.version}")
}

func waitReady(t *testing.T, e *olmenv.Env, ns, name string) {
	t.Helper()
	if _, err := e.Kubectl("", "-n", ns, "wait", "--for=condition=Ready", "modelserver/"+name, "--timeout=5m"); err != nil {
		t.Fatalf("%v\n%s\n%s", err, e.Describe(ns, "modelserver/"+name), e.Describe(ns, "pods"))
	}
}

// readyTransition is when the sample last became Ready: the same before and
// after a step means it stayed Ready throughout.
func readyTransition(t *testing.T, e *olmenv.Env) string {
	t.Helper()
	out := kubectl(t, e, "", "-n", sampleNS, "get", "modelserver", sampleName,
		"-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastTransitionTime}`)
	status, since, _ := strings.Cut(out, " ")
	if status != "True" {
		t.Fatalf("the sample is not Ready: %q", out)
	}
	return since
}
