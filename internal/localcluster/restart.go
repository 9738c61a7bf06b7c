package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// RestartAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after
// grace), starts it again with the same flags, port and etcd, and returns
// once it is ready. Clients see their connections drop and watches end, as
// in a control-plane upgrade. down, if positive, is how long the apiserver
// stays away before it is started again.
func (c *Cluster) RestartAPIServer(ctx context.Context, grace, down time.Duration) error {
	c.mu.Lock()
	idx := -1
	for i, p := range c.procs {
		if p.name == apiserverName {
			idx = i
		}
	}
	if idx < 0 {
		c.mu.Unlock()
		return fmt.Errorf("no %s in this cluster", apiserverName)
	}
	old := c.procs[idx]
	c.mu.Unlock()

	old.Stop(grace)
	if down > 0 {
		select {
		case <-time.After(down):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.mu.Lock()
	// The log of the run that ended is kept beside the new one.
	_ = os.Rename(old.logFile, fmt.Sprintf("%s.%d", old.logFile, time.Now().UnixNano()))
	p, err := startProcess(apiserverName, old.cmd.Path, old.cmd.Args[1:], nil,
		filepath.Join(c.Dir, "logs"), filepath.Join(c.Dir, "pids"))
	if err == nil {
		c.procs[idx] = p
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	return c.waitAPIReady(ctx, p, cs)
}
