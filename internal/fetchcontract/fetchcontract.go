// Package fetchcontract holds what the model-fetch container and the rest
// of the operator agree on: the file that marks a fetched model complete,
// and the exit code that tells the Job not to retry. The fetcher writes
// them; the chart's values render the Job's failure policy and the serving
// pods' wait from them.
package fetchcontract

// ManifestName is the file a fetch writes last into a model's base
// directory, recording what it fetched. Its presence is how the serving
// pods' wait-for-model init container knows the model is complete.
const ManifestName = ".modelserver-fetch.json"

// PermanentFailureExitCode is the exit code of `fetch` for a
// failure that retrying cannot fix; the fetch Job fails at once on it.
const PermanentFailureExitCode = 3

// FetcherCommand is the fetcher's path in the operator's image: the
// command of the fetch Jobs' and the serving pods' wait-for-model
// containers. Pods made before the image had it run the image's
// entrypoint, the manager, which serves the same subcommands.
const FetcherCommand = "/fetcher"
