package fetchcmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWaitForModelReturnsOnceEveryManifestExists(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a", ".modelserver-fetch.json"), filepath.Join(dir, "b", ".modelserver-fetch.json")
	if err := os.MkdirAll(filepath.Dir(a), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var log bytes.Buffer
	go func() {
		done <- waitForModel(context.Background(), []string{"--file", a, "--file", b}, &log, 10*time.Millisecond, 20*time.Millisecond)
	}()
	select {
	case err := <-done:
		t.Fatalf("returned %v with %s still missing", err, b)
	case <-time.After(200 * time.Millisecond):
	}
	if err := os.MkdirAll(filepath.Dir(b), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after both manifests exist")
	}
	if !strings.Contains(log.String(), "waiting for the model fetch") || !strings.Contains(log.String(), b) {
		t.Errorf("the log does not name the missing manifest:\n%s", log.String())
	}
}

func TestWaitForModelStopsOnSignalAndRefusesNoFiles(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := waitForModel(ctx, []string{"--file", filepath.Join(t.TempDir(), "never")}, &bytes.Buffer{}, time.Millisecond, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "stopped while waiting") {
		t.Errorf("cancelled wait: %v", err)
	}
	if err := waitForModel(context.Background(), nil, &bytes.Buffer{}, time.Millisecond, time.Minute); err == nil {
		t.Error("no --file was accepted")
	}
}

func TestTheWaitLooksOftenAtFirstAndNeverMoreSeldomThanItsPoll(t *testing.T) {
	const most = 2 * time.Second
	for _, c := range []struct{ waited, want time.Duration }{
		{0, 100 * time.Millisecond},
		{500 * time.Millisecond, 100 * time.Millisecond},
		{3 * time.Second, 300 * time.Millisecond},
		{20 * time.Second, most},
		{time.Hour, most},
	} {
		if got := nextPoll(c.waited, most); got != c.want {
			t.Errorf("after %s: next look in %s, want %s", c.waited, got, c.want)
		}
	}
}
