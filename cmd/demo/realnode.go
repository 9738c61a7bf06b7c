package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// The real demo's ModelServer: one of TF Serving's own test SavedModels,
// which the double computes (y = 0.5x + 2).
const (
	realName   = "half-plus-two"
	realModel  = realenv.ModelName
	realSecret = "s3-creds"
)

var (
	predictInput = []float64{1.0, 2.0, 5.0}
	predictWant  = []float64{2.5, 3.0, 4.5}
)

const whatIsReal = `On a real node: this machine can run containers.

Real: the control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler), the node (kubelet, containerd, runc, a CNI bridge pod
network, kube-proxy), the operator (its image built from this tree,
installed with dist/install.yaml, running in its pod), the fetch Job
downloading a TF SavedModel from a real S3 server (versitygw) into a real
volume, and the readiness probe the kubelet runs against the serving pods.
Simulated: TF Serving. The serving pods run a test double
(test/tfservingdouble) that answers TF Serving's REST status and metrics
and computes the two half_plus_* arithmetic test models; it is not a
TensorFlow runtime.

`

// runReal runs the demo on a real node: the environment the real-node
// tests use, the operator installed as users install it, and a ModelServer
// for a model in the S3 server, asked for a prediction once Ready.
func (d *demo) runReal(ctx context.Context, ns string, timeout time.Duration, exitWhenReady bool) error {
	d.realNode = true
	d.printf("%s", whatIsReal)
	d.say("starting the local control plane and a real node: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy")
	env, err := realenv.Start(ctx, realenv.Options{NoBigModel: true, Logf: func(format string, args ...any) {
		d.say("  %s", fmt.Sprintf(format, args...))
	}})
	if err != nil {
		return fmt.Errorf("real-node environment: %w", err)
	}
	d.cluster = env.Cluster
	cl, cs, err := clients(env.Cluster)
	if err != nil {
		return err
	}

	d.say("installing the operator: kubectl apply --server-side -f dist/install.yaml, then waiting for its Deployment to roll out")
	took, err := env.InstallOperator(ctx)
	if err != nil {
		return err
	}
	d.say("the operator's Deployment rolled out in %.1fs", took.Seconds())
	if err := d.sayOperatorPod(ctx, cs); err != nil {
		return err
	}

	ms := &servingv1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Name: realName, Namespace: ns}}
	watchCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	go d.followPods(watchCtx, cs, ns, ms.Name)
	go d.followEvents(watchCtx, cs, ns, ms.Name)
	w, err := watchModelServer(watchCtx, cl, ms)
	if err != nil {
		return err
	}
	if _, err := env.Kubectl(env.CredentialsSecret(realSecret, ""), "-n", ns, "apply", "-f", "-"); err != nil {
		w.Stop()
		return fmt.Errorf("apply the credentials Secret: %w", err)
	}
	if _, err := env.Kubectl(env.ModelServerYAML(realenv.ModelServer{Name: realName, URI: realenv.HalfPlusTwo, Secret: realSecret, Replicas: 2}), "-n", ns, "apply", "-f", "-"); err != nil {
		w.Stop()
		return fmt.Errorf("apply the ModelServer: %w", err)
	}
	d.say("applied Secret %s/%s (the S3 server's keys) and ModelServer %s/%s (model %s, image %s, 2 replicas)",
		ns, realSecret, ns, realName, realenv.HalfPlusTwo, env.DoubleImage)

	ready, err := d.followModelServer(watchCtx, cl, ms, w)
	if err != nil {
		if errors.Is(watchCtx.Err(), context.DeadlineExceeded) {
			logs, _ := env.Kubectl("", "-n", realenv.OperatorNamespace, "logs", "deploy/modelserver-controller-manager", "--tail=30")
			objs, _ := env.Kubectl("", "-n", ns, "get", "pods,jobs,pvc", "-o", "wide")
			return fmt.Errorf("ModelServer not Ready within %s:\n%s\noperator log tail:\n%s", timeout, objs, logs)
		}
		return err
	}
	cancel()
	d.status(ready)
	if ready.Status.Model != nil {
		d.printf("  (downloaded by the fetch Job's pod from the S3 server at %s into the claim's volume)\n", env.S3Endpoint)
	}
	svc, err := d.askTheModel(ctx, cs, ns)
	if err != nil {
		return err
	}
	d.explore(ready, env.Cluster.Kubeconfig,
		"The operator's log: kubectl -n "+realenv.OperatorNamespace+" logs deploy/modelserver-controller-manager",
		fmt.Sprintf("  curl %s\n  curl -d '{\"instances\": [1.0, 2.0, 5.0]}' %[1]s:predict\n", svc))
	if exitWhenReady {
		return nil
	}
	d.printf("\nThe cluster, the real node and the operator stay up until Ctrl-C.\n")
	<-ctx.Done()
	return nil
}

// sayOperatorPod shows that the operator runs in its pod, from the image
// containerd pulled.
func (d *demo) sayOperatorPod(ctx context.Context, cs kubernetes.Interface) error {
	pods, err := cs.CoreV1().Pods(realenv.OperatorNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=manager"})
	if err != nil {
		return fmt.Errorf("list the operator's pods: %w", err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || len(p.Status.ContainerStatuses) == 0 {
			continue
		}
		c := p.Status.ContainerStatuses[0]
		d.say("operator pod %s/%s: %s on %s, image %s (%s) pulled by containerd", p.Namespace, p.Name, podState(&p), p.Spec.NodeName, c.Image, c.ImageID)
		return nil
	}
	return fmt.Errorf("no running operator pod in %s with label app.kubernetes.io/component=manager", realenv.OperatorNamespace)
}

// askTheModel sends, from this machine, the model's status request and a
// prediction to the Service's cluster IP: kube-proxy's rules take them to
// a serving pod. It returns the model's URL there.
func (d *demo) askTheModel(ctx context.Context, cs kubernetes.Interface, ns string) (string, error) {
	svc, err := cs.CoreV1().Services(ns).Get(ctx, realName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("the ModelServer's Service: %w", err)
	}
	base := fmt.Sprintf("http://%s/v1/models/%s", net.JoinHostPort(svc.Spec.ClusterIP, "8501"), realModel)
	d.printf("\nAsked from this machine, through the Service's cluster IP (kube-proxy picks a serving pod):\n\n")

	status, err := request(ctx, http.MethodGet, base, nil)
	if err != nil {
		return "", err
	}
	d.printf("  $ curl %s\n  %s\n", base, status)

	in := fmt.Sprintf(`{"instances": %s}`, list(predictInput))
	answer, err := request(ctx, http.MethodPost, base+":predict", []byte(in))
	if err != nil {
		return "", err
	}
	d.printf("  $ curl -d '%s' %s:predict\n  %s\n", in, base, answer)
	var got struct {
		Predictions []float64 `json:"predictions"`
	}
	if err := json.Unmarshal([]byte(answer), &got); err != nil || !slices.Equal(got.Predictions, predictWant) {
		return "", fmt.Errorf("POST %s:predict answered %s, want predictions %v (y = 0.5x + 2)", base, answer, predictWant)
	}
	d.printf("  predictions %s for instances %s: y = 0.5x + 2, as half_plus_two computes\n", list(got.Predictions), list(predictInput))
	return base, nil
}

// list writes numbers as the requests do: [1.0, 2.0, 5.0].
func list(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 1, 64)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// request sends one request and returns the body, compacted to a line.
// A Service is Ready before kube-proxy has necessarily written its rules,
// so a refused connection is retried for a while.
func request(ctx context.Context, method, url string, body []byte) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	hc := &http.Client{Timeout: 5 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err == nil {
			raw, rerr := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if rerr != nil {
				return "", fmt.Errorf("%s %s: read the answer: %w", method, url, rerr)
			}
			if resp.StatusCode != http.StatusOK {
				return "", fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, raw)
			}
			var line bytes.Buffer
			if json.Compact(&line, raw) != nil {
				return string(raw), nil
			}
			return line.String(), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s %s: %w", method, url, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
