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

// PermanentFailureExitCode is the exit code of `manager fetch` for a
// failure that retrying cannot fix; the fetch Job fails at once on it.
const PermanentFailureExitCode = 3
