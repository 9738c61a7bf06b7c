// Command manager is the ModelServer operator. Its subcommands:
//
//	manager [flags]        run the controllers (the default)
//	fetch --uri --dest     fetch a model into a volume (run by the model-fetch Job)
//	wait-for-model --file  wait until a fetched model is on the volume (the serving pods' init container)
package main

import (
	"fmt"
	"os"
)

func main() {
	args := os.Args[1:]
	sub := "manager"
	if len(args) > 0 && !startsWithDash(args[0]) {
		sub, args = args[0], args[1:]
	}
	var err error
	switch sub {
	case "manager":
		err = runManager(args)
	case "fetch":
		os.Exit(runFetch(args))
	case "wait-for-model":
		err = runWaitForModel(args)
	default:
		err = fmt.Errorf("unknown subcommand %q: want manager, fetch or wait-for-model", sub)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func startsWithDash(s string) bool { return len(s) > 0 && s[0] == '-' }
