// Command fetcher runs in the pods of a ModelServer, from the operator's
// image:
//
//	fetcher fetch --uri --dest     fetch a model into a volume (the model-fetch Job)
//	fetcher wait-for-model --file  wait until a fetched model is on the volume (the serving pods' init container)
//	fetcher tls-config --cert --key --out  write TF Serving's SSL config from spec.tls's Secret (the serving pods' init container)
//
// The manager serves the same commands, for pods made by earlier
// versions of the operator. This binary links none of the operator's
// controllers, so a fetch pod starts in about a quarter of the time and
// memory the manager takes to start (docs/performance.md).
package main

import (
	"fmt"
	"os"

	"github.com/modelserver-dev/modelserver-operator/internal/fetchcmd"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fetcher fetch|wait-for-model|tls-config [flags]")
		os.Exit(2)
	}
	code, ok := fetchcmd.Run(os.Args[1], os.Args[2:])
	if !ok {
		fmt.Fprintf(os.Stderr, "error: unknown subcommand %q: want fetch, wait-for-model or tls-config\n", os.Args[1])
		os.Exit(2)
	}
	os.Exit(code)
}
