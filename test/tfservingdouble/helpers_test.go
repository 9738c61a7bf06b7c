package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testModels is TF Serving's own test models, beside the checkout.
func testModels(t *testing.T, name string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "testdata", "tf-serving", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("TF Serving's test models are not at %s", dir)
	}
	return dir
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// addVersion makes base/name a loadable version directory.
func addVersion(t *testing.T, base, name string) string {
	t.Helper()
	dir := filepath.Join(base, name)
	writeFile(t, filepath.Join(dir, "saved_model.pb"), "not a real graph")
	return dir
}

// removeVersion takes version name off the disk under base.
func removeVersion(t *testing.T, base, name string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(base, name)); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer collects the log of a double that runs in other goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newTestCore(t *testing.T, allowUnavailableLabels bool) (*core, *syncBuffer) {
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("double's log:\n%s", logs)
		}
	})
	return newCore(newLogger(logs), newMetrics(), allowUnavailableLabels), logs
}

// apply reloads a config as the model config poller does, standing in for
// the file system source by polling until the reload returns. The source
// is driven by hand so that tests see each step.
func apply(t *testing.T, c *core, src string) error {
	t.Helper()
	cfg, err := parseModelServerConfig(src)
	if err != nil {
		t.Fatalf("config does not parse: %v\n%s", err, src)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.reloadConfig(ctx, cfg) }()
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Millisecond):
			c.pollFileSystem()
		}
	}
}

func mustApply(t *testing.T, c *core, src string) {
	t.Helper()
	if err := apply(t, c, src); err != nil {
		t.Fatalf("reload: %v\n%s", err, src)
	}
}

// model writes one model's config entry; extra is inserted verbatim.
func model(name, base, extra string) string {
	return "config {\n name: \"" + name + "\"\n base_path: \"" + base + "\"\n model_platform: \"tensorflow\"\n" + extra + "}\n"
}

func modelList(models ...string) string {
	return "model_config_list {\n" + strings.Join(models, "") + "}\n"
}

// states is a model's status as "version:STATE" words, highest first.
func states(t *testing.T, c *core, name string) string {
	t.Helper()
	reports, err := c.modelStatus(name, nil)
	if err != nil {
		return codeOf(err).String()
	}
	var words []string
	for _, r := range reports {
		words = append(words, formatReport(r))
	}
	return strings.Join(words, " ")
}

func formatReport(r versionReport) string {
	s := strconv.FormatInt(r.version, 10) + ":" + r.state.String()
	if r.err != nil {
		s += "(" + codeOf(r.err).String() + ")"
	}
	return s
}
