package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/operator-framework/operator-lib/proxy"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/controllers"
	helmcharts "github.com/modelserver-dev/modelserver-operator/helm-charts"
	"github.com/modelserver-dev/modelserver-operator/internal/memlimit"
	"github.com/modelserver-dev/modelserver-operator/internal/metricscert"
	"github.com/modelserver-dev/modelserver-operator/internal/owned"
	"github.com/modelserver-dev/modelserver-operator/internal/release"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// leaderElectionID names the Lease the replicas of the operator compete for.
const leaderElectionID = "modelserver-operator.serving.modelserver.dev"

// defaultGCPercent is the manager's GOGC unless the environment sets one.
// Its live heap is mostly the informers' caches, and Go's default (100)
// lets the heap grow to twice that between collections: at 1000
// ModelServers a 57 MiB live heap had a 95 MiB target, and the peak RSS
// passed 200 MiB. At 50 the target is 1.5 times the live heap, for more
// frequent collections while ModelServers are installed; an idle operator
// allocates nothing, so it costs nothing then.
const defaultGCPercent = 50

func runManager(args []string) error {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	var (
		metricsAddr     string
		secureMetrics   bool
		metricsCertDir  string
		probeAddr       string
		pprofAddr       string
		leaderElect     bool
		leaderElectNS   string
		enableHTTP2     bool
		kubeconfig      string
		watchNamespaces string
		fetchImage      string
		maxConcurrent   int
		apiQPS          float64
		apiBurst        int
		apiCompression  bool
	)
	fs.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "Address the metrics endpoint binds to; 0 disables it.")
	fs.BoolVar(&secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS, authenticated and authorized through the apiserver.")
	fs.StringVar(&metricsCertDir, "metrics-cert-dir", "", "Directory of the metrics endpoint's certificate (tls.crt, tls.key: a mounted kubernetes.io/tls Secret), read again as it is rotated; until it holds one, and without it, the certificate is self-signed.")
	fs.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.StringVar(&pprofAddr, "pprof-bind-address", "0", "Address Go's /debug/pprof profiles are served on, for diagnosing CPU and memory; 0 disables them.")
	fs.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles.")
	fs.StringVar(&leaderElectNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the operator's own namespace in a cluster).")
	fs.BoolVar(&enableHTTP2, "enable-http2", false, "Serve metrics over HTTP/2 (off by default: CVE-2023-44487, CVE-2023-39325).")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Path to a kubeconfig; default: in-cluster config or $KUBECONFIG.")
	fs.StringVar(&watchNamespaces, "watch-namespaces", os.Getenv("WATCH_NAMESPACE"), "Comma-separated namespaces to watch (default $WATCH_NAMESPACE; empty: all).")
	fs.StringVar(&fetchImage, "fetch-image", envOr("RELATED_IMAGE_OPERATOR", defaultImage), "Image of the model-fetch Job: this operator's own image (default $RELATED_IMAGE_OPERATOR).")
	fs.IntVar(&maxConcurrent, "max-concurrent-reconciles", controllers.DefaultMaxConcurrentReconciles, "ModelServers reconciled in parallel.")
	fs.Float64Var(&apiQPS, "kube-api-qps", 200, "Requests per second to the apiserver, sustained; reads from the cache do not count.")
	fs.IntVar(&apiBurst, "kube-api-burst", 400, "Requests to the apiserver allowed in a burst above --kube-api-qps.")
	fs.BoolVar(&apiCompression, "kube-api-compression", false, "Accept gzipped responses and watch streams from the apiserver: fewer bytes, more CPU on both ends, for an operator far from its apiserver.")
	zapOpts := zap.Options{Development: false}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The flag package stops at the first argument that is not a flag, and
	// would silently ignore every flag after it.
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: flags go after the subcommand, as in `manager manager --kubeconfig=…`", fs.Arg(0))
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	// A heap sized past the container's memory limit (more ModelServers
	// than the limit was set for) slows the operator down under a soft
	// limit rather than having it killed, restarted and killed again.
	if cgroupLimit, goLimit, err := memlimit.Set("/"); err != nil {
		log.Error(err, "read the cgroup's memory limit; Go's memory limit is not set")
	} else if goLimit > 0 {
		log.Info("Go memory limit set below the cgroup's", "cgroupLimitBytes", cgroupLimit, "goLimitBytes", goLimit)
	}

	if kubeconfig != "" {
		if err := os.Setenv("KUBECONFIG", kubeconfig); err != nil {
			return err
		}
	}
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	tuneAPIClient(restConfig, apiQPS, apiBurst, apiCompression)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := servingv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}

	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	if secureMetrics {
		certs, err := metricscert.New(metricsCertDir, ctrl.Log.WithName("metrics-cert"))
		if err != nil {
			return err
		}
		tlsOpts = append(tlsOpts, certs.TLSOption)
	}
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics, TLSOpts: tlsOpts}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	metrics := &listening{what: "the metrics server"}
	metricsOpts.ListenConfig.Control = metrics.control

	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        probeAddr,
		PprofBindAddress:              pprofAddr,
		LeaderElection:                leaderElect,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       leaderElectNS,
		LeaderElectionReleaseOnCancel: true,
		Cache: cache.Options{
			DefaultNamespaces: namespaceConfig(watchNamespaces),
			ByObject:          ownedObjectsOnly(),
			// Nothing reads who wrote which field, and every cached
			// object carries that record.
			DefaultTransform: cache.TransformStripManagedFields(),
		},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	if metricsAddr != "0" {
		if err := mgr.AddReadyzCheck("metrics", metrics.check); err != nil {
			return err
		}
	}

	ch, err := helmcharts.ModelServer()
	if err != nil {
		return fmt.Errorf("load the embedded chart: %w", err)
	}
	releases, err := release.New(restConfig, release.Options{Log: ctrl.Log.WithName("helm"), Live: owned.Cached{Reader: mgr.GetCache()}})
	if err != nil {
		return err
	}
	podLogs, err := corev1client.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("make the client of fetch pods' logs: %w", err)
	}
	reconciler := &controllers.ModelServerReconciler{
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		Recorder:   mgr.GetEventRecorder("modelserver-operator"),
		Releases:   releases,
		Chart:      ch,
		FetchImage: fetchImage,
		ProxyEnv:   proxy.ReadProxyVarsFromEnv(),
		PodLogs:    podLogs,
		Namespaces: namespaceConfig(watchNamespaces),

		MaxConcurrentReconciles: maxConcurrent,
	}
	if err := reconciler.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the ModelServer controller: %w", err)
	}

	log.Info("starting manager", "watchNamespaces", watchNamespaces, "leaderElection", leaderElect)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// tuneAPIClient sets how the operator's clients talk to the apiserver.
func tuneAPIClient(cfg *rest.Config, qps float64, burst int, compression bool) {
	cfg.QPS, cfg.Burst = float32(qps), burst
	// Go's HTTP client asks for gzip unless told not to, and the apiserver
	// then compresses what it streams to the operator's informers, each
	// event as a gzip stream of its own: CPU the apiserver and the
	// operator spend on every change of every ModelServer's objects, to
	// save bytes on the cluster's own network.
	cfg.DisableCompression = !compression
}

// defaultImage is the operator's released image, used by the fetch Job
// when neither --fetch-image nor $RELATED_IMAGE_OPERATOR says otherwise.
const defaultImage = "ghcr.io/modelserver-dev/modelserver-operator:0.1.0"

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// ownedObjectsOnly keeps only the objects of ModelServer releases in the
// caches of the kinds the operator owns (owned.Kinds), instead of every
// ConfigMap, Service, Deployment, Job and claim in the cluster; of pods
// only the fetch pods; of Events only claims' ProvisioningFailed; of
// Secrets only the metadata of TLS ones; and of ServiceAccounts only
// their image pull secrets.
func ownedObjectsOnly() map[client.Object]cache.ByObject {
	req, err := labels.NewRequirement(values.LabelModelServer, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key; cannot fail
	}
	objects := map[client.Object]cache.ByObject{
		&corev1.Pod{}:    controllers.FetchPodsCache(),
		&corev1.Event{}:  controllers.ProvisioningFailedCache(),
		&corev1.Secret{}: controllers.TLSSecretsCache(),
		// Of service accounts, their image pull secrets alone.
		&corev1.ServiceAccount{}: controllers.ServiceAccountsCache(),
	}
	for _, k := range owned.Kinds {
		objects[k.New()] = cache.ByObject{Label: labels.NewSelector().Add(*req)}
	}
	return objects
}

// namespaceConfig restricts the cache to the given namespaces (OLM's
// OwnNamespace, SingleNamespace and MultiNamespace install modes); nil
// watches all.
func namespaceConfig(list string) map[string]cache.Config {
	var out map[string]cache.Config
	for ns := range strings.SplitSeq(list, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			if out == nil {
				out = map[string]cache.Config{}
			}
			out[ns] = cache.Config{}
		}
	}
	return out
}
