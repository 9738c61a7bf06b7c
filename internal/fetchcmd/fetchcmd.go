// Package fetchcmd holds the two commands the operator's image runs in the
// pods of a ModelServer: `fetch`, the model-fetch Job's, and
// `wait-for-model`, the serving pods' init container's. Both the fetcher
// binary (what new pods run) and the manager (what pods made by earlier
// versions of the operator run) serve them.
//
// It must stay free of the operator's controllers, Helm and client-go's
// scheme: the fetcher links only this package and internal/fetch, so that
// a fetch pod starts without initialising them.
package fetchcmd

import (
	"fmt"
	"os"
)

// Run runs the command sub with args and returns the process's exit code,
// and false if sub is neither of the two.
func Run(sub string, args []string) (code int, ok bool) {
	switch sub {
	case "fetch":
		return Fetch(args), true
	case "wait-for-model":
		if err := WaitForModel(args); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			return 1, true
		}
		return 0, true
	}
	return 0, false
}
