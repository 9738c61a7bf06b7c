package realnode

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
	"github.com/modelserver-dev/modelserver-operator/test/s3server"
)

// TestARefreshedModelServerTakesANewVersionWhileReady: a model refreshed
// every minute, whose store a pipeline writes version 124 into, is served
// at 124 after a round, and still after a round that found a broken
// version 125, with no moment out of Ready on the way, and Events that
// say so.
func TestARefreshedModelServerTakesANewVersionWhileReady(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)
	ctx := context.Background()
	uri, addVersion := e.storeModel(t, "refreshed/"+ns)
	e.kubectl(t, e.modelServer("refreshed", uri, 1, "64Mi", "    refreshInterval: 1m\n"), "-n", ns, "apply", "-f", "-")
	first := e.waitNewModelReady(t, ns, "refreshed", nil)

	// From now on, the ModelServer must read Ready at every look.
	watchCtx, stop := context.WithCancel(ctx)
	var (
		mu      sync.Mutex
		notOnce []string
		watched sync.WaitGroup
	)
	watched.Add(1)
	go func() {
		defer watched.Done()
		_ = wait.PollUntilContextCancel(watchCtx, 250*time.Millisecond, true, func(context.Context) (bool, error) {
			ms := e.get(t, ns, "refreshed")
			if !meta.IsStatusConditionTrue(ms.Status.Conditions, servingv1alpha1.ConditionReady) || ms.Status.Phase != servingv1alpha1.PhaseReady {
				mu.Lock()
				notOnce = append(notOnce, string(ms.Status.Phase)+": "+ms.Status.Message)
				mu.Unlock()
			}
			return false, nil
		})
	}()
	defer func() { stop(); watched.Wait() }()

	// The pipeline writes version 124 beside 123; a round takes it.
	addVersion(124)
	var last servingv1alpha1.ModelStatus
	err := wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(context.Context) (bool, error) {
		last = *e.get(t, ns, "refreshed").Status.Model
		return last.FetchedGeneration != first && slices.Equal(last.ServedVersions, []int64{124}) &&
			last.Refresh != nil && last.Refresh.State == servingv1alpha1.RefreshUpdated, nil
	})
	if err != nil {
		t.Fatalf("no round served version 124: status.model %+v, refresh %+v", last, last.Refresh)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got, _ := e.askModelStatus(ns, "refreshed")
		return got["124"] == "AVAILABLE", nil
	})
	if err != nil {
		t.Errorf("TF Serving (double) does not report version 124 AVAILABLE a minute after the round")
	}

	// The pipeline then writes a broken version: the next round fails,
	// and says so, while version 124 is still served.
	if err := s3server.PutObject(ctx, s3server.Client(e.S3Endpoint, e.S3Creds), realenv.Bucket, "refreshed/"+ns+"/00000125/variables/variables.index", []byte("half written")); err != nil {
		t.Fatal(err)
	}
	var ms *servingv1alpha1.ModelServer
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		ms = e.get(t, ns, "refreshed")
		r := ms.Status.Model.Refresh
		return r != nil && r.State == servingv1alpha1.RefreshFailed, nil
	})
	if err != nil {
		t.Fatalf("no round failed on a version without saved_model.pb: refresh %+v", ms.Status.Model.Refresh)
	}
	if m := ms.Status.Model; !slices.Equal(m.ServedVersions, []int64{124}) || !strings.Contains(m.Refresh.Message, "InvalidLayout") ||
		len(ms.Status.Warnings) != 1 || !strings.Contains(ms.Status.Warnings[0], "spec.model.refreshInterval: the refresh round begun at") {
		t.Errorf("after a failed round: served %v, refresh %+v, warnings %q; want 124 served, InvalidLayout, one warning", m.ServedVersions, m.Refresh, ms.Status.Warnings)
	}
	if got, _ := e.askModelStatus(ns, "refreshed"); got["124"] != "AVAILABLE" {
		t.Errorf("TF Serving (double) reports %v after the failed round, want version 124 still AVAILABLE", got)
	}
	stop()
	watched.Wait()
	mu.Lock()
	if len(notOnce) > 0 {
		t.Errorf("the ModelServer left Ready during the refresh %d times, first: %q", len(notOnce), notOnce[0])
	}
	mu.Unlock()
	if events, ok := e.eventsSaying(ns, "reason=Refreshed", 15*time.Second, "found a new model, version 124 ("); !ok {
		t.Errorf("Refreshed Events %q, want one naming version 124, the one served, alone", events)
	}
	if warned, ok := e.eventsSaying(ns, "reason=RefreshFailed,type=Warning", 15*time.Second,
		"has no saved_model.pb", "the model fetched before is still served"); !ok {
		t.Errorf("RefreshFailed Warnings %q within 15 s, want one saying why and that the model served stays", warned)
	}
}
