package olmenv

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

// TestTheCatalogImageAndCatalogDockerfileAgree: the OLM tests build the
// catalog image without an engine, as catalog.Dockerfile describes it. The
// two must not drift: the Dockerfile's opm is the pinned opm the tests
// use, and its command, label and configs directory are the image's.
func TestTheCatalogImageAndCatalogDockerfileAgree(t *testing.T) {
	root, err := localcluster.RepositoryRoot()
	if err != nil {
		t.Fatal(err)
	}
	opmVersion := requiredVersion(t, filepath.Join(root, "hack", "tools", "olm", "go.mod"), "github.com/operator-framework/operator-registry")
	df := dockerfile(t, filepath.Join(root, "catalog.Dockerfile"))

	if want := "quay.io/operator-framework/opm:" + opmVersion; df["FROM"] != want {
		t.Errorf("catalog.Dockerfile is FROM %q; the tests build it on opm %s: want %q", df["FROM"], opmVersion, want)
	}
	dir := t.TempDir()
	for _, bin := range []string{"opm", "grpc_health_probe"} {
		if err := os.WriteFile(filepath.Join(dir, bin), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	spec := OPMImage(dir)
	spec.Cmd, spec.Labels = catalogCmd, catalogLabels()
	for what, pair := range map[string][2]any{
		"ENTRYPOINT": {df["ENTRYPOINT"], spec.Entrypoint},
		"CMD":        {df["CMD"], spec.Cmd},
	} {
		var got []string
		if err := json.Unmarshal([]byte(pair[0].(string)), &got); err != nil {
			t.Fatalf("%s %s is not in exec form: %v", what, pair[0], err)
		}
		if want := pair[1].([]string); !slices.Equal(got, want) {
			t.Errorf("catalog.Dockerfile's %s is %q, the built image's %q", what, got, want)
		}
	}
	if label := "operators.operatorframework.io.index.configs.v1=" + spec.Labels[configsLabel]; df["LABEL"] != label {
		t.Errorf("catalog.Dockerfile's LABEL is %q, want %q", df["LABEL"], label)
	}
	if df["ADD"] != "catalog "+catalogConfigsDir {
		t.Errorf("catalog.Dockerfile adds %q, want the catalog at %s", df["ADD"], catalogConfigsDir)
	}
}

// dockerfile maps each instruction of a one-stage Dockerfile without
// repeated instructions (but RUN) to its argument.
func dockerfile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		keyword, arg, _ := strings.Cut(line, " ")
		out[keyword] = strings.TrimSpace(arg)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func requiredVersion(t *testing.T, gomod, module string) string {
	t.Helper()
	data, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require ")); len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("%s does not require %s", gomod, module)
	return ""
}
