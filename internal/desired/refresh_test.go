package desired

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// refreshing is a ModelServer whose model is refreshed every 10 minutes,
// and what the controller last wrote and saw of it.
type refreshing struct {
	t       *testing.T
	ms      *servingv1alpha1.ModelServer
	created time.Time
	obs     Observed
}

func newRefreshing(t *testing.T) *refreshing {
	created := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	ms := modelServer()
	ms.CreationTimestamp = metav1.NewTime(created)
	ms.Spec.Model.RefreshInterval = &metav1.Duration{Duration: 10 * time.Minute}
	return &refreshing{t: t, ms: ms, created: created, obs: Observed{FetchJobs: map[string]*status.FetchJob{}}}
}

// at reconciles at minutes past the creation, and writes the status.
func (r *refreshing) at(minutes int) *State {
	r.t.Helper()
	r.obs.Now = r.created.Add(time.Duration(minutes) * time.Minute)
	st, err := For(r.ms, r.obs, cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.obs.Status.Model = st.Fetches[0].Status.DeepCopy()
	return st
}

// job sets how the Job of the state's fetch stands: running ("") or
// ended, with what its pod left.
func (r *refreshing) job(st *State, outcome batchv1.JobConditionType, termination string) {
	name := st.Fetches[0].FetchJob
	r.obs.FetchJobs = map[string]*status.FetchJob{name: {Job: job(name, cfg.FetchImage, outcome), Termination: termination}}
}

func (r *refreshing) round(minutes int) time.Time {
	return r.created.Add(time.Duration(minutes) * time.Minute)
}

// TestARefreshRoundFetchesInTheBackground follows a model refreshed every
// 10 minutes through its first fetch and four rounds: one that found a
// new model, one that outlasted its interval, one that failed and one
// that found the model unchanged.
func TestARefreshRoundFetchesInTheBackground(t *testing.T) {
	r := newRefreshing(t)
	summary := func(digest string) string {
		return `{"versions":[1],"files":4,"bytes":2048,"digest":"` + digest + `"}`
	}

	// The first fetch is in the round begun at the creation, and not a
	// refresh: nothing is served yet.
	first := r.at(0)
	f := first.Fetches[0]
	if f.Refreshing || f.State != status.FetchMissing || !f.Status.Refresh.Round.Time.Equal(r.round(0)) {
		t.Fatalf("first fetch %+v, refresh %+v", f, f.Status.Refresh)
	}
	if base := first.Spec.Models[0].BaseGeneration; first.Spec.Models[0].Generation == base || base != values.FetchGeneration(r.ms, *r.ms.Spec.Model) {
		t.Errorf("generation %s, base %s: a round is part of the generation, not of the base", first.Spec.Models[0].Generation, base)
	}
	if next := first.NextRound; !next.Equal(r.round(10)) {
		t.Errorf("next round at %s, want 10 minutes after the creation", next)
	}
	r.job(first, batchv1.JobComplete, summary("sha256:aa"))
	fetched := r.at(3)
	gen0 := fetched.Spec.Models[0].Generation
	if f := fetched.Fetches[0]; !f.NewlyFetched || f.Refreshing || f.Status.Refresh.BaseGeneration != fetched.Spec.Models[0].BaseGeneration {
		t.Fatalf("first fetch ended: %+v, refresh %+v", f, f.Status.Refresh)
	}

	// At 25 minutes the round begun at 20 is due: a new Job, in the
	// background, the pods left on the copy they serve.
	rnd := r.at(25)
	f = rnd.Fetches[0]
	if !f.Refreshing || f.State != status.FetchMissing || f.FetchJob == first.Fetches[0].FetchJob ||
		f.Status.Fetch != string(status.FetchSucceeded) || f.Status.Refresh.State != servingv1alpha1.RefreshRunning ||
		!f.Status.Refresh.Round.Time.Equal(r.round(20)) || !f.Status.Refresh.NextRound.Time.Equal(r.round(30)) {
		t.Fatalf("round at 20: %+v, refresh %+v", f, f.Status.Refresh)
	}
	if got := rnd.Values.Models[0].BasePath; got != "/models/"+gen0 {
		t.Errorf("the pods are served from %s during a round, want the copy served, %s", got, gen0)
	}

	// It found a new model: the pods are moved onto it.
	r.job(rnd, batchv1.JobComplete, summary("sha256:bb"))
	updated := r.at(26)
	if f := updated.Fetches[0]; !f.NewlyFetched || f.Status.Refresh.State != servingv1alpha1.RefreshUpdated {
		t.Fatalf("round at 20 ended: %+v, refresh %+v", f, f.Status.Refresh)
	}
	gen20 := updated.Spec.Models[0].Generation
	if got := updated.Values.Models[0].BasePath; got != "/models/"+gen20 {
		t.Errorf("served from %s after the round found a new model, want its copy %s", got, gen20)
	}

	// The round begun at 30 outlasts its interval: the next waits for it.
	long := r.at(31)
	r.job(long, "", "")
	if st := r.at(45); st.Fetches[0].FetchJob != long.Fetches[0].FetchJob || !st.NextRound.IsZero() {
		t.Fatalf("at 45 the fetch of %s runs, but %s was asked for (next round %s)", long.Fetches[0].FetchJob, st.Fetches[0].FetchJob, st.NextRound)
	}

	// It fails: the model served stays, and the failure is written before
	// the round due (40) begins.
	r.job(long, batchv1.JobFailed, "NotFound: s3://models/resnet: no objects")
	failed := r.at(46)
	f = failed.Fetches[0]
	if !f.Refreshing || !f.NewlyFailed || f.Status.Refresh.State != servingv1alpha1.RefreshFailed || f.Status.Fetch != string(status.FetchSucceeded) ||
		f.FetchJob != long.Fetches[0].FetchJob {
		t.Fatalf("failed round: %+v, refresh %+v", f, f.Status.Refresh)
	}
	if got := failed.Values.Models[0].BasePath; got != "/models/"+gen20 || status.FailedFetches(failed.Fetches)["resnet"] {
		t.Errorf("after a failed round the pods are served from %s, want %s", got, gen20)
	}
	if !failed.NextRound.Before(r.round(46)) {
		t.Errorf("next round at %s: the round due must be looked at again at once", failed.NextRound)
	}

	// The next reconcile begins the round due.
	retry := r.at(46)
	if f := retry.Fetches[0]; !f.Refreshing || !f.Status.Refresh.Round.Time.Equal(r.round(40)) || f.FetchJob == long.Fetches[0].FetchJob {
		t.Fatalf("after the failure: %+v, refresh %+v", f, f.Status.Refresh)
	}

	// It finds the model the pods serve: they stay on their copy.
	r.job(retry, batchv1.JobComplete, summary("sha256:bb"))
	same := r.at(47)
	if f := same.Fetches[0]; f.Status.Refresh.State != servingv1alpha1.RefreshUnchanged || f.Status.ServedGeneration != gen20 {
		t.Fatalf("unchanged round: %+v, refresh %+v", f, f.Status.Refresh)
	}
	if got := same.Values.Models[0].BasePath; got != "/models/"+gen20 {
		t.Errorf("served from %s after an unchanged round, want %s", got, gen20)
	}
}

// TestANewStorageURIIsNotARefresh: a fetch of other inputs (a new URI) in
// the same round is fetched in the foreground, as without rounds.
func TestANewStorageURIIsNotARefresh(t *testing.T) {
	r := newRefreshing(t)
	first := r.at(0)
	r.job(first, batchv1.JobComplete, `{"versions":[1],"files":4,"bytes":2048,"digest":"sha256:aa"}`)
	r.at(1)
	r.ms.Spec.Model.StorageURI = "s3://models/resnet-v2"
	moved := r.at(2)
	if f := moved.Fetches[0]; f.Refreshing || f.State != status.FetchMissing || f.Status.Fetch != string(status.FetchMissing) {
		t.Fatalf("fetch of a new URI: %+v", f)
	}
	if !moved.Fetches[0].Status.Refresh.Round.Time.Equal(r.round(0)) {
		t.Errorf("round %s, want the one in force", moved.Fetches[0].Status.Refresh.Round)
	}
}

// TestRefreshOffKeepsTheRoundItWasIn: removing refreshInterval fetches
// nothing again: the generation keeps the round it was in.
func TestRefreshOffKeepsTheRoundItWasIn(t *testing.T) {
	r := newRefreshing(t)
	first := r.at(0)
	r.job(first, batchv1.JobComplete, `{"versions":[1],"files":4,"bytes":2048,"digest":"sha256:aa"}`)
	r.at(1)
	r.ms.Spec.Model.RefreshInterval = nil
	off := r.at(30)
	if f := off.Fetches[0]; f.FetchJob != first.Fetches[0].FetchJob || f.State != status.FetchSucceeded || f.Status.Refresh.NextRound != nil || !off.NextRound.IsZero() {
		t.Errorf("refresh off: %+v, refresh %+v, next round %s", f, f.Status.Refresh, off.NextRound)
	}
}

// TestRefreshAskedForDuringAFetchBeginsAfterIt: a refreshInterval set
// while the first fetch runs leaves that fetch alone, and the status
// without a round, until it has ended.
func TestRefreshAskedForDuringAFetchBeginsAfterIt(t *testing.T) {
	r := newRefreshing(t)
	r.ms.Spec.Model.RefreshInterval = nil
	first := r.at(0)
	r.job(first, "", "")
	r.ms.Spec.Model.RefreshInterval = &metav1.Duration{Duration: 10 * time.Minute}
	during := r.at(1)
	if f := during.Fetches[0]; f.FetchJob != first.Fetches[0].FetchJob || f.Status.Refresh != nil {
		t.Fatalf("during the fetch: Job %s (was %s), refresh %+v; want the fetch kept, no round yet", f.FetchJob, first.Fetches[0].FetchJob, f.Status.Refresh)
	}
	r.job(first, batchv1.JobComplete, `{"versions":[1],"files":4,"bytes":2048,"digest":"sha256:aa"}`)
	r.at(2)
	after := r.at(3)
	if f := after.Fetches[0]; !f.Refreshing || f.Status.Refresh == nil || !f.Status.Refresh.Round.Time.Equal(r.round(0)) {
		t.Errorf("after the fetch: %+v, refresh %+v; want the round begun at the creation, in the background", f, f.Status.Refresh)
	}
}
