package status

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// servingPodWithCopy is a serving pod whose fetch-model container fetched
// generation gen and ended with message (exit code 0 but for exit).
func servingPodWithCopy(name, gen, message string, exit int32) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{
			{Name: "fetch-model", Args: []string{"fetch", "--uri", "s3://models/resnet", "--dest", "/models/" + gen}},
		}},
		Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{
			Name: "fetch-model", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: message}},
		}}},
	}
}

func TestOnlyCopiesOfAnotherDigestThanTheirPinAreUnverified(t *testing.T) {
	summary := func(digest string) string {
		return `{"versions":[1],"files":4,"bytes":2048,"digest":"` + digest + `"}` + "\n"
	}
	pins := map[string]values.Pin{"gen1": {Digest: "sha256:aa"}}
	gone := servingPodWithCopy("leaving", "gen1", summary("sha256:bb"), 0)
	gone.DeletionTimestamp = &metav1.Time{}
	got := UnverifiedCopies([]corev1.Pod{
		servingPodWithCopy("verified", "gen1", summary("sha256:aa"), 0),
		servingPodWithCopy("changed", "gen1", summary("sha256:bb"), 0),
		servingPodWithCopy("failed", "gen1", "ModelChanged: …", 3),
		servingPodWithCopy("unpinned", "gen2", summary("sha256:cc"), 0),
		servingPodWithCopy("no summary", "gen1", "", 0),
		gone,
	}, pins)
	if len(got) != 1 || got[0] != (Copy{Pod: "changed", Container: "fetch-model", Digest: "sha256:bb", Pinned: "sha256:aa"}) {
		t.Errorf("unverified copies %+v, want only pod changed's", got)
	}
}

func TestThePodsFetchingTheirCopiesAreFoundTheLastStartedFirst(t *testing.T) {
	at := func(name string, started int64, state corev1.ContainerState) corev1.Pod {
		p := servingPodWithCopy(name, "gen1", "", 0)
		if state.Running != nil {
			state.Running.StartedAt = metav1.Unix(started, 0)
		}
		p.Status.InitContainerStatuses[0].State = state
		return p
	}
	running := func() corev1.ContainerState {
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	}
	ready := at("ready", 5, running())
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	leaving := at("leaving", 6, running())
	leaving.DeletionTimestamp = &metav1.Time{}
	pods := []corev1.Pod{
		at("early", 1, running()),
		at("fetched", 2, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}),
		at("late", 3, running()),
		at("waiting", 4, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}),
		ready, leaving,
	}
	pods[0].Spec.InitContainers[0].Name, pods[0].Status.InitContainerStatuses[0].Name = "fetch-model-1", "fetch-model-1"
	// The late pod's first attempt ran out of time; the early one's was
	// killed for its memory limit, which the fetcher could not say.
	pods[2].Status.InitContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
		ExitCode: 1, Reason: "Error", Message: "Timeout: the fetch did not finish within 2m0s (spec.fetch.timeout)\n",
	}
	pods[0].Status.InitContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", Message: "{\"level\":\"info\"}"}
	var got []string
	for _, c := range FetchingCopies(pods) {
		got = append(got, c.Pod.Name+"/"+c.Container+" "+c.Before)
	}
	if want := []string{"late/fetch-model Timeout: the fetch did not finish within 2m0s (spec.fetch.timeout)", "early/fetch-model-1 "}; !slices.Equal(got, want) {
		t.Errorf("fetching copies %q, want %q", got, want)
	}
}

func TestPodsFetchingTheirCopiesSayHowFarTheLastStartedHasCome(t *testing.T) {
	p := &fetch.Progress{Bytes: 12 << 20, TotalBytes: 200 << 20, BytesPerSecond: 1_000_000, TotalFiles: -1}
	timeout := "Timeout: the fetch did not finish within 2m0s (spec.fetch.timeout)"
	for _, tc := range []struct {
		n      int
		p      *fetch.Progress
		before string
		want   string
	}{
		{1, nil, "", "1 serving pod is fetching its copy of the model"},
		{1, p, "", "1 serving pod is fetching its copy of the model: 12.0 MiB of 200.0 MiB (6%), 1.0 MB/s, about 3 min left"},
		{3, p, "", "3 serving pods are fetching their copies of the model, the last started: 12.0 MiB of 200.0 MiB (6%), 1.0 MB/s, about 3 min left"},
		{2, &fetch.Progress{Bytes: 5 << 20, TotalBytes: -1, TotalFiles: -1, Idle: time.Minute}, "", "2 serving pods are fetching their copies of the model, the last started: 5.0 MiB so far, nothing received for 1 min"},
		{1, p, timeout, "1 serving pod is fetching its copy of the model: 12.0 MiB of 200.0 MiB (6%), 1.0 MB/s, about 3 min left; its attempt before failed, " + timeout},
		{1, nil, timeout, "1 serving pod is fetching its copy of the model; its attempt before failed, " + timeout},
	} {
		if got := CopiesFetching(tc.n, tc.p, tc.before); got != tc.want {
			t.Errorf("%d pods, progress %+v:\n got %q\nwant %q", tc.n, tc.p, got, tc.want)
		}
	}
}
