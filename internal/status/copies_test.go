package status

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
