package controllers

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// The cache's indexes. A list by label makes the cache test every object
// it holds of the namespace: with 1000 ModelServers in one namespace, each
// reconcile read 1000 fetch Jobs to find its own, 6 % of the operator's
// CPU in a burst of installs and growing with the square of their number.
// An index finds them by key.
const (
	// fetchJobsOf indexes the model-fetch Jobs by their ModelServer's name.
	fetchJobsOf = "modelserver.dev/fetch-jobs-of"
	// podsOfJob indexes the fetch pods by their Job's name.
	podsOfJob = "modelserver.dev/pods-of-job"
	// eventsAbout indexes the cached Events by the UID of the object they
	// are about, so that a claim's failures are found among a namespace
	// where many claims fail without copying the others'.
	eventsAbout = "modelserver.dev/events-about"
)

func addIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &batchv1.Job{}, fetchJobsOf, fetchJobKey); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &corev1.Pod{}, podsOfJob, jobKey); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &corev1.Event{}, eventsAbout, aboutKey)
}

// aboutKey is an Event's key in eventsAbout: the UID of its object.
func aboutKey(o client.Object) []string {
	if e, ok := o.(*corev1.Event); ok && e.InvolvedObject.UID != "" {
		return []string{string(e.InvolvedObject.UID)}
	}
	return nil
}

// fetchJobKey is a fetch Job's key in fetchJobsOf; none for another Job.
func fetchJobKey(o client.Object) []string {
	if ms := fetchesFor(o); ms != "" {
		return []string{ms}
	}
	return nil
}

// fetchesFor is the name of the ModelServer a fetch Job or fetch pod
// fetches for, from its labels; "" for another object.
func fetchesFor(o client.Object) string {
	l := o.GetLabels()
	if l[values.LabelComponent] != values.ComponentFetch {
		return ""
	}
	return l[values.LabelModelServer]
}

// jobKey is a pod's key in podsOfJob: its Job's name.
func jobKey(o client.Object) []string {
	if job := o.GetLabels()[batchv1.JobNameLabel]; job != "" {
		return []string{job}
	}
	return nil
}

// fetchJobsSelector selects a ModelServer's fetch Jobs: by index where
// the client reads the indexed cache, else by their labels.
func (r *ModelServerReconciler) fetchJobsSelector(ms string) client.ListOption {
	if r.indexed {
		return client.MatchingFields{fetchJobsOf: ms}
	}
	return client.MatchingLabels{values.LabelModelServer: ms, values.LabelComponent: values.ComponentFetch}
}

// podsOfJobSelector selects a Job's pods in the cache: by index where the
// client reads the indexed cache, else by their label.
func (r *ModelServerReconciler) podsOfJobSelector(job string) client.ListOption {
	if r.indexed {
		return client.MatchingFields{podsOfJob: job}
	}
	return podsOfJobLabels(job)
}

// eventsAboutOpts select the Events about the object of UID uid in
// namespace ns: by index where the client reads the indexed cache, else
// all of the namespace's, for the caller to pick from.
func (r *ModelServerReconciler) eventsAboutOpts(ns string, uid types.UID) []client.ListOption {
	opts := []client.ListOption{client.InNamespace(ns)}
	if r.indexed {
		opts = append(opts, client.MatchingFields{eventsAbout: string(uid)})
	}
	return opts
}

// podsOfJobLabels selects a Job's pods by their label, as the apiserver
// can.
func podsOfJobLabels(job string) client.MatchingLabels {
	return client.MatchingLabels{batchv1.JobNameLabel: job}
}
