package status

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// progressedAt gives d a Progressing condition last moved at t.
func progressedAt(d *appsv1.Deployment, t time.Time) *appsv1.Deployment {
	return withCondition(d, appsv1.DeploymentCondition{
		Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated",
		LastUpdateTime: metav1.NewTime(t), LastTransitionTime: metav1.NewTime(t.Add(-time.Hour)),
	})
}

func TestARolloutStallsAfterTheGraceWithNoStepForward(t *testing.T) {
	const grace = 30 * time.Second
	long := testNow.Add(-time.Hour)
	for _, tc := range []struct {
		name         string
		o            Observation
		servingSince time.Time
		stalled      bool
		wait         time.Duration
	}{
		{"pods not ready, no progress for 30 s", served(Observation{Deployment: progressedAt(deployment(2, 0), testNow.Add(-grace))}), long, true, time.Minute},
		{"for 3 minutes", served(Observation{Deployment: progressedAt(deployment(2, 0), testNow.Add(-3*time.Minute))}), long, true, 3 * time.Minute},
		{"for an hour", served(Observation{Deployment: progressedAt(deployment(2, 0), long)}), long, true, 10 * time.Minute},
		{"a new pod 10 s ago", served(Observation{Deployment: progressedAt(deployment(2, 1), testNow.Add(-10*time.Second))}), long, false, 20 * time.Second},
		{"the model arrived 5 s ago", served(Observation{Deployment: progressedAt(deployment(2, 0), long)}), testNow.Add(-5 * time.Second), false, 25 * time.Second},
		{"a rollout with the old pods still ready", served(Observation{Deployment: func() *appsv1.Deployment {
			d := progressedAt(deployment(1, 2), long)
			d.Status.Replicas = 3
			return d
		}()}), long, true, 10 * time.Minute},
		{"all ready", served(Observation{Deployment: progressedAt(deployment(2, 2), long)}), long, false, 0},
		{"a pod lost 10 s ago, long after the rollout", served(Observation{Deployment: withCondition(progressedAt(deployment(2, 1), long), appsv1.DeploymentCondition{
			Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable",
			LastUpdateTime: metav1.NewTime(testNow.Add(-10 * time.Second)), LastTransitionTime: metav1.NewTime(testNow.Add(-10 * time.Second)),
		})}), long, false, 20 * time.Second},
		{"no model yet", Observation{DesiredReplicas: 2, Deployment: progressedAt(deployment(2, 0), long)}, long, false, 0},
		{"pods refused: nothing to read", served(Observation{Deployment: withCondition(progressedAt(deployment(0, 0), long), appsv1.DeploymentCondition{
			Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Message: "exceeded quota",
		})}), long, false, 0},
		{"the Deployment controller behind", served(Observation{Deployment: func() *appsv1.Deployment {
			d := progressedAt(deployment(2, 0), long)
			d.Status.ObservedGeneration--
			return d
		}()}), long, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stalled, wait := RolloutStalled(tc.o, tc.servingSince, grace, testNow)
			if stalled != tc.stalled || wait != tc.wait {
				t.Errorf("stalled %v, look again in %v; want %v, %v", stalled, wait, tc.stalled, tc.wait)
			}
		})
	}
}

func TestServingSinceIsWhenThePodsGotAModel(t *testing.T) {
	fetchedAt := testNow.Add(-time.Hour)
	condition := func(status metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: servingv1alpha1.ConditionModelFetched, Status: status, LastTransitionTime: metav1.NewTime(fetchedAt)}}
	}
	earlier := &servingv1alpha1.ModelStatus{Name: "resnet", FetchedGeneration: "abc"}
	for _, tc := range []struct {
		name string
		st   servingv1alpha1.ModelServerStatus
		want time.Time
	}{
		{"fetched", servingv1alpha1.ModelServerStatus{Conditions: condition(metav1.ConditionTrue), Model: earlier}, fetchedAt},
		{"a first model on its way", servingv1alpha1.ModelServerStatus{Conditions: condition(metav1.ConditionFalse), Model: &servingv1alpha1.ModelStatus{Name: "resnet"}}, testNow},
		{"nothing yet", servingv1alpha1.ModelServerStatus{}, testNow},
		{"a new model on its way, an earlier one served", servingv1alpha1.ModelServerStatus{Conditions: condition(metav1.ConditionFalse), Model: earlier}, time.Time{}},
		{"one of several served", servingv1alpha1.ModelServerStatus{Conditions: condition(metav1.ConditionFalse), Models: []servingv1alpha1.ModelStatus{{Name: "a"}, *earlier}}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ServingSince(tc.st, testNow); !got.Equal(tc.want) {
				t.Errorf("%v, want %v", got, tc.want)
			}
		})
	}
}

// pod is a serving pod, not ready, with one container "tfserving" in the
// given state, and the pod's conditions.
func pod(state corev1.ContainerState, last corev1.ContainerState, conditions ...corev1.PodCondition) corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{
		Conditions: append(conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse}),
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "tfserving", Image: "tensorflow/serving:2.19.0", State: state, LastTerminationState: last,
		}},
	}}
}

func exited(code int32, reason string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}
}

func waiting(reason, message string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
}

const pullError = `rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/tensorflow/serving:2.19.0": no match for platform in manifest: not found`

func TestWhatKeepsServingPodsFromBeingReadyIsSaidInTheirOwnWords(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	unschedulable := corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 3 Insufficient memory.",
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"a failed pull", []corev1.Pod{pod(waiting("ErrImagePull", pullError), corev1.ContainerState{})},
			`1 serving pod cannot pull image "tensorflow/serving:2.19.0": ` + pullError},
		{"backing off after it", []corev1.Pod{pod(waiting("ImagePullBackOff", `Back-off pulling image "tensorflow/serving:2.19.0": ErrImagePull: `+pullError), corev1.ContainerState{})},
			`1 serving pod cannot pull image "tensorflow/serving:2.19.0": ` + pullError},
		{"backing off, the failure forgotten", []corev1.Pod{pod(waiting("ImagePullBackOff", `Back-off pulling image "tensorflow/serving:2.19.0"`), corev1.ContainerState{})},
			`1 serving pod cannot pull image "tensorflow/serving:2.19.0"`},
		{"no node fits", []corev1.Pod{pod(corev1.ContainerState{}, corev1.ContainerState{}, unschedulable), pod(corev1.ContainerState{}, corev1.ContainerState{}, unschedulable)},
			"2 serving pods cannot be scheduled: 0/3 nodes are available: 3 Insufficient memory."},
		{"out of memory", []corev1.Pod{pod(waiting("CrashLoopBackOff", "back-off 40s restarting failed container=tfserving pod=resnet-6c9-x2x8z_ml(uid)"), exited(137, "OOMKilled"))},
			`1 serving pod cannot keep container "tfserving" running: it exits with code 137 (OOMKilled: over its memory limit)`},
		{"a missing Secret", []corev1.Pod{pod(waiting("CreateContainerConfigError", `secret "tls" not found`), corev1.ContainerState{})},
			`1 serving pod cannot start container "tfserving": CreateContainerConfigError: secret "tls" not found`},
		{"the most pods first", []corev1.Pod{
			pod(waiting("CrashLoopBackOff", ""), exited(1, "Error")),
			pod(corev1.ContainerState{}, corev1.ContainerState{}, unschedulable),
			pod(corev1.ContainerState{}, corev1.ContainerState{}, unschedulable),
		}, `2 serving pods cannot be scheduled: 0/3 nodes are available: 3 Insufficient memory.; 1 serving pod cannot keep container "tfserving" running: it exits with code 1`},
		{"starting", []corev1.Pod{pod(waiting("ContainerCreating", ""), corev1.ContainerState{})}, ""},
		{"loading the model", []corev1.Pod{pod(running, corev1.ContainerState{})}, ""},
		{"terminating", []corev1.Pod{func() corev1.Pod {
			p := pod(waiting("ErrImagePull", pullError), corev1.ContainerState{})
			p.DeletionTimestamp = &metav1.Time{Time: testNow}
			return p
		}()}, ""},
		{"a waiting init container", []corev1.Pod{func() corev1.Pod {
			p := pod(waiting("PodInitializing", ""), corev1.ContainerState{})
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{
				Name: "wait-for-model", Image: "registry.example/modelserver-operator:v1", State: waiting("ImagePullBackOff", `Back-off pulling image "registry.example/modelserver-operator:v1": ErrImagePull: unauthorized`),
			}}
			return p
		}()}, `1 serving pod cannot pull image "registry.example/modelserver-operator:v1": unauthorized`},
		{"its own copy of a model changed in place (storage mode PerPod)", []corev1.Pod{func() corev1.Pod {
			p := pod(waiting("PodInitializing", ""), corev1.ContainerState{})
			changed := exited(3, "Error")
			changed.Terminated.Message = "ModelChanged: s3://models/resnet changed in place since its fetch Job verified it\n"
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{
				Name: "fetch-model", Image: "registry.example/modelserver-operator:v1", State: waiting("CrashLoopBackOff", "back-off 20s"),
				LastTerminationState: changed, RestartCount: 2,
			}}
			return p
		}()}, `1 serving pod cannot fetch its copy of the model (container "fetch-model"): ModelChanged: s3://models/resnet changed in place since its fetch Job verified it`},
		{"fetching its own copy", []corev1.Pod{func() corev1.Pod {
			p := pod(waiting("PodInitializing", ""), corev1.ContainerState{})
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "fetch-model", State: running}}
			return p
		}()}, ""},
		{"loading the model after the init container completed", []corev1.Pod{func() corev1.Pod {
			p := pod(running, corev1.ContainerState{})
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{
				Name: "wait-for-model", Ready: true, State: exited(0, "Completed"),
			}}
			return p
		}()}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := ServingPodsProblem(tc.pods, nil); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// A crash loop takes a container from running to exited to the kubelet's
// back-off and to running again; a read at any step says the same, so
// that the loop costs no status write. One restart is not a loop,
// unless the container ran out of memory.
func TestACrashLoopReadsTheSameAtEachOfItsSteps(t *testing.T) {
	oom := exited(137, "OOMKilled")
	crashing := func(state corev1.ContainerState, restarts int32, last corev1.ContainerState) corev1.Pod {
		p := pod(state, last)
		p.Status.ContainerStatuses[0].RestartCount = restarts
		return p
	}
	const want = `1 serving pod cannot keep container "tfserving" running: it exits with code 137 (OOMKilled: over its memory limit)`
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
	}{
		{"exited the first time", crashing(oom, 0, corev1.ContainerState{})},
		{"backing off", crashing(waiting("CrashLoopBackOff", "back-off 20s restarting failed container=tfserving pod=resnet-6c9-x2x8z_ml(uid)"), 1, oom)},
		{"running again, loading the model", crashing(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, 2, oom)},
		{"exited again", crashing(oom, 2, oom)},
		{"being created again", crashing(waiting("ContainerCreating", ""), 3, oom)},
	} {
		cause, got := ServingPodsProblem([]corev1.Pod{tc.pod}, nil)
		if got != want || cause != CauseCrashLoop {
			t.Errorf("%s: %s, %q\nwant %s, %q", tc.name, cause, got, CauseCrashLoop, want)
		}
	}
	// Loading the model again after one restart is not a loop, unless it
	// ran out of memory: a node's reboot restarts every container once,
	// and leaves them an unknown exit.
	rebooted := exited(255, "Unknown")
	if cause, got := ServingPodsProblem([]corev1.Pod{crashing(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, 1, rebooted)}, nil); got != "" {
		t.Errorf("running again after a reboot: %s, %q; want nothing", cause, got)
	}
	if cause, got := ServingPodsProblem([]corev1.Pod{crashing(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, 1, oom)}, nil); got != want || cause != CauseCrashLoop {
		t.Errorf("running again after one out-of-memory kill: %s, %q\nwant %s, %q", cause, got, CauseCrashLoop, want)
	}
	// Ready after restarts: nothing to say.
	ready := crashing(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, 2, oom)
	ready.Status.ContainerStatuses[0].Ready = true
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if cause, got := ServingPodsProblem([]corev1.Pod{ready}, nil); got != "" {
		t.Errorf("a ready pod that restarted once: %s, %q; want nothing", cause, got)
	}
}

// The kubelet kills a container whose startup or liveness probe keeps
// failing; TF Serving, which ignores SIGTERM, then exits with code 137 as
// if out of memory. The kubelet's Killing Event says which probe, and the
// pod's spec how long it allowed.
func TestAContainerTheKubeletKillsForAFailedProbeIsNamedAsSuch(t *testing.T) {
	probed := func(exit int32, reason string) corev1.Pod {
		p := pod(waiting("CrashLoopBackOff", ""), exited(exit, reason))
		p.UID = "a"
		p.Spec.Containers = []corev1.Container{{
			Name:          "tfserving",
			StartupProbe:  &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 900},
			LivenessProbe: &corev1.Probe{PeriodSeconds: 10, FailureThreshold: 3},
		}}
		return p
	}
	killing := func(uid types.UID, message string, at time.Duration) corev1.Event {
		e := warning(uid, "Killing", message, at)
		e.Type = corev1.EventTypeNormal
		return e
	}
	const (
		startup    = "Container tfserving failed startup probe, will be restarted"
		liveness   = "Container tfserving failed liveness probe, will be restarted"
		slowLoad   = `1 serving pod cannot keep container "tfserving" running: it exits with code 137 (killed by the kubelet: its startup probe failed for 900s; a model that takes longer to load needs a larger spec.podTemplate.loadTimeoutSeconds)`
		plain137   = `1 serving pod cannot keep container "tfserving" running: it exits with code 137`
		livenessed = `1 serving pod cannot keep container "tfserving" running: it exits with code 137 (killed by the kubelet: its liveness probe failed for 30s)`
	)
	for _, tc := range []struct {
		name   string
		pod    corev1.Pod
		events []corev1.Event
		want   string
	}{
		{"the startup probe", probed(137, "Error"), []corev1.Event{killing("a", startup, 0)}, slowLoad},
		{"the liveness probe", probed(137, "Error"), []corev1.Event{killing("a", liveness, 0)}, livenessed},
		{"the newest of two probes", probed(137, "Error"), []corev1.Event{killing("a", liveness, -time.Hour), killing("a", startup, -time.Minute)}, slowLoad},
		{"a program that exits on SIGTERM", probed(0, "Completed"), []corev1.Event{killing("a", startup, 0)},
			strings.Replace(slowLoad, "code 137", "code 0", 1)},
		{"SIGTERM's default", probed(143, "Error"), []corev1.Event{killing("a", startup, 0)},
			strings.Replace(slowLoad, "code 137", "code 143", 1)},
		{"no Killing Event", probed(137, "Error"), []corev1.Event{warning("a", "Unhealthy", "Startup probe failed: connection refused", 0)}, plain137},
		{"killed for another reason since", probed(137, "Error"), []corev1.Event{killing("a", startup, -time.Hour), killing("a", "Container tfserving definition changed, will be restarted", 0)}, plain137},
		{"another pod's kill", probed(137, "Error"), []corev1.Event{killing("b", startup, 0)}, plain137},
		{"another container's kill", probed(137, "Error"), []corev1.Event{killing("a", "Container tfserving-proxy failed startup probe, will be restarted", 0)}, plain137},
		{"a crash with its own code", probed(1, "Error"), []corev1.Event{killing("a", startup, 0)},
			`1 serving pod cannot keep container "tfserving" running: it exits with code 1`},
		{"out of memory", probed(137, "OOMKilled"), []corev1.Event{killing("a", liveness, 0)},
			`1 serving pod cannot keep container "tfserving" running: it exits with code 137 (OOMKilled: over its memory limit)`},
		{"no probe in the spec", func() corev1.Pod { p := probed(137, "Error"); p.Spec.Containers = nil; return p }(), []corev1.Event{killing("a", startup, 0)},
			`1 serving pod cannot keep container "tfserving" running: it exits with code 137 (killed by the kubelet: its startup probe failed; a model that takes longer to load needs a larger spec.podTemplate.loadTimeoutSeconds)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := ServingPodsProblem([]corev1.Pod{tc.pod}, tc.events); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// Only a pod whose container keeps exiting as a kill leaves it has
// Killing Events worth a read.
func TestAPodMayBeProbeKilledOnlyWhenItsExitsLookLikeKills(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	again := func(restarts int32, last corev1.ContainerState) corev1.Pod {
		p := pod(running, last)
		p.Status.ContainerStatuses[0].RestartCount = restarts
		return p
	}
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"backing off after a kill", pod(waiting("CrashLoopBackOff", ""), exited(137, "Error")), true},
		{"just killed", pod(exited(137, "Error"), corev1.ContainerState{}), true},
		{"running again after two kills", again(2, exited(137, "Error")), true},
		{"running again after one", again(1, exited(137, "Error")), false},
		{"out of memory", pod(waiting("CrashLoopBackOff", ""), exited(137, "OOMKilled")), false},
		{"a crash", pod(waiting("CrashLoopBackOff", ""), exited(1, "Error")), false},
		{"loading the model", pod(running, corev1.ContainerState{}), false},
	} {
		if got := MayBeProbeKilled(&tc.pod); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// creating is a serving pod on a node whose container is being created.
func creating(uid types.UID) corev1.Pod {
	p := pod(waiting("ContainerCreating", ""), corev1.ContainerState{})
	p.UID, p.Spec.NodeName = uid, "node-1"
	return p
}

func warning(uid types.UID, reason, message string, at time.Duration) corev1.Event {
	return corev1.Event{
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", UID: uid}, Type: corev1.EventTypeWarning,
		Reason: reason, Message: message, LastTimestamp: metav1.NewTime(testNow.Add(at)),
	}
}

// What holds a pod that has started nothing is only in its Events: the
// newest Warning about it is what the status says, without the runtime's
// IDs, which change at each retry.
func TestAPodThatStartedNothingIsExplainedByItsNewestWarning(t *testing.T) {
	sandbox := func(id string) string {
		return `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "` + id + `": plugin type="bridge" failed (add): no IP addresses available`
	}
	mount := `MountVolume.SetUp failed for volume "model" : mount failed: exit status 32`
	for _, tc := range []struct {
		name     string
		pods     []corev1.Pod
		warnings []corev1.Event
		want     string
	}{
		{"a volume that does not mount", []corev1.Pod{creating("a"), creating("b")},
			[]corev1.Event{warning("a", "FailedMount", mount, -time.Minute), warning("b", "FailedMount", mount, -time.Minute)},
			"2 serving pods cannot start: FailedMount: " + mount},
		{"the newest warning", []corev1.Pod{creating("a")},
			[]corev1.Event{warning("a", "FailedScheduling", "0/1 nodes are available", -time.Hour), warning("a", "FailedMount", mount, -time.Minute)},
			"1 serving pod cannot start: FailedMount: " + mount},
		{"sandboxes, retried", []corev1.Pod{creating("a"), creating("b")},
			[]corev1.Event{warning("a", "FailedCreatePodSandBox", sandbox(strings.Repeat("9f", 32)), 0), warning("b", "FailedCreatePodSandBox", sandbox(strings.Repeat("c3", 32)), 0)},
			"2 serving pods cannot start: FailedCreatePodSandBox: " + sandbox("…")},
		{"no warning: still being created", []corev1.Pod{creating("a")}, []corev1.Event{warning("b", "FailedMount", mount, 0)}, ""},
		{"a volume mounted by another pod, which holds nothing back", []corev1.Pod{creating("a")}, []corev1.Event{
			warning("a", "AlreadyMountedVolume", "The requested fsGroup is 65532, but the volume pvc-6db53b62 has GID 0. The volume may not be shareable.", 0),
		}, ""},
		{"the scheduler's warnings are over once it is scheduled", []corev1.Pod{func() corev1.Pod {
			p := creating("a")
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
				Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(testNow.Add(-time.Minute)),
			})
			return p
		}()}, []corev1.Event{warning("a", "FailedScheduling", "0/1 nodes are available", -2*time.Minute)}, ""},
		{"and so is one said as it was scheduled", []corev1.Pod{func() corev1.Pod {
			p := creating("a")
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
				Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(testNow.Add(-time.Minute).Truncate(time.Second)),
			})
			return p
		}()}, []corev1.Event{warning("a", "FailedScheduling", "0/2 nodes are available: 1 node(s) had untolerated taint(s)", -time.Minute)}, ""},
		{"a started pod's warnings are its probes'", []corev1.Pod{func() corev1.Pod {
			p := pod(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, corev1.ContainerState{})
			p.UID, p.Spec.NodeName = "a", "node-1"
			return p
		}()}, []corev1.Event{warning("a", "Unhealthy", "Startup probe failed: connection refused", 0)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := ServingPodsProblem(tc.pods, tc.warnings); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestNothingStartedIsAPodOnANodeWithEveryContainerStillBeingCreated(t *testing.T) {
	initializing := creating("a")
	initializing.Status.ContainerStatuses[0].State = waiting("PodInitializing", "")
	initializing.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "wait-for-model", State: waiting("PodInitializing", "")}}
	waitingForModel := initializing
	waitingForModel.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "wait-for-model", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	unscheduled := creating("a")
	unscheduled.Spec.NodeName = ""
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"being created", creating("a"), true},
		{"its init container being created", initializing, true},
		{"waiting for the model", waitingForModel, false},
		{"on no node", unscheduled, false},
		{"a pull that fails", func() corev1.Pod {
			p := creating("a")
			p.Status.ContainerStatuses[0].State = waiting("ErrImagePull", "")
			return p
		}(), false},
	} {
		if got := NothingStarted(&tc.pod); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAStalledRolloutsPodsAreNamedInTheAvailableCondition(t *testing.T) {
	o := served(Observation{Deployment: deployment(2, 0)})
	o.PodsProblem = `2 serving pods cannot pull image "tensorflow/serving:2.19.0"`
	st := Compute(servingv1alpha1.ModelServerStatus{}, o, testNow)
	if !strings.HasSuffix(st.Message, "; "+o.PodsProblem) || !strings.HasPrefix(st.Message, "0 of 2 serving pods ready") {
		t.Errorf("message %q: want the count, then the pods' problem", st.Message)
	}
}

func TestAStalledRolloutsCauseIsThatOfMostPods(t *testing.T) {
	unschedulable := pod(corev1.ContainerState{}, corev1.ContainerState{}, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
	})
	crashing := pod(waiting("CrashLoopBackOff", ""), corev1.ContainerState{})
	for _, tc := range []struct {
		name     string
		pods     []corev1.Pod
		warnings []corev1.Event
		want     string
	}{
		{"most cannot be scheduled", []corev1.Pod{crashing, unschedulable, unschedulable}, nil, CauseUnschedulable},
		{"a pull", []corev1.Pod{pod(waiting("ImagePullBackOff", ""), corev1.ContainerState{})}, nil, CauseImagePull},
		{"a crash loop", []corev1.Pod{crashing}, nil, CauseCrashLoop},
		{"a missing Secret", []corev1.Pod{pod(waiting("CreateContainerConfigError", ""), corev1.ContainerState{})}, nil, CauseContainerStart},
		{"a warning", []corev1.Pod{creating("a")}, []corev1.Event{warning("a", "FailedMount", "", 0)}, CausePodWarning},
		{"loading the model", []corev1.Pod{pod(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, corev1.ContainerState{})}, nil, CauseUnknown},
	} {
		if got, _ := ServingPodsProblem(tc.pods, tc.warnings); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A fetch pod that has not started is explained as a serving pod is, in
// its own words, and called a fetch pod.
func TestWhatKeepsFetchPodsFromStartingIsSaidInTheirOwnWords(t *testing.T) {
	unbound := corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
	}
	const mount = `MountVolume.SetUp failed for volume "credentials" : secret "s3" not found`
	for _, tc := range []struct {
		name        string
		pods        []corev1.Pod
		events      []corev1.Event
		cause, want string
	}{
		{"a claim no volume binds", []corev1.Pod{pod(corev1.ContainerState{}, corev1.ContainerState{}, unbound)},
			nil, CauseUnschedulable, "1 fetch pod cannot be scheduled: " + unbound.Message},
		{"two models' pods", []corev1.Pod{pod(corev1.ContainerState{}, corev1.ContainerState{}, unbound), pod(corev1.ContainerState{}, corev1.ContainerState{}, unbound)},
			nil, CauseUnschedulable, "2 fetch pods cannot be scheduled: " + unbound.Message},
		{"the fetcher's image", []corev1.Pod{pod(waiting("ImagePullBackOff", `Back-off pulling image "tensorflow/serving:2.19.0": ErrImagePull: `+pullError), corev1.ContainerState{})},
			nil, CauseImagePull, `1 fetch pod cannot pull image "tensorflow/serving:2.19.0": ` + pullError},
		{"a volume that does not mount", []corev1.Pod{creating("a")},
			[]corev1.Event{warning("a", "FailedMount", mount, -time.Second)}, CausePodWarning, "1 fetch pod cannot start: FailedMount: " + mount},
		{"its image being pulled", []corev1.Pod{creating("a")}, nil, CauseUnknown, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if cause, got := FetchPodsProblem(tc.pods, tc.events); cause != tc.cause || got != tc.want {
				t.Errorf("got  %s: %q\nwant %s: %q", cause, got, tc.cause, tc.want)
			}
		})
	}
}
