package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/test/faultproxy"
)

var writeVerbs = []string{"create", "update", "patch", "delete"}

// TestTheOperatorRetriesRejectedRequestsWithBackoffAndConverges puts a
// proxy between the operator and the apiserver. First a share of requests
// is refused with 409, 429 (Retry-After) and 500: the ModelServer still
// becomes Ready and follows changes. (A Helm upgrade makes about eight
// writes and ten reads and fails as a whole if one does, so the share is
// kept to what a struggling apiserver gives, not one that no transaction
// survives.) Then every request is refused for a
// while: the operator backs off (its request rate stays bounded, no hot
// loop), and converges once the apiserver answers again.
func TestTheOperatorRetriesRejectedRequestsWithBackoffAndConverges(t *testing.T) {
	c := dedicatedCluster(t)
	ns := kubectlNamespace(t, c)
	op := newOperator(t, c, "faulty-network-operator", true)
	op.start()

	flaky := time.Now()
	op.proxy.SetRules(
		// Conflicts are what a status or finalizer patch meets most.
		faultproxy.Rule{Resources: []string{"modelservers", "modelservers/status"}, Verbs: writeVerbs, Status: http.StatusConflict, Fraction: 0.3},
		faultproxy.Rule{Verbs: writeVerbs, Status: http.StatusConflict, Fraction: 0.03},
		faultproxy.Rule{Verbs: writeVerbs, Status: http.StatusTooManyRequests, Fraction: 0.03, RetryAfter: 1},
		faultproxy.Rule{Verbs: writeVerbs, Status: http.StatusInternalServerError, Fraction: 0.03},
		faultproxy.Rule{Verbs: []string{"get", "list"}, Status: http.StatusInternalServerError, Fraction: 0.03},
	)
	kubectl(t, c, "apply", "-n", ns, "-f", repoPath("config/samples/serving_v1alpha1_modelserver.yaml"))
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=120s")
	for _, n := range []string{"3", "1", "2"} {
		kubectl(t, c, "scale", "-n", ns, "ms/resnet", "--replicas="+n)
		waitObserved(t, c, ns, "resnet")
		kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=120s")
	}
	rejected := map[int]int{}
	total := 0
	for _, r := range op.proxy.Records(flaky) {
		total++
		if r.Rejected != 0 {
			rejected[r.Rejected]++
		}
	}
	if rejected[409]+rejected[429]+rejected[500] == 0 {
		t.Fatal("no request was refused: the scenario proves nothing")
	}
	checkOneDeployedRelease(t, c, ns, "resnet")
	report(t, "apiserver refuses 30% of ModelServer writes with 409, 3% of other writes each with 409, 429 (Retry-After: 1) and 500, and 3% of reads with 500", 4,
		"Ready after the install and each of 3 scales; %d of %d requests refused (409: %d, 429: %d, 500: %d)",
		rejected[409]+rejected[429]+rejected[500], total, rejected[409], rejected[429], rejected[500])

	// A total outage: the operator must not spin while it lasts.
	const outage = 20 * time.Second
	op.proxy.SetRules(faultproxy.Rule{Status: http.StatusInternalServerError})
	down := time.Now()
	kubectl(t, c, "scale", "-n", ns, "ms/resnet", "--replicas=3") // wakes the operator through its open watch
	time.Sleep(outage)
	up := time.Now()
	op.proxy.SetRules()
	rate := faultproxy.RateOf(op.proxy.Records(down), down, up, nil)
	waitObserved(t, c, ns, "resnet")
	kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=120s")
	recovered := time.Since(up)
	// Without backoff a failing reconcile loop makes hundreds of requests a
	// second; with it, retries thin out to a few per second at most.
	if rate.Mean > 5 || rate.Peak > 40 {
		t.Errorf("during the outage: %d requests, mean %.1f/s, peak %d/s; want a backed-off rate (mean <= 5/s, peak <= 40/s)",
			rate.Requests, rate.Mean, rate.Peak)
	}
	report(t, fmt.Sprintf("apiserver refuses every request with 500 for %s", outage), 1,
		"%d requests during the outage (mean %.2f/s, busiest second %d); Ready %.1fs after it ended",
		rate.Requests, rate.Mean, rate.Peak, recovered.Seconds())
	t.Logf("requests during the outage by verb and resource: %s", byVerb(op.proxy.Records(down), up))
}

// TestTheOperatorConvergesAcrossAnAPIServerRestart restarts kube-apiserver
// while the operator installs a release and again while it upgrades it.
func TestTheOperatorConvergesAcrossAnAPIServerRestart(t *testing.T) {
	c := dedicatedCluster(t)
	ns := kubectlNamespace(t, c)
	op := newOperator(t, c, "restart-operator", false)
	op.start()
	ctx := waitCtx(t, 5*time.Minute)
	// Let the operator's caches sync first, so the change below is
	// reconciled at once.
	time.Sleep(3 * time.Second)

	var took []time.Duration
	for _, step := range []struct{ what, apply string }{
		{"install", ""},
		{"upgrade", `{"spec":{"image":"tensorflow/serving:2.18.0"}}`},
	} {
		if step.apply == "" {
			kubectl(t, c, "apply", "-n", ns, "-f", repoPath("config/samples/serving_v1alpha1_modelserver.yaml"))
		} else {
			kubectl(t, c, "patch", "-n", ns, "ms/resnet", "--type=merge", "-p", step.apply)
		}
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		if err := c.RestartAPIServer(ctx, 5*time.Second, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		waitObserved(t, c, ns, "resnet")
		kubectl(t, c, "wait", "-n", ns, "--for=condition=Ready", "ms/resnet", "--timeout=120s")
		took = append(took, time.Since(start))
		checkOneDeployedRelease(t, c, ns, "resnet")
	}
	if got := kubectl(t, c, "get", "-n", ns, "deploy/resnet", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); got != "tensorflow/serving:2.18.0" {
		t.Errorf("image after the upgrade: %s", got)
	}
	report(t, "kube-apiserver restarted (2s down) during install and during upgrade", 2,
		"Ready after each, %.1fs and %.1fs from the restart; one deployed release record, none pending",
		took[0].Seconds(), took[1].Seconds())
}

func byVerb(recs []faultproxy.Record, until time.Time) string {
	counts := map[string]int{}
	for _, r := range recs {
		if r.At.Before(until) {
			counts[r.Verb+" "+r.Resource]++
		}
	}
	var parts []string
	for k, v := range counts {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	return strings.Join(parts, ", ")
}
