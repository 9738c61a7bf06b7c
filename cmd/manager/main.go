// Command manager is the ModelServer operator. Its subcommands:
//
//	manager [flags]        run the controllers (the default)
//	fetch --uri --dest     fetch a model into a volume (run by the model-fetch Job)
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
		err = runFetch(args)
	default:
		err = fmt.Errorf("unknown subcommand %q: want manager or fetch", sub)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func startsWithDash(s string) bool { return len(s) > 0 && s[0] == '-' }
