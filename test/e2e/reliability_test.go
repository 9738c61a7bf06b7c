package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/test/faultproxy"
)

// resultPrefix starts each line a reliability scenario logs about a fault
// it tried; `make reliability-report` builds docs/reliability.md from these
// lines in `go test -json` output (hack/reliabilityreport).
const resultPrefix = "RELIABILITY "

// faultResult is one row of docs/reliability.md.
type faultResult struct {
	Fault  string `json:"fault"`
	Tries  int    `json:"tries"`
	Result string `json:"result"`
}

// report logs a row of the reliability table. The test's own pass or fail
// decides the row's verdict; the result says what was measured, unless
// the test has already failed, when what it would claim is not so.
func report(t *testing.T, fault string, tries int, format string, args ...any) {
	t.Helper()
	result := fmt.Sprintf(format, args...)
	if t.Failed() {
		result = "failed: see the test's log"
	}
	raw, err := json.Marshal(faultResult{Fault: fault, Tries: tries, Result: result})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(resultPrefix + string(raw))
}

// dedicatedCluster starts a cluster of the test's own, with the CRD, for a
// scenario whose operator processes must be the only ones reconciling. The
// CRD is there before kube-controller-manager starts, so what a deleted
// ModelServer owned is collected at once, not after the garbage
// collector's next discovery of kinds, up to 30 s later (41 s of a
// CSV-permissions test's 49 s went to that wait and the collection).
func dedicatedCluster(t *testing.T) *localcluster.Cluster {
	t.Helper()
	return localcluster.ForTest(t, localcluster.Options{
		CRDDir:    repoPath("config/crd/bases"),
		NodePools: []localcluster.NodePool{{Name: "node", Count: 2, CPU: "16", Memory: "64Gi", Pods: 110}},
	})
}

// operatorRun is one operator process of a scenario, optionally behind a
// fault proxy of its own.
type operatorRun struct {
	t     *testing.T
	c     *localcluster.Cluster
	name  string
	args  []string
	proxy *faultproxy.Proxy
	kube  string
	runs  int
	proc  *localcluster.Process
}

// newOperator prepares an operator named name; with proxied it talks to
// the apiserver through a fault proxy that counts its requests.
func newOperator(t *testing.T, c *localcluster.Cluster, name string, proxied bool, extra ...string) *operatorRun {
	t.Helper()
	o := &operatorRun{t: t, c: c, name: name, kube: c.Kubeconfig}
	if proxied {
		p, err := faultproxy.Start(faultproxy.Upstream{
			URL: c.Config.Host, CAData: c.Config.CAData, CertData: c.Config.CertData, KeyData: c.Config.KeyData,
		}, uint64(len(name)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		o.proxy = p
		o.kube = filepath.Join(t.TempDir(), "kubeconfig")
		if err := p.WriteKubeconfig(o.kube); err != nil {
			t.Fatal(err)
		}
	}
	o.args = append([]string{
		"manager",
		"--kubeconfig=" + o.kube,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:0",
		"--fetch-image=example.com/modelserver-operator:e2e",
	}, extra...)
	t.Cleanup(func() {
		if t.Failed() && o.proc != nil {
			t.Logf("%s log (tail):\n%s", o.proc.LogFile(), o.proc.LogTail(40))
		}
	})
	return o
}

func (o *operatorRun) start() {
	o.t.Helper()
	o.runs++
	p, err := o.c.StartProcess(fmt.Sprintf("%s-%d", o.name, o.runs), managerBinary, o.args, nil)
	if err != nil {
		o.t.Fatal(err)
	}
	o.proc = p
}

// kill ends the operator with SIGKILL: no deferred status write, no lease
// release, a Helm operation cut wherever it was.
func (o *operatorRun) kill() {
	o.t.Helper()
	if err := o.proc.Signal(syscall.SIGKILL); err != nil {
		o.t.Fatal(err)
	}
	select {
	case <-o.proc.Exited():
	case <-time.After(10 * time.Second):
		o.t.Fatalf("%s still running 10s after SIGKILL", o.name)
	}
}

// writesSince counts the requests that change state made through the
// operator's proxy since from.
func (o *operatorRun) writesSince(from time.Time) []faultproxy.Record {
	var out []faultproxy.Record
	for _, r := range o.proxy.Records(from) {
		if r.IsWrite() {
			out = append(out, r)
		}
	}
	return out
}

// helmRecordStatuses lists the status label of every Helm release record
// in ns, as "<release>.v<n>=<status>".
func helmRecordStatuses(t *testing.T, c *localcluster.Cluster, ns string) []string {
	t.Helper()
	out := kubectl(t, c, "get", "secrets", "-n", ns, "-l", "owner=helm", "-o",
		`jsonpath={range .items[*]}{.metadata.labels.name}.v{.metadata.labels.version}={.metadata.labels.status}{"\n"}{end}`)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

func waitCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
