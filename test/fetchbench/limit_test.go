package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLimitMemoryWithoutALimitLeavesTheCommand(t *testing.T) {
	args := []string{"/bin/true", "x"}
	l, err := limitMemory(0, args)
	if err != nil {
		t.Fatal(err)
	}
	defer l.remove()
	if !slices.Equal(l.args, args) {
		t.Errorf("args = %q, want %q", l.args, args)
	}
	if peak, err := l.peakMiB(); peak != 0 || err != nil {
		t.Errorf("peakMiB() = %v, %v; want 0 without a cgroup", peak, err)
	}
}

// TestLimitMemoryRunsTheToolInItsCgroup: the tool, not the harness or the
// spawn program, is charged for what it writes.
func TestLimitMemoryRunsTheToolInItsCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup needs root")
	}
	l, err := limitMemory(64<<20, []string{"/bin/cat", "/proc/self/cgroup"})
	if err != nil {
		t.Skipf("no memory cgroup here: %v", err)
	}
	defer l.remove()
	out, err := exec.Command(l.args[0], l.args[1:]...).Output()
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Base(l.cg.Dirs()[0])
	if !strings.Contains(string(out), "/"+own) {
		t.Errorf("the command ran in %s, not in the cgroup %s", out, own)
	}
	if peak, err := l.peakMiB(); err != nil || peak <= 0 {
		t.Errorf("peakMiB() = %v, %v; want the command's charge", peak, err)
	}
}
