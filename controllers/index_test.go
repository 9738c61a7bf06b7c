package controllers

import (
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

func TestTheIndexesKeyOnlyWhatTheirListsAskFor(t *testing.T) {
	job := func(l map[string]string) *batchv1.Job { return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Labels: l}} }
	for name, tc := range map[string]struct {
		got, want []string
	}{
		"a fetch Job":                    {fetchJobKey(job(map[string]string{values.LabelModelServer: "m", values.LabelComponent: values.ComponentFetch})), []string{"m"}},
		"another Job of the ModelServer": {fetchJobKey(job(map[string]string{values.LabelModelServer: "m", values.LabelComponent: "other"})), nil},
		"a fetch Job of nobody":          {fetchJobKey(job(map[string]string{values.LabelComponent: values.ComponentFetch})), nil},
		"a Job's pod":                    {jobKey(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{batchv1.JobNameLabel: "m-fetch-1"}}}), []string{"m-fetch-1"}},
		"a pod of no Job":                {jobKey(&corev1.Pod{}), nil},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: keyed %q, want %q", name, tc.got, tc.want)
		}
	}
}
