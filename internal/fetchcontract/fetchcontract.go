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

// Pin is what a model-fetch Job found, which the copy a serving pod
// fetches for itself (storage mode PerPod) must be: the pods serve the
// model the status reports, not whatever the store holds when each one
// starts. The operator writes the pins of the served generations into the
// serving ConfigMap as a JSON object keyed by generation, the base name of
// the fetch's destination; the pods' fetch reads it (`fetch --pins`).
type Pin struct {
	// Digest is the digest of the Job's fetch summary.
	Digest string `json:"digest"`
	// Image is, for an oci:// model, the image by digest the Job's tag
	// named: the pod pulls that, so that a tag moved since changes
	// nothing.
	Image string `json:"image,omitempty"`
	// Versions are the versions the Job fetched: the pod fetches those,
	// whatever its own --versions says, so that a Job made before the
	// pods' template changed (one that fetched every version, say) still
	// pins what they fetch.
	Versions []int64 `json:"versions,omitempty"`
}

// PodFetchSettings are the settings of a serving pod's fetch (storage mode
// PerPod) that change without the pod: the operator writes them into the
// serving ConfigMap, whose mounted files the kubelet keeps current, and
// each attempt of the fetch reads them at its start (`fetch --settings`).
// A new timeout then reaches the pods' next attempts; as a flag it would
// roll every pod, each downloading its copy again.
type PodFetchSettings struct {
	// Timeout bounds one attempt, as a Go duration ("1h0m0s"); "" leaves
	// it unbounded.
	Timeout string `json:"timeout,omitempty"`
}
