package localcluster

// Annotations a test puts on a pod template to script what the simulated
// kubelet does with the pod (the stages in stages.yaml act on them).
const (
	// AnnotationFail makes every container of the pod terminate with this
	// value as its termination message, and the pod end Failed. A Job whose
	// pods carry it fails once its backoffLimit is spent.
	AnnotationFail = "localcluster.modelserver.dev/fail"
	// AnnotationExitCode is the exit code that goes with AnnotationFail
	// (default 1).
	AnnotationExitCode = "localcluster.modelserver.dev/exit-code"
	// AnnotationExitReason is the reason of the containers' terminated
	// state that goes with AnnotationFail (default Error), such as
	// OOMKilled.
	AnnotationExitReason = "localcluster.modelserver.dev/exit-reason"
	// AnnotationKeepRunning keeps a Job's pod Running: its Job ends only
	// when its deadline does, or when it is deleted.
	AnnotationKeepRunning = "localcluster.modelserver.dev/keep-running"
	// AnnotationNeverReady set to "true" leaves the pod Running with its
	// containers started but never Ready, as when a readiness probe fails.
	AnnotationNeverReady = "localcluster.modelserver.dev/never-ready"
	// AnnotationTerminationMessage is the message a Job's pod leaves in its
	// containers' terminated state when it succeeds.
	AnnotationTerminationMessage = "localcluster.modelserver.dev/termination-message"
	// AnnotationInitTerminationMessage is the message a ready pod's init
	// containers leave in their terminated state, such as a serving pod's
	// fetch-model container's summary.
	AnnotationInitTerminationMessage = "localcluster.modelserver.dev/init-termination-message"
)

// StorageClass is the default StorageClass of the local cluster. Claims of
// this class are provisioned and bound at once.
const StorageClass = "standard"
