// Package fetchcmd holds the commands the operator's image runs in the
// pods of a ModelServer: `fetch`, the model-fetch Job's, and
// `wait-for-model` and `tls-config`, the serving pods' init containers'.
// The fetcher binary runs them in new pods; the manager serves them too,
// for the pods earlier versions of the operator made, which ran it.
//
// It must stay free of the operator's controllers, Helm and client-go's
// scheme: the fetcher links only this package and internal/fetch, so that
// a fetch pod starts without initialising them.
package fetchcmd

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/modelserver-dev/modelserver-operator/internal/memlimit"
)

// Run runs the command sub with args and returns the process's exit code,
// and false if sub is none of them.
func Run(sub string, args []string) (code int, ok bool) {
	switch sub {
	case "fetch":
		setMemoryLimit(os.Stderr)
		return Fetch(args), true
	case "wait-for-model":
		setMemoryLimit(os.Stderr)
		if err := WaitForModel(args); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			return 1, true
		}
		return 0, true
	case "tls-config":
		if err := TLSConfig(args, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// setMemoryLimit gives Go a soft memory limit below the container's. A
// fetch's memory is bounded by its requests in flight, not by the model,
// but a user may give its container less than the chart does: near the
// limit the collector then works harder, rather than the kernel killing
// the fetch.
func setMemoryLimit(stderr io.Writer) {
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	if cgroupLimit, goLimit, err := memlimit.Set("/"); err != nil {
		log.Warn("read the cgroup's memory limit; Go's memory limit is not set", "error", err.Error())
	} else if goLimit > 0 {
		log.Info("Go memory limit set below the cgroup's", "cgroupLimitBytes", cgroupLimit, "goLimitBytes", goLimit)
	}
}
