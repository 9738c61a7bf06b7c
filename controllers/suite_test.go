package controllers_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/operator-framework/operator-lib/proxy"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/controllers"
	helmcharts "github.com/modelserver-dev/modelserver-operator/helm-charts"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/owned"
	"github.com/modelserver-dev/modelserver-operator/internal/release"
)

// The suite runs the reconciler in this process against one local control
// plane (kube-controller-manager and kwok included, so that Jobs complete
// and Deployments become ready), each test in a namespace of its own.
var env struct {
	cluster    *localcluster.Cluster
	client     client.Client
	reconciler *controllers.ModelServerReconciler
	requests   *requestCounter
	scheme     *runtime.Scheme
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapLevel())))
	c, err := localcluster.Start(context.Background(), localcluster.Options{CRDDir: "../config/crd/bases"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start local cluster:", err)
		return 1
	}
	defer c.Stop()
	env.cluster = c

	env.scheme = runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(env.scheme)
	_ = servingv1alpha1.AddToScheme(env.scheme)
	_ = apiextensionsv1.AddToScheme(env.scheme)
	cfg := rest.CopyConfig(c.Config)
	env.requests = &requestCounter{}
	cfg.Wrap(env.requests.wrap)

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  env.scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Tests that stand for an operator restart or upgrade drive their
		// own reconcilers in unmanagedNamespace, out of this one's sight.
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{
			cache.AllNamespaces: {FieldSelector: fields.OneTermNotEqualSelector("metadata.namespace", unmanagedNamespace)},
		}},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ch, err := helmcharts.ModelServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	releases, err := release.New(cfg, release.Options{
		Log: ctrl.Log.WithName("helm"), RefreshEvery: time.Second, Live: owned.Cached{Reader: mgr.GetCache()},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	podLogs, err := corev1client.NewForConfig(mgr.GetConfig())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.reconciler = &controllers.ModelServerReconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Recorder:     mgr.GetEventRecorder("modelserver-operator"),
		Releases:     releases,
		Chart:        ch,
		FetchImage:   "example.com/modelserver-operator:test",
		ProxyEnv:     proxy.ReadProxyVarsFromEnv(),
		RecheckAfter: time.Second,
		PodLogs:      podLogs,
	}
	if err := env.reconciler.SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	})
	defer func() { cancel(); wg.Wait() }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "cache did not sync")
		return 1
	}
	env.client, err = client.New(c.Config, client.Options{Scheme: env.scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// zapLevel logs only errors unless TEST_VERBOSE_OPERATOR is set.
// unmanagedNamespace is a namespace the suite's manager ignores.
const unmanagedNamespace = "no-operator"

func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE_OPERATOR") != "" {
		return zapcore.Level(-2)
	}
	return zapcore.ErrorLevel
}

// requestCounter counts the requests the operator sends, by verb.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	writes atomic.Int64
	log    []string
	// all holds every request as "METHOD path?query", in order.
	all []string
}

type countingTransport struct {
	next http.RoundTripper
	c    *requestCounter
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return &countingTransport{next: rt, c: c}
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.c.mu.Lock()
	if t.c.counts == nil {
		t.c.counts = map[string]int{}
	}
	t.c.counts[req.Method]++
	t.c.all = append(t.c.all, req.Method+" "+req.URL.RequestURI())
	if req.Method != http.MethodGet {
		t.c.writes.Add(1)
		t.c.log = append(t.c.log, req.Method+" "+req.URL.Path)
	}
	t.c.mu.Unlock()
	return t.next.RoundTrip(req)
}

// snapshot returns the requests by verb and the write log so far.
func (c *requestCounter) snapshot() (map[string]int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	counts := map[string]int{}
	for k, v := range c.counts {
		counts[k] = v
	}
	return counts, append([]string(nil), c.log...)
}

// requestsSince returns every request made after the first n, and the
// count to pass next time.
func (c *requestCounter) requestsSince(n int) ([]string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.all[n:]...), len(c.all)
}

// Helpers shared by the tests.

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ms-"}}
	if err := env.client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(env.cluster.LogTails(20))
		}
	})
	return ns.Name
}

func newModelServer(ns, name string, mutate ...func(*servingv1alpha1.ModelServer)) *servingv1alpha1.ModelServer {
	ms := &servingv1alpha1.ModelServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: servingv1alpha1.ModelServerSpec{
			Model:    &servingv1alpha1.ModelSpec{StorageURI: "s3://models/" + name},
			Replicas: ptrTo[int32](2),
		},
	}
	for _, m := range mutate {
		m(ms)
	}
	return ms
}

func ptrTo[T any](v T) *T { return &v }

// eventually polls cond until it holds or fails the test after timeout
// with the last thing it saw.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, seen := cond(ctx)
		// A look cut short by the deadline saw nothing: keep the one
		// before.
		if ctx.Err() == nil || last == "" {
			last = seen
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s; last seen: %s", what, timeout, last)
	}
}

// waitReady waits for ms to be Ready at its generation. Alone, a
// ModelServer on kwok is Ready within seconds; the minutes allowed are
// for a CI machine that runs every cluster suite at once, where a new
// ModelServer's pods once took 58 s to be made.
func waitReady(t *testing.T, ms *servingv1alpha1.ModelServer) *servingv1alpha1.ModelServer {
	t.Helper()
	got := &servingv1alpha1.ModelServer{}
	eventually(t, 2*time.Minute, ms.Name+" Ready", func(ctx context.Context) (bool, string) {
		if err := env.client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(got.Status.Conditions, servingv1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == got.Generation,
			fmt.Sprintf("phase %s: %s", got.Status.Phase, got.Status.Message)
	})
	return got
}

func get[T client.Object](t *testing.T, ns, name string, obj T) T {
	t.Helper()
	if err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("get %T %s/%s: %v", obj, ns, name, err)
	}
	return obj
}

// releaseSecrets lists the Helm release records of a release.
func releaseSecrets(t *testing.T, ns, name string) []corev1.Secret {
	t.Helper()
	list := &corev1.SecretList{}
	if err := env.client.List(context.Background(), list, client.InNamespace(ns),
		client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}
