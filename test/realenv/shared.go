package realenv

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

// RequireRealNodeEnv names the variable that, when set (CI does, as
// root), turns a machine that cannot run a real node into a failure
// instead of a skip.
const RequireRealNodeEnv = "LOCALCLUSTER_REQUIRE_REAL_NODE"

// Shared is an environment the tests of one package share, started by the
// first test that asks for it: starting one costs a minute or more.
type Shared[T any] struct {
	once    sync.Once
	val     T
	started bool
	err     error
	skip    error
}

// Get returns the environment, calling start on first use; where this
// machine cannot run containers it skips the test in one line.
func (s *Shared[T]) Get(t testing.TB, start func() (T, error)) T {
	t.Helper()
	s.once.Do(func() {
		if err := localcluster.RealNodeSupport(""); err != nil {
			if os.Getenv(RequireRealNodeEnv) != "" {
				s.err = fmt.Errorf("%s is set, but %w", RequireRealNodeEnv, err)
			} else {
				s.skip = err
			}
			return
		}
		s.val, s.err = start()
		s.started = true
	})
	if s.skip != nil {
		t.Skip(s.skip)
	}
	if s.err != nil {
		t.Fatalf("real-node environment: %v", s.err)
	}
	return s.val
}

// Started returns the environment if a test started it (even one that
// then failed), for TestMain to stop.
func (s *Shared[T]) Started() (T, bool) { return s.val, s.started }

// Main runs a test package's tests (a TestMain's body), then stops the
// shared environment's cluster, if a test started one, and fails the run
// when the real node was not torn down cleanly.
func (s *Shared[T]) Main(m *testing.M, cluster func(T) *localcluster.Cluster) {
	code := m.Run()
	if v, ok := s.Started(); ok {
		if c := cluster(v); c != nil {
			c.Stop()
			if err := c.TeardownError(); err != nil {
				fmt.Fprintln(os.Stderr, "real node teardown:", err)
				code = 1
			}
		}
	}
	os.Exit(code)
}
