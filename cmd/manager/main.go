// Command manager is the ModelServer operator. Its subcommands:
//
//	manager [flags]        run the controllers (the default)
//	fetch --uri --dest     fetch a model into a volume
//	wait-for-model --file  wait until a fetched model is on the volume
//
// The fetch Jobs and serving pods the operator makes now run the last two
// from the fetcher binary (cmd/fetcher); the manager keeps them for the
// pods that earlier versions made, which run `manager fetch` for as long
// as they exist.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/modelserver-dev/modelserver-operator/internal/fetchcmd"
)

func main() {
	args := os.Args[1:]
	sub := "manager"
	if len(args) > 0 && !startsWithDash(args[0]) {
		sub, args = args[0], args[1:]
	}
	if code, ok := fetchcmd.Run(sub, args); ok {
		os.Exit(code)
	}
	var err error
	switch sub {
	case "manager":
		err = runManager(args)
	default:
		err = fmt.Errorf("unknown subcommand %q: want manager, fetch or wait-for-model", sub)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // the usage is printed; asking for it is no failure
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func startsWithDash(s string) bool { return len(s) > 0 && s[0] == '-' }
