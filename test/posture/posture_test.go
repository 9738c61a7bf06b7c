// Package posture checks the operator's security posture in the files it
// ships: the RBAC it asks for, the pod it runs in, the image it is built
// into.
package posture

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func repoPath(rel string) string { return filepath.Join("..", "..", rel) }

// objects reads every YAML document of the files as unstructured objects.
func objects(t *testing.T, files ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(fh), 4096)
		for {
			var m map[string]any
			err := dec.Decode(&m)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if m != nil {
				out = append(out, &unstructured.Unstructured{Object: m})
			}
		}
		_ = fh.Close()
	}
	return out
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &v); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return &v
}

// csv is the part of the ClusterServiceVersion the checks read.
type csv struct {
	Spec struct {
		Install struct {
			Spec struct {
				Permissions        []struct{ Rules []rbacv1.PolicyRule } `json:"permissions"`
				ClusterPermissions []struct{ Rules []rbacv1.PolicyRule } `json:"clusterPermissions"`
				Deployments        []struct {
					Name string                `json:"name"`
					Spec appsv1.DeploymentSpec `json:"spec"`
				} `json:"deployments"`
			} `json:"spec"`
		} `json:"install"`
	} `json:"spec"`
}

func readCSV(t *testing.T) *csv {
	t.Helper()
	files, err := filepath.Glob(repoPath("bundle/manifests/*.clusterserviceversion.yaml"))
	if err != nil || len(files) != 1 {
		t.Fatalf("want one CSV, found %v (%v)", files, err)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var c csv
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func checkRules(t *testing.T, where string, rules []rbacv1.PolicyRule) {
	t.Helper()
	for _, r := range rules {
		for _, list := range [][]string{r.Verbs, r.Resources, r.APIGroups, r.ResourceNames} {
			if slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, "*") }) {
				t.Errorf("%s: wildcard in rule %+v", where, r)
			}
		}
		if slices.Contains(r.Verbs, "escalate") || slices.Contains(r.Verbs, "bind") || slices.Contains(r.Verbs, "impersonate") {
			t.Errorf("%s: privilege-granting verb in rule %+v", where, r)
		}
	}
}

func TestTheOperatorsRBACHasNoWildcards(t *testing.T) {
	files, err := filepath.Glob(repoPath("config/rbac/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, repoPath("dist/install.yaml"))
	roles := 0
	for _, o := range objects(t, files...) {
		switch o.GetKind() {
		case "Role", "ClusterRole":
			roles++
			checkRules(t, o.GetKind()+" "+o.GetName(), convert[rbacv1.ClusterRole](t, o).Rules)
		}
	}
	if roles == 0 {
		t.Fatal("no Role or ClusterRole found")
	}
	c := readCSV(t)
	for _, p := range c.Spec.Install.Spec.Permissions {
		checkRules(t, "CSV permissions", p.Rules)
	}
	for _, p := range c.Spec.Install.Spec.ClusterPermissions {
		checkRules(t, "CSV clusterPermissions", p.Rules)
	}
}

// What the operator needs cluster-wide whatever its install mode: its
// metrics endpoint asks the apiserver who a scraper is and what it may do,
// and the IngressClasses, cluster-scoped, say whether a controller will
// serve a ModelServer's Ingress.
var clusterScopedNeeds = []string{"tokenreviews", "subjectaccessreviews", "ingressclasses"}

func TestTheCSVAsksClusterWideOnlyForWhatCannotBeNamespaced(t *testing.T) {
	c := readCSV(t)
	if len(c.Spec.Install.Spec.Permissions) == 0 {
		t.Fatal("the CSV has no namespaced permissions")
	}
	for _, p := range c.Spec.Install.Spec.ClusterPermissions {
		for _, r := range p.Rules {
			for _, res := range r.Resources {
				if !slices.Contains(clusterScopedNeeds, res) {
					t.Errorf("CSV clusterPermissions grant %s %v; grant it in permissions (namespaced) instead", res, r.Verbs)
				}
			}
		}
	}
}

func checkPodRunsRestricted(t *testing.T, where string, spec corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: pod does not set runAsNonRoot: true", where)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod has no RuntimeDefault seccomp profile", where)
	}
	if len(spec.Containers) == 0 {
		t.Fatalf("%s: no containers", where)
	}
	for _, ctr := range append(spec.InitContainers, spec.Containers...) {
		sc := ctr.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("%s: container %s has no securityContext", where, ctr.Name)
			continue
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("%s: container %s root filesystem is writable", where, ctr.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("%s: container %s allows privilege escalation", where, ctr.Name)
		case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
			t.Errorf("%s: container %s does not drop all capabilities", where, ctr.Name)
		case sc.Privileged != nil && *sc.Privileged:
			t.Errorf("%s: container %s is privileged", where, ctr.Name)
		case sc.RunAsUser != nil && *sc.RunAsUser == 0:
			t.Errorf("%s: container %s runs as root", where, ctr.Name)
		}
	}
}

func TestTheOperatorRunsAsNonRootWithAReadOnlyRootFilesystem(t *testing.T) {
	deployments := 0
	for _, f := range []string{"config/manager/manager.yaml", "dist/install.yaml"} {
		for _, o := range objects(t, repoPath(f)) {
			if o.GetKind() == "Deployment" {
				deployments++
				checkPodRunsRestricted(t, f, convert[appsv1.Deployment](t, o).Spec.Template.Spec)
			}
		}
	}
	for _, d := range readCSV(t).Spec.Install.Spec.Deployments {
		deployments++
		checkPodRunsRestricted(t, "CSV deployment "+d.Name, d.Spec.Template.Spec)
	}
	if deployments < 3 {
		t.Errorf("found %d operator Deployments, want the one in config/manager, dist/install.yaml and the CSV", deployments)
	}
}

// The image's last stage runs as a numeric non-root user (so that
// runAsNonRoot can be checked without a passwd file) on a base without a
// shell.
func TestTheOperatorImageRunsAsANonRootUser(t *testing.T) {
	raw, err := os.ReadFile(repoPath("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var from, user string
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			from, user = fields[1], "" // a new stage starts as root
		case "USER":
			user = fields[1]
		}
	}
	if !strings.HasPrefix(from, "gcr.io/distroless/") || !strings.Contains(from, "nonroot") {
		t.Errorf("final stage FROM %s, want a distroless nonroot base", from)
	}
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || strings.Trim(uid, "0123456789") != "" {
		t.Errorf("final stage USER %q, want a numeric non-root uid", user)
	}
}
