package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var spawnBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fetchbench-test-")
	if err != nil {
		panic(err)
	}
	spawnBinary = filepath.Join(dir, "spawn")
	build := exec.Command("go", "build", "-o", spawnBinary, "./spawn")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	code := 1
	if err := build.Run(); err == nil {
		code = m.Run()
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// A command smaller than the harness is reported at its own size, not at
// the harness's: started by the harness directly, true would be reported
// at the harness's 256 MiB.
func TestThePeakRSSIsTheCommandsNotTheHarnesss(t *testing.T) {
	ballast := make([]byte, 256<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	dir := t.TempDir()
	s, err := measure(context.Background(), spawnBinary, []string{"true"}, nil, dir, filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("true: %v MiB peak RSS, %v s; the harness holds %d MiB", s.PeakRSSMiB, s.Seconds, len(ballast)>>20)
	if s.PeakRSSMiB <= 0 || s.PeakRSSMiB > 16 {
		t.Errorf("true's peak RSS is %v MiB", s.PeakRSSMiB)
	}
	if s.Seconds <= 0 || s.Seconds > 10 {
		t.Errorf("true took %v s", s.Seconds)
	}
}

func TestAFailingCommandIsAnErrorNamingItsLog(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	_, err := measure(context.Background(), spawnBinary, []string{"false"}, nil, dir, log)
	if err == nil || !strings.Contains(err.Error(), log) {
		t.Errorf("measure(false) = %v; want an error naming %s", err, log)
	}
}
