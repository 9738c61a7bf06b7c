package status

import (
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// tfServingTail is the end of TF Serving's log when a model it was told to
// serve cannot be loaded: its stderr's lines, then its summary on stdout.
func tfServingTail(at string) string {
	return at + `: I tensorflow_serving/model_servers/server_core.cc:502]  (Re-)adding model: resnet
` + at + `: I tensorflow_serving/core/loader_harness.cc:74] Loading servable version {name: resnet version: 3}
` + at + `: E tensorflow_serving/util/retrier.cc:40] Loading servable: {name: resnet version: 3} failed: NOT_FOUND: Could not find meta graph def matching supplied tags: { serve }.
Failed to start server. Error: UNKNOWN: 1 servable(s) did not become available: {{{name: resnet version: 3} due to error: NOT_FOUND: Could not find meta graph def matching supplied tags: { serve }.}, }
`
}

func TestAContainersLastWordsAreTheLineThatSaysWhyItExited(t *testing.T) {
	for _, tc := range []struct {
		name, message, want string
	}{
		{"TF Serving's summary of a failed start", tfServingTail("2026-12-04 15:04:05.123456"),
			"Failed to start server. Error: UNKNOWN: 1 servable(s) did not become available: {{{name: resnet version: 3} due to error: NOT_FOUND: Could not find meta graph def matching supplied tags: { serve }.}, }"},
		{"the summary, then lines logged on the way out", tfServingTail("2026-12-04 15:04:05.123456") +
			"2026-12-04 15:04:05.200000: I tensorflow_serving/model_servers/server.cc:400] Shutting down.\n",
			"Failed to start server. Error: UNKNOWN: 1 servable(s) did not become available: {{{name: resnet version: 3} due to error: NOT_FOUND: Could not find meta graph def matching supplied tags: { serve }.}, }"},
		{"the last error, in TF Serving's layout",
			"2026-12-04 15:04:05.1: E tensorflow_serving/a.cc:1] first\n2026-12-04 15:04:05.2: E tensorflow_serving/b.cc:2] second\n2026-12-04 15:04:05.3: I tensorflow_serving/c.cc:3] after\n",
			"second"},
		{"a fatal check, in absl's layout",
			"I0000 00:00:1764860645.123456      12 server.cc:10] starting\nF0000 00:00:1764860645.223456      12 main.cc:445] Check failed: ok\nI0000 00:00:1764860645.323456      12 x.cc:1] bye",
			"Check failed: ok"},
		{"an error, in glog's layout", "E1204 15:04:05.123456    7 server.cc:40] No versions of servable resnet found\n",
			"No versions of servable resnet found"},
		{"a fatal check with no time", "F tensorflow_serving/model_servers/main.cc:445] Check failed: OK vs. Invalid argument\n",
			"Check failed: OK vs. Invalid argument"},
		{"a program that logs otherwise", "starting\npanic: open /etc/modelserver/models.config: permission denied\n\n",
			"panic: open /etc/modelserver/models.config: permission denied"},
		{"only information, its prefix left out", "2026-12-04 15:04:05.123456: I tensorflow_serving/a.cc:1] Reading SavedModel from: /models/resnet/3\n",
			"Reading SavedModel from: /models/resnet/3"},
		{"nothing", "  \n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lastWords(tc.message); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	long := lastWords("E1204 15:04:05.123456    7 server.cc:40] " + strings.Repeat("é", 400))
	if len(long) > maxWords || !utf8.ValidString(long) || !strings.HasSuffix(long, "é…") {
		t.Errorf("a long line became %d bytes ending %q; want at most %d, cut between characters", len(long), long[len(long)-8:], maxWords)
	}
}

// The words a crash loop's status quotes are the same at each exit, though
// each exit's log has its own times, so that they cost no status write; an
// exit the kubelet made, out of memory or for a probe, is named by that
// and not by what the program last logged before it was killed.
func TestACrashLoopQuotesTheSameLastWordsAtEachExit(t *testing.T) {
	exit := func(code int32, reason, at string) corev1.ContainerState {
		s := exited(code, reason)
		s.Terminated.Message = tfServingTail(at)
		return s
	}
	first, second := exit(255, "Error", "2026-12-04 15:04:05.123456"), exit(255, "Error", "2026-12-04 15:04:25.654321")
	crashing := func(state, last corev1.ContainerState, restarts int32) corev1.Pod {
		p := pod(state, last)
		p.Status.ContainerStatuses[0].RestartCount = restarts
		return p
	}
	const want = `1 serving pod cannot keep container "tfserving" running: it exits with code 255 after logging "Failed to start server. Error: UNKNOWN: 1 servable(s) did not become available: {{{name: resnet version: 3} due to error: NOT_FOUND: Could not find meta graph def matching supplied tags: { serve }.}, }"`
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
	}{
		{"exited the first time", crashing(first, corev1.ContainerState{}, 0)},
		{"backing off", crashing(waiting("CrashLoopBackOff", "back-off 10s restarting failed container=tfserving pod=resnet-6c9-x2x8z_ml(uid)"), first, 1)},
		{"exited again", crashing(second, first, 1)},
		{"running again", crashing(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, second, 2)},
	} {
		if cause, got := ServingPodsProblem([]corev1.Pod{tc.pod}, nil); got != want || cause != CauseCrashLoop {
			t.Errorf("%s: %s, %q\nwant %s, %q", tc.name, cause, got, CauseCrashLoop, want)
		}
	}
	for _, tc := range []struct {
		name string
		last corev1.ContainerState
		want string
	}{
		{"out of memory", exit(137, "OOMKilled", "2026-12-04 15:04:05.1"), "it exits with code 137 (OOMKilled: over its memory limit)"},
		{"killed, no Event saying why", exit(137, "Error", "2026-12-04 15:04:05.1"), "it exits with code 137"},
		{"an exit with nothing logged", exited(1, "Error"), "it exits with code 1"},
	} {
		_, got := ServingPodsProblem([]corev1.Pod{crashing(waiting("CrashLoopBackOff", ""), tc.last, 2)}, nil)
		if want := `1 serving pod cannot keep container "tfserving" running: ` + tc.want; got != want {
			t.Errorf("%s: %q\nwant %q", tc.name, got, want)
		}
	}
}
