// Command peer runs the ModelServer chart the way an Operator SDK Helm
// operator would: helm-operator-plugins' reconciler with a value translator
// that gives the chart the very values the ModelServer operator computes.
// The benchmark runs it beside the operator, on a cluster of its own, to
// compare the two designs on the same chart and the same ModelServers.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	helmvalues "github.com/operator-framework/helm-operator-plugins/pkg/values"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	helmcharts "github.com/modelserver-dev/modelserver-operator/helm-charts"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		fetchImage    string
		maxConcurrent int
		apiQPS        float64
		apiBurst      int
	)
	flag.StringVar(&fetchImage, "fetch-image", "example.com/modelserver-operator:bench", "Image of the model-fetch Job.")
	flag.IntVar(&maxConcurrent, "max-concurrent-reconciles", 8, "Releases reconciled in parallel.")
	flag.Float64Var(&apiQPS, "kube-api-qps", 200, "Client QPS.")
	flag.IntVar(&apiBurst, "kube-api-burst", 400, "Client burst.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	// controller-runtime registers --kubeconfig itself.
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(apiQPS), apiBurst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	ch, err := helmcharts.ModelServer()
	if err != nil {
		return err
	}
	r, err := reconciler.New(
		reconciler.WithGroupVersionKind(servingv1alpha1.GroupVersion.WithKind("ModelServer")),
		reconciler.WithChart(*ch),
		reconciler.WithValueTranslator(translator(ch.Metadata.Version, ch.Metadata.AppVersion, fetchImage)),
		reconciler.WithMaxConcurrentReconciles(maxConcurrent),
		reconciler.WithMaxReleaseHistory(3),
	)
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// translator computes the chart values with the operator's own values
// package. The peer has no fetch gate, so the values say the current model
// generation is already fetched: its Deployment starts with the Job, which
// only favours the peer. It injects owner references itself, so the
// values carry none.
func translator(chartVersion, appVersion, fetchImage string) helmvalues.Translator {
	return helmvalues.TranslatorFunc(func(_ context.Context, u *unstructured.Unstructured) (chartutil.Values, error) {
		ms := &servingv1alpha1.ModelServer{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ms); err != nil {
			return nil, err
		}
		spec, err := values.Validate(ms)
		if err != nil {
			return nil, err
		}
		v, err := spec.Values(values.Inputs{
			ChartVersion: chartVersion,
			AppVersion:   appVersion,
			FetchImage:   fetchImage,
			Served:       spec.AllFetched(),
		})
		if err != nil {
			return nil, err
		}
		v.Owner = nil
		return v.Map()
	})
}
