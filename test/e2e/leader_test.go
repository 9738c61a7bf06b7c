package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestWhenTheLeaderIsKilledTheFollowerTakesOverAndNeverWroteBefore runs two
// replicas with leader election, each behind a proxy that counts its
// requests. While the first leads, the second makes no write at all; once
// the leader is SIGKILLed, the second holds the Lease once it expires
// (the lease duration, plus the slack of the retry period it polls at)
// and reconciles.
func TestWhenTheLeaderIsKilledTheFollowerTakesOverAndNeverWroteBefore(t *testing.T) {
	c := dedicatedCluster(t)
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ns := kubectlNamespace(t, c)
	elect := []string{"--leader-elect", "--leader-election-namespace=default"}
	leader := newOperator(t, c, "replica-a", true, elect...)
	follower := newOperator(t, c, "replica-b", true, elect...)

	leader.start()
	var holder string
	waitFor(t, 60*time.Second, "first replica holds the Lease", func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases("default").Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		holder = ptr.Deref(l.Spec.HolderIdentity, "")
		return holder != "", nil
	})
	followerStart := time.Now()
	follower.start()
	waitFor(t, 30*time.Second, "second replica asks for the Lease", func(context.Context) (bool, error) {
		for _, r := range follower.proxy.Records(followerStart) {
			if r.Resource == "leases" && r.Verb == "get" {
				return true, nil
			}
		}
		return false, nil
	})

	kubectl(t, c, "apply", "-n", ns, "-f", repoPath("config/samples/serving_v1alpha1_modelserver.yaml"))
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=90s")
	kubectl(t, c, "scale", "-n", ns, "ms/resnet", "--replicas=3")
	waitObserved(t, c, ns, "resnet")
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=60s")

	if w := follower.writesSince(followerStart); len(w) != 0 {
		t.Errorf("the follower wrote %d times while the leader led, first: %+v", len(w), w[0])
	}
	followerReads := len(follower.proxy.Records(followerStart))
	leaderWrites := len(leader.writesSince(followerStart))
	if leaderWrites == 0 {
		t.Fatal("the leader made no write: the scenario proves nothing")
	}

	lease, err := cs.CoordinationV1().Leases("default").Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaseDuration := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 15)) * time.Second
	killedAt := time.Now()
	leader.kill()
	var handover time.Duration
	waitFor(t, 2*leaseDuration+10*time.Second, "the follower takes the Lease", func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases("default").Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "" && h != holder {
			handover = time.Since(killedAt)
			return true, nil
		}
		return false, nil
	})
	// A killed leader does not hand the Lease back: the follower counts
	// the lease duration from when it saw the last renewal, and looks at
	// the Lease once per retry period (2s, jittered by up to 1.2 times
	// more). So it may see the last renewal one try late and the expiry
	// one try late: the bound is the lease duration plus two jittered
	// retry periods.
	const jitteredRetry = 2 * time.Second * 22 / 10
	if bound := leaseDuration + 2*jitteredRetry; handover > bound {
		t.Errorf("handover took %s, want at most %s (the lease duration %s plus two jittered retry periods)", handover, bound, leaseDuration)
	}

	kubectl(t, c, "scale", "-n", ns, "ms/resnet", "--replicas=1")
	waitObserved(t, c, ns, "resnet")
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=60s")
	if got := kubectl(t, c, "get", "-n", ns, "deploy/resnet", "-o", "jsonpath={.spec.replicas}"); got != "1" {
		t.Errorf("after the handover the Deployment has %s replicas, want 1", got)
	}
	report(t, "leader SIGKILLed with a follower waiting", 1,
		"follower took the Lease %.1fs after the kill (lease duration %s) and reconciled; while following it made %d requests, 0 writes (leader: %d writes)",
		handover.Seconds(), leaseDuration, followerReads, leaderWrites)
}
