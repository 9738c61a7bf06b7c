package olmenv

import (
	"strings"
	"testing"
	"time"
)

// MustKubectl runs kubectl against e's cluster and fails t on an error; it
// returns the output without surrounding space.
func MustKubectl(t testing.TB, e *Env, stdin string, args ...string) string {
	t.Helper()
	out, err := e.Kubectl(stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// Eventually polls cond every second until it holds or timeout passes,
// then fails t with what cond last said.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
		}
		time.Sleep(time.Second)
	}
}
