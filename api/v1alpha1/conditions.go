package v1alpha1

// Condition types of a ModelServer. Ready is derived from the other three.
const (
	// ConditionModelFetched is True once the model-fetch Job of the current
	// model generation has succeeded.
	ConditionModelFetched = "ModelFetched"
	// ConditionDeployed is True once the Helm release is deployed with the
	// current spec.
	ConditionDeployed = "Deployed"
	// ConditionAvailable is True while at least the desired number of
	// serving pods are ready.
	ConditionAvailable = "Available"
	// ConditionReady is True when all of the above hold for the current
	// generation.
	ConditionReady = "Ready"
	// ConditionPaused is True while the ModelServer is annotated
	// AnnotationPaused: "true", and absent otherwise.
	ConditionPaused = "Paused"
)

// AnnotationPaused is the annotation that, set to "true" on a
// ModelServer, pauses its reconciliation: the operator makes no Helm operation and no fetch for
// it, and repairs none of its objects, until the annotation is removed (or
// set to anything else); it keeps reporting their status. For changing
// the release's objects by hand, during an incident, without the operator
// undoing it.
const AnnotationPaused = "serving.modelserver.dev/paused"

// Condition reasons. They are the API: clients and the troubleshooting
// guide key on them.
const (
	// ReasonInvalidSpec (Deployed): the spec cannot be turned into a
	// release; the message names the field.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonSecretNotFound (Deployed): a model's credentials Secret, or
	// spec.tls's Secret or its clientCA's, is missing.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonInvalidSecret (Deployed): the credentials Secret lacks the keys
	// the storage URI's scheme needs, spec.tls's Secret is not a
	// kubernetes.io/tls Secret whose certificate TF Serving could serve,
	// or spec.tls.clientCA's Secret holds no CA certificates at its key.
	ReasonInvalidSecret = "InvalidSecret"
	// ReasonConfigMapNotFound (Deployed): spec.tls.clientCA's ConfigMap
	// is missing.
	ReasonConfigMapNotFound = "ConfigMapNotFound"
	// ReasonInvalidConfigMap (Deployed): spec.tls.clientCA's ConfigMap
	// holds no CA certificates at its key.
	ReasonInvalidConfigMap = "InvalidConfigMap"
	// ReasonConflict (Deployed): an object of the release exists and is
	// not the operator's.
	ReasonConflict = "Conflict"
	// ReasonReleaseFailed (Deployed): a Helm operation failed.
	ReasonReleaseFailed = "ReleaseFailed"
	// ReasonReleaseDeployed (Deployed): the release is deployed with the
	// current spec.
	ReasonReleaseDeployed = "ReleaseDeployed"
	// ReasonReleasePending (Deployed): the release is being installed or
	// upgraded.
	ReasonReleasePending = "ReleasePending"

	// ReasonFetching (ModelFetched): a model-fetch Job is running.
	ReasonFetching = "Fetching"
	// ReasonFetched (ModelFetched): every model's fetch succeeded.
	ReasonFetched = "Fetched"
	// ReasonFetchPodRejected (ModelFetched): the apiserver refuses the
	// fetch Job's pod (Pod Security, a quota, a missing ServiceAccount).
	ReasonFetchPodRejected = "FetchPodRejected"

	// The reasons a fetch fails for (ModelFetched). The fetcher writes one
	// as the first word of its termination message.

	// ReasonNotFound: the model is not where its storage URI says.
	ReasonNotFound = "NotFound"
	// ReasonAccessDenied: the store refused the credentials.
	ReasonAccessDenied = "AccessDenied"
	// ReasonInvalidLayout: what was fetched is not a SavedModel tree.
	ReasonInvalidLayout = "InvalidLayout"
	// ReasonChecksumMismatch: a download does not match its #sha256.
	ReasonChecksumMismatch = "ChecksumMismatch"
	// ReasonModelChanged: a serving pod's own copy of the model (storage
	// mode PerPod) is not the one the fetch Job verified: the store changed
	// in place since. The pod's fetch fails with it, and the ModelServer's
	// message quotes it; no condition takes it as its reason.
	ReasonModelChanged = "ModelChanged"
	// ReasonTooLarge: the model exceeds maxSizeBytes or the volume.
	ReasonTooLarge = "TooLarge"
	// ReasonTimeout: the fetch ran out of time (spec.fetch.timeout).
	ReasonTimeout = "Timeout"
	// ReasonOutOfMemory: the fetch container was killed for going over its
	// memory limit (spec.fetch.resources).
	ReasonOutOfMemory = "OutOfMemory"
	// ReasonInvalidURI: the storage URI cannot be fetched from.
	ReasonInvalidURI = "InvalidURI"
	// ReasonSignatureNotVerified: an oci:// model's image has no cosign
	// signature by a key of spec.model.signature.
	ReasonSignatureNotVerified = "SignatureNotVerified"
	// ReasonFetchFailed: any other fetch failure.
	ReasonFetchFailed = "FetchFailed"

	// ReasonWaitingForFetch (Available): serving pods start once a model is
	// fetched.
	ReasonWaitingForFetch = "WaitingForFetch"
	// ReasonRollingOut (Available): the Deployment is rolling out.
	ReasonRollingOut = "RollingOut"
	// ReasonPodsNotReady (Available): fewer serving pods pass the readiness
	// probe than desired.
	ReasonPodsNotReady = "PodsNotReady"
	// ReasonAvailable (Available): the desired serving pods are ready.
	ReasonAvailable = "MinimumReplicasReady"
	// ReasonRollingOntoRefreshedModel (Available): the pods are rolled onto
	// what a refresh round fetched, and enough of them are ready to serve
	// meanwhile.
	ReasonRollingOntoRefreshedModel = "RollingOntoRefreshedModel"

	// ReasonReconcilePaused (Paused; ModelFetched and Deployed): the
	// ModelServer is annotated AnnotationPaused; on ModelFetched and
	// Deployed, a fetch or a release change waits for it to be removed.
	ReasonReconcilePaused = "ReconcilePaused"

	// ReasonReady (Ready): the model is being served.
	ReasonReady = "Ready"
	// ReasonNotReady (Ready): the message says which step is pending or
	// failed.
	ReasonNotReady = "NotReady"
)
