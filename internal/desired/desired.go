// Package desired is the one pure step of a reconcile: from a ModelServer
// and what the controller observed of it, everything the controller needs
// to act and to report. The controller gathers the observations, calls For
// once, applies what it says, and writes the status; nothing flows back.
package desired

import (
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/status"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
)

// Config is what the operator brings to every ModelServer.
type Config struct {
	// ChartVersion and AppVersion of the embedded chart, for its labels.
	ChartVersion, AppVersion string
	// Chart names the embedded chart for the digest: its version and
	// fingerprint.
	Chart string
	// FetchImage is the operator's own image (see values.Inputs).
	FetchImage string
	// ProxyEnv is passed on to the serving and fetch containers.
	ProxyEnv []corev1.EnvVar
}

// Observed is what the controller read of a ModelServer's surroundings.
type Observed struct {
	// Status is the ModelServer's status as last written.
	Status servingv1alpha1.ModelServerStatus
	// FetchJobs are the ModelServer's model-fetch Jobs, by name.
	FetchJobs map[string]*status.FetchJob
	// Deployment is the serving Deployment, nil if it does not exist.
	Deployment *appsv1.Deployment
	// APIs says, by values.APIKey, whether the optional kinds the spec
	// asks for exist in the cluster.
	APIs map[string]bool
	// TLSCertDigest is a digest of the certificates of spec.tls's Secret,
	// checked (see values.Inputs).
	TLSCertDigest string
	// GatewayTrust is how a Gateway can check that certificate (see
	// values.Inputs).
	GatewayTrust *values.GatewayTrust
	// ServiceAccount is what the pods' service account gives, read where
	// a fetch may need it (values.NeedsServiceAccount).
	ServiceAccount values.Account
	// Now is when this was observed: the refresh rounds due are those
	// begun by then.
	Now time.Time
	// RetriedWith are the fetch settings this process has made failed
	// Jobs again with, by Job name (State.Retries): a Job made so is not
	// made again for the same settings, whatever its pod template shows
	// of them (an admission webhook may have changed it).
	RetriedWith map[string]values.FetchSettings
	// CredentialsChanged says when each credentials Secret that a store
	// refused was last changed, by name: a failed fetch is made again
	// once its Secret has changed since (status.CredentialsRefused).
	CredentialsChanged map[string]time.Time
}

// State is what a ModelServer should be, given what was observed.
type State struct {
	// Spec is the validated spec: its models, their fetch generations and
	// Jobs, and the desired number of serving pods.
	Spec *values.Spec
	// Fetches say how each model's current fetch went, in spec order.
	Fetches []status.ModelFetch
	// Values are the chart values, and Digest their digest with the
	// chart's version and fingerprint.
	Values *values.Values
	Digest string
	// Selector selects the serving pods, for the scale subresource.
	Selector string
	// Endpoints are the in-cluster addresses of the first model; each
	// model's REST address is in its fetch's status.
	Endpoints *servingv1alpha1.Endpoints
	// NextRound is when the next refresh round of a model whose fetch is
	// not running is due, zero if none is: nothing watched wakes the
	// reconciler then.
	NextRound time.Time
	// Retries are the failed fetch Jobs to make again: those made with
	// other settings than spec.fetch's now, and those due to be retried.
	// The controller deletes them, and the values make them again.
	Retries []Retry
	// NextRetry is when the next failed fetch is due to be made again,
	// zero if none is.
	NextRetry time.Time
}

// For validates ms and computes its desired state. A spec that cannot be
// served gives a *values.Error that names the field, and no state.
func For(ms *servingv1alpha1.ModelServer, obs Observed, cfg Config) (*State, error) {
	spec, err := values.ValidateWith(ms, obs.ServiceAccount)
	if err != nil {
		return nil, err
	}
	// Each model in the round its status holds, so that its Job is the
	// one observed.
	held := status.Rounds(obs.Status, spec)
	for i, m := range spec.Models {
		spec.InRound(i, held[m.Name])
	}
	plan := planRetries(spec, obs)
	obs.FetchJobs = plan.jobs
	fetches, next := inRounds(ms, spec, obs)
	plan.tell(fetches)
	in := values.Inputs{
		ChartVersion:        cfg.ChartVersion,
		AppVersion:          cfg.AppVersion,
		FetchImage:          cfg.FetchImage,
		ProxyEnv:            cfg.ProxyEnv,
		APIs:                obs.APIs,
		LiveJobs:            liveJobs(spec, obs.FetchJobs),
		TLSCertDigest:       obs.TLSCertDigest,
		GatewayTrust:        obs.GatewayTrust,
		LiveReplicas:        liveReplicas(obs.Deployment),
		Served:              status.Served(fetches),
		Pins:                status.Pins(fetches),
		LiveServingPod:      liveServingPod(obs.Deployment),
		LiveRestartChecksum: liveRestartChecksum(obs.Deployment),
		FailedFetches:       status.FailedFetches(fetches),
	}
	vals, err := spec.Values(in)
	if err != nil {
		return nil, err
	}
	st := &State{
		Spec:      spec,
		Fetches:   fetches,
		Values:    vals,
		Digest:    values.Digest(cfg.Chart, vals),
		Selector:  labels.SelectorFromSet(vals.Labels.Selector).String(),
		NextRound: next,
		Retries:   plan.retries,
		NextRetry: plan.next,
		Endpoints: &servingv1alpha1.Endpoints{
			GRPC: fmt.Sprintf("%s.%s.svc:%d", vals.Names.Service, ms.Namespace, vals.Serving.GRPCPort),
			REST: restURL(ms.Namespace, vals, vals.Models[0].Name),
		},
	}
	for i := range st.Fetches {
		st.Fetches[i].Status.Endpoint = restURL(ms.Namespace, vals, st.Fetches[i].Name)
	}
	return st, nil
}

// inRounds puts each model of spec in the refresh round it is due to be
// in (values.DueRound), and says how each model's fetch went, and when
// the next round is due. A round does not begin while the fetch of the
// last one runs: a fetch that outlasts the interval is let finish.
func inRounds(ms *servingv1alpha1.ModelServer, spec *values.Spec, obs Observed) ([]status.ModelFetch, time.Time) {
	fetches := status.Fetches(obs.Status, spec, obs.FetchJobs)
	moved := false
	var next time.Time
	for i, m := range spec.Models {
		interval, f := m.RefreshInterval(), fetches[i]
		if interval == 0 || f.State == status.FetchRunning {
			continue
		}
		due := values.DueRound(ms.CreationTimestamp.Time, m.Round, obs.Now, interval)
		if f.NewlyFetched || f.NewlyFailed {
			// How the round ended is written first; the next begins a
			// reconcile later, rather than hide it.
			due = m.Round
		}
		if !due.Equal(m.Round) {
			spec.InRound(i, due)
			moved = true
		}
		if at := due.Add(interval); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if moved {
		fetches = status.Fetches(obs.Status, spec, obs.FetchJobs)
	}
	return fetches, next
}

// restURL is the in-cluster URL of one model's REST API.
func restURL(namespace string, vals *values.Values, model string) string {
	return fmt.Sprintf("http://%s.%s.svc:%d%s", vals.Names.Service, namespace, vals.Serving.RESTPort, values.ModelPath(model))
}

// liveJobs maps the fetch generation of each model whose Job exists to
// what that Job's pod was made with.
func liveJobs(spec *values.Spec, jobs map[string]*status.FetchJob) map[string]values.LiveJob {
	progs := map[string]values.LiveJob{}
	for _, m := range spec.Models {
		fj := jobs[m.FetchJob]
		if fj == nil {
			continue
		}
		c, ok := status.FetchContainer(fj.Job)
		if !ok {
			continue
		}
		progs[m.Generation] = values.LiveJob{Program: values.Program{Image: c.Image, Command: c.Command}, NodeSelector: fj.Job.Spec.Template.Spec.NodeSelector,
			ReadsModelConfig: slices.Contains(c.Args, values.ServedConfigFlag),
			Settings:         madeWith(fj.Job, c), Finished: fj.State() != status.FetchRunning}
	}
	return progs
}

func liveServingPod(d *appsv1.Deployment) *corev1.PodSpec {
	if d == nil {
		return nil
	}
	return &d.Spec.Template.Spec
}

func liveRestartChecksum(d *appsv1.Deployment) string {
	if d == nil {
		return ""
	}
	return d.Spec.Template.Annotations[values.AnnotationRestartChecksum]
}

func liveReplicas(d *appsv1.Deployment) *int32 {
	if d == nil {
		return nil
	}
	return d.Spec.Replicas
}
