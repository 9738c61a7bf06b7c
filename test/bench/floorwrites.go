package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// recordBytes is the size of the operator's Helm release record, as
// releaseSecretBytes measures it at N = 1000.
const recordBytes = 5_640

// operatorWrites are, for the floor run with -floor-operator-writes, the
// writes the operator makes beyond the release's objects, made without
// the operator: a release record of its size (incompressible, as Helm's
// gzipped record is), a status write once the objects exist, and once the
// Deployment is ready a status write saying Ready and a Ready Event; with
// watches on what the operator watches (watchAsOperator). What that floor
// then costs is what the operator's writes and watches cost the cluster,
// apart from the operator's own work.
type operatorWrites struct {
	dyn dynamic.Interface
	cs  kubernetes.Interface
}

// watchAsOperator watches what the operator's cache holds, with the
// operator's selectors and encoding, so the floor's cluster also pays for
// sending the operator its watch events.
func watchAsOperator(ctx context.Context, admin *rest.Config) error {
	cfg := rest.CopyConfig(admin)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.DisableCompression = true // as the operator's clients ask
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	owned := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(benchNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = values.LabelModelServer }))
	fetchPods := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(benchNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = values.LabelModelServer + "," + values.LabelComponent + "=" + values.ComponentFetch
		}))
	synced := []cache.InformerSynced{
		owned.Core().V1().ConfigMaps().Informer().HasSynced,
		owned.Core().V1().Services().Informer().HasSynced,
		owned.Core().V1().PersistentVolumeClaims().Informer().HasSynced,
		owned.Apps().V1().Deployments().Informer().HasSynced,
		owned.Batch().V1().Jobs().Informer().HasSynced,
		fetchPods.Core().V1().Pods().Informer().HasSynced,
	}
	owned.Start(ctx.Done())
	fetchPods.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("the operator's watches did not sync")
	}
	return nil
}

// afterCreate writes the release record and the status an installed
// ModelServer has while its model is fetched.
func (w operatorWrites) afterCreate(ctx context.Context, name string) error {
	if err := w.createRecord(ctx, name); err != nil {
		return err
	}
	return w.patchStatus(ctx, name, false)
}

// afterServed writes the Ready status and the Ready Event.
func (w operatorWrites) afterServed(ctx context.Context, name string) error {
	if err := w.patchStatus(ctx, name, true); err != nil {
		return err
	}
	return w.createReadyEvent(ctx, name)
}

// createRecord writes a release record of the operator's size
// (incompressible, as Helm's gzipped record is).
func (w operatorWrites) createRecord(ctx context.Context, name string) error {
	record := make([]byte, recordBytes*3/4)
	if _, err := rand.Read(record); err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "sh.helm.release.v1." + name + ".v1",
			Labels: map[string]string{"owner": "helm", "name": name, "status": "deployed", "version": "1"},
		},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(record))},
	}
	if _, err := w.cs.CoreV1().Secrets(benchNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the release record of %s: %w", name, err)
	}
	return nil
}

// createReadyEvent writes the Event the operator records when a
// ModelServer becomes Ready.
func (w operatorWrites) createReadyEvent(ctx context.Context, name string) error {
	now := metav1.NowMicro()
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: name + "-", Namespace: benchNamespace},
		EventTime:           now,
		ReportingController: "modelserver-operator",
		ReportingInstance:   "modelserver-operator-bench",
		Action:              "Reconcile",
		Reason:              servingv1alpha1.ReasonReady,
		Regarding: corev1.ObjectReference{
			APIVersion: servingv1alpha1.GroupVersion.String(), Kind: "ModelServer",
			Namespace: benchNamespace, Name: name,
		},
		Note: "serving model " + name + " version 1 (4.0 KiB) on 1/1 replicas",
		Type: corev1.EventTypeNormal,
	}
	if _, err := w.cs.EventsV1().Events(benchNamespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the Ready Event of %s: %w", name, err)
	}
	return nil
}

// patchStatus writes a status shaped as the operator's, as a merge patch.
func (w operatorWrites) patchStatus(ctx context.Context, name string, ready bool) error {
	body, err := json.Marshal(map[string]any{"status": operatorStatus(name, ready)})
	if err != nil {
		return err
	}
	_, err = benchModelServers(w.dyn).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("write the status of %s: %w", name, err)
	}
	return nil
}

// updateStatus writes the same status as patchStatus by replacing it
// whole (a PUT of the status subresource), on ms as last read; ms takes
// what the apiserver returns, so that the next update needs no read.
func (w operatorWrites) updateStatus(ctx context.Context, ms *unstructured.Unstructured, ready bool) error {
	st := operatorStatus(ms.GetName(), ready)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	ms.Object["status"] = obj
	out, err := benchModelServers(w.dyn).UpdateStatus(ctx, ms, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("write the status of %s: %w", ms.GetName(), err)
	}
	*ms = *out
	return nil
}

// benchModelServers is the ModelServers of the benchmark's namespace.
func benchModelServers(dyn dynamic.Interface) dynamic.ResourceInterface {
	return modelServersIn(dyn, benchNamespace)
}

// modelServersIn is the ModelServers of namespace ns.
func modelServersIn(dyn dynamic.Interface, ns string) dynamic.ResourceInterface {
	return dyn.Resource(servingv1alpha1.GroupVersion.WithResource("modelservers")).Namespace(ns)
}

// operatorStatus is a status shaped as the operator's: Fetching with the
// release deployed, or Ready with the fetched model.
func operatorStatus(name string, ready bool) servingv1alpha1.ModelServerStatus {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	cond := func(typ string, ok bool, reason, message string) metav1.Condition {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: status, ObservedGeneration: 1,
			LastTransitionTime: now, Reason: reason, Message: message}
	}
	st := servingv1alpha1.ModelServerStatus{
		Phase:              servingv1alpha1.PhaseFetching,
		ObservedGeneration: 1,
		Replicas:           1,
		Ready:              "0/1",
		Selector:           "app.kubernetes.io/instance=" + name + ",app.kubernetes.io/name=modelserver",
		Release: &servingv1alpha1.ReleaseStatus{Name: name, Revision: 1, ChartVersion: "0.1.0",
			ValuesDigest: "sha256:" + strings.Repeat("0", 64)},
		Endpoints: &servingv1alpha1.Endpoints{GRPC: name + "." + benchNamespace + ".svc:8500",
			REST: "http://" + name + "." + benchNamespace + ".svc:8501"},
		Conditions: []metav1.Condition{
			cond(servingv1alpha1.ConditionModelFetched, false, servingv1alpha1.ReasonFetching, "fetching s3://models/"+name),
			cond(servingv1alpha1.ConditionDeployed, true, servingv1alpha1.ReasonReleaseDeployed, "release "+name+" revision 1 deployed"),
			cond(servingv1alpha1.ConditionAvailable, false, servingv1alpha1.ReasonWaitingForFetch, "waiting for the model"),
			cond(servingv1alpha1.ConditionReady, false, servingv1alpha1.ReasonWaitingForFetch, "waiting for the model"),
		},
	}
	if ready {
		st.Phase, st.ReadyReplicas, st.Ready = servingv1alpha1.PhaseReady, 1, "1/1"
		st.Model = &servingv1alpha1.ModelStatus{Name: name, Digest: "sha256:" + strings.Repeat("1", 64),
			SizeBytes: 4096, Versions: []int64{1}, ServedVersions: []int64{1}}
		st.ModelNames = name
		st.Conditions = []metav1.Condition{
			cond(servingv1alpha1.ConditionModelFetched, true, servingv1alpha1.ReasonFetched, "fetched s3://models/"+name),
			cond(servingv1alpha1.ConditionDeployed, true, servingv1alpha1.ReasonReleaseDeployed, "release "+name+" revision 1 deployed"),
			cond(servingv1alpha1.ConditionAvailable, true, servingv1alpha1.ReasonAvailable, "1/1 replicas ready"),
			cond(servingv1alpha1.ConditionReady, true, servingv1alpha1.ReasonReady, "serving "+name+" version 1"),
		}
	}
	return st
}
