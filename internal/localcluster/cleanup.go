package localcluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Three layers keep a cluster from outliving the process that started it:
//  1. Stop, called by the owner (ForTest registers it with t.Cleanup).
//  2. On SIGINT, SIGTERM or SIGHUP, every live cluster is stopped before the
//     process exits, so an interrupted `go test` leaves nothing behind.
//  3. Children die with the process through Pdeathsig (process.go), which
//     covers a panic, a test timeout or SIGKILL; the directories such a death
//     leaves are removed by the next Start (CleanStale).

var live struct {
	sync.Mutex
	clusters map[*Cluster]struct{}
	handler  sync.Once
}

func track(c *Cluster) {
	live.handler.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		go func() {
			sig := <-ch
			stopAll()
			code := 1
			if s, ok := sig.(syscall.Signal); ok {
				code = 128 + int(s)
			}
			os.Exit(code)
		}()
	})
	live.Lock()
	defer live.Unlock()
	if live.clusters == nil {
		live.clusters = map[*Cluster]struct{}{}
	}
	live.clusters[c] = struct{}{}
}

func untrack(c *Cluster) {
	live.Lock()
	defer live.Unlock()
	delete(live.clusters, c)
}

func stopAll() {
	live.Lock()
	clusters := make([]*Cluster, 0, len(live.clusters))
	for c := range live.clusters {
		clusters = append(clusters, c)
	}
	live.Unlock()
	var wg sync.WaitGroup
	for _, c := range clusters {
		wg.Go(c.Stop)
	}
	wg.Wait()
}

// clustersRoot holds one directory per cluster, named <owner pid>-<random>.
func clustersRoot() string {
	return filepath.Join(os.TempDir(), "modelserver-localcluster")
}

func newClusterDir() (string, error) {
	root := clustersRoot()
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	return os.MkdirTemp(root, fmt.Sprintf("%d-", os.Getpid()))
}

// ScratchDir makes a directory for work that goes with this process: its
// caller removes it, or, if the process dies first, the next cluster's
// start does (CleanStale), as it does a dead process's cluster.
func ScratchDir() (string, error) { return newClusterDir() }

// CleanStale removes the directories of clusters whose owning process is
// gone, killing any component of theirs that is somehow still alive.
func CleanStale() {
	entries, err := os.ReadDir(clustersRoot())
	if err != nil {
		return
	}
	for _, e := range entries {
		pidText, _, ok := strings.Cut(e.Name(), "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidText)
		if err != nil || processAlive(pid) {
			continue
		}
		dir := filepath.Join(clustersRoot(), e.Name())
		if _, err := os.Stat(filepath.Join(dir, hostStateFile)); err == nil {
			// A real node's: its reaper may still be tearing it down, and
			// its mounts must go before its files. The next real node's
			// start sweeps it, holding the lock.
			continue
		}
		killRecorded(filepath.Join(dir, "pids"), dir)
		_ = os.RemoveAll(dir)
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// insecureClient probes the health endpoints of kube-controller-manager and
// kube-scheduler, which serve self-signed certificates on loopback.
func insecureClient() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health probe of a self-signed test component
}
