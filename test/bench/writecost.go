package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// writeCost is what one kind of write costs the control plane, per write:
// CPU milliseconds of each component and of the client making the writes,
// from a burst of them made with nothing else running.
type writeCost struct {
	Write   string  `json:"write"`
	Count   int     `json:"count"`
	Seconds float64 `json:"seconds"`
	// CPU milliseconds per write, by component (the control plane's
	// processes, "total" for their sum, and the harness as the client).
	CPUMillis map[string]float64 `json:"cpuMillisPerWrite"`
}

// runWriteCosts measures, on a fresh cluster, each write the operator makes
// for a ModelServer beyond the release's objects (the writes the floor
// does not make), and a ConfigMap's create and patch for scale: n of each,
// made by as many workers as the floor's creates. Then the two status
// writes again, before and after the CRD's CEL rules are removed, to show
// what the rules cost the apiserver, and between those as whole-status
// updates, to show what a patch costs beyond them.
func runWriteCosts(ctx context.Context, cfg config, n int, log *slog.Logger) ([]writeCost, error) {
	c, err := startCluster(ctx, cfg, 1, log)
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	if err := installCRD(ctx, cfg.repo, c, false); err != nil {
		return nil, fmt.Errorf("install the CRD: %w", err)
	}
	if err := createNamespace(ctx, c, benchNamespace); err != nil {
		return nil, err
	}
	admin, cs, dyn, err := harnessClients(c)
	if err != nil {
		return nil, err
	}
	w := operatorWrites{dyn: dyn, cs: cs}
	modelServers := benchModelServers(dyn)
	configMap := func(i int) string { return fmt.Sprintf("write-cost-%04d", i) }

	var out []writeCost
	measure := func(write string, one func(ctx context.Context, i int) error) error {
		meter := newCPUMeter(c)
		start := time.Now()
		if err := forEach(ctx, n, cfg.createParallelism, one); err != nil {
			return fmt.Errorf("%s: %w", write, err)
		}
		wc := writeCost{Write: write, Count: n, Seconds: round(time.Since(start).Seconds()), CPUMillis: map[string]float64{}}
		for name, s := range meter.used() {
			wc.CPUMillis[name] = round(s * 1000 / float64(n))
		}
		log.Info("write cost", "write", write, "apiserverMsPerWrite", wc.CPUMillis["kube-apiserver"], "seconds", wc.Seconds)
		out = append(out, wc)
		return nil
	}
	steps := []struct {
		write string
		one   func(ctx context.Context, i int) error
	}{
		{"ModelServer create (the user's)", func(ctx context.Context, i int) error {
			_, err := modelServers.Create(ctx, modelServer(crName(i)), metav1.CreateOptions{})
			return err
		}},
		{fmt.Sprintf("release record create (%.1f kB Secret)", recordBytes/1000.0), func(ctx context.Context, i int) error {
			return w.createRecord(ctx, crName(i))
		}},
		{"status patch: Fetching, release deployed", func(ctx context.Context, i int) error {
			return w.patchStatus(ctx, crName(i), false)
		}},
		{"status patch: Ready", func(ctx context.Context, i int) error {
			return w.patchStatus(ctx, crName(i), true)
		}},
		{"Ready Event create", func(ctx context.Context, i int) error {
			return w.createReadyEvent(ctx, crName(i))
		}},
		{"for scale: ConfigMap create (3 kB)", func(ctx context.Context, i int) error {
			_, err := cs.CoreV1().ConfigMaps(benchNamespace).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: configMap(i)},
				Data:       map[string]string{"config": strings.Repeat("x", 3000)},
			}, metav1.CreateOptions{})
			return err
		}},
		{"for scale: ConfigMap merge patch", func(ctx context.Context, i int) error {
			_, err := cs.CoreV1().ConfigMaps(benchNamespace).Patch(ctx, configMap(i), types.MergePatchType,
				[]byte(`{"data":{"phase":"Ready"}}`), metav1.PatchOptions{})
			return err
		}},
	}
	for _, s := range steps {
		if err := measure(s.write, s.one); err != nil {
			return out, err
		}
	}
	// The two status writes again, Ready to Fetching and back: as merge
	// patches with and without the CRD's CEL rules, so that both see the
	// same objects, and between those as whole-status updates (PUT), which
	// the apiserver takes without reading, encoding and patching the
	// stored object first.
	bothWays := func(how, suffix string, write func(ctx context.Context, i int, ready bool) error) error {
		if err := measure(how+": Ready to Fetching, "+suffix, func(ctx context.Context, i int) error {
			return write(ctx, i, false)
		}); err != nil {
			return err
		}
		return measure(how+": Fetching to Ready, "+suffix, func(ctx context.Context, i int) error {
			return write(ctx, i, true)
		})
	}
	patch := func(ctx context.Context, i int, ready bool) error { return w.patchStatus(ctx, crName(i), ready) }
	if err := bothWays("status patch", "with CEL rules", patch); err != nil {
		return out, err
	}
	// The objects are read once, before the clock starts; each update
	// returns the object the next one writes on.
	list, err := modelServers.List(ctx, metav1.ListOptions{})
	if err != nil {
		return out, err
	}
	byName := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		byName[list.Items[i].GetName()] = &list.Items[i]
	}
	byIndex := make([]*unstructured.Unstructured, n)
	for i := range n {
		if byIndex[i] = byName[crName(i)]; byIndex[i] == nil {
			return out, fmt.Errorf("ModelServer %s not listed", crName(i))
		}
	}
	if err := bothWays("status update (PUT)", "with CEL rules", func(ctx context.Context, i int, ready bool) error {
		return w.updateStatus(ctx, byIndex[i], ready)
	}); err != nil {
		return out, err
	}
	if err := removeCELRules(ctx, admin, modelServers); err != nil {
		return out, err
	}
	return out, bothWays("status patch", "CRD without CEL rules", patch)
}

// removeCELRules takes every CEL rule out of the ModelServer CRD, and
// returns once the apiserver admits what a rule refused: a name longer
// than the 53 characters a release name may have.
func removeCELRules(ctx context.Context, cfg *rest.Config, modelServers dynamic.ResourceInterface) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()
	crd, err := crds.Get(ctx, "modelservers."+servingv1alpha1.GroupVersion.Group, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for i := range crd.Spec.Versions {
		if s := crd.Spec.Versions[i].Schema; s != nil {
			withoutCELRules(s.OpenAPIV3Schema)
		}
	}
	if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("remove the CRD's CEL rules: %w", err)
	}
	long := modelServer(strings.Repeat("l", 60))
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := modelServers.Create(ctx, long, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	})
}

func withoutCELRules(p *apiextensionsv1.JSONSchemaProps) {
	if p == nil {
		return
	}
	p.XValidations = nil
	for k, v := range p.Properties {
		withoutCELRules(&v)
		p.Properties[k] = v
	}
	if p.Items != nil {
		withoutCELRules(p.Items.Schema)
	}
	if p.AdditionalProperties != nil {
		withoutCELRules(p.AdditionalProperties.Schema)
	}
}
