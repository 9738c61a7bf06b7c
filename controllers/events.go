package controllers

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/clip"
	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
	"github.com/modelserver-dev/modelserver-operator/internal/release"
)

// problems remembers, per ModelServer and reason, the warning last
// announced. A problem that persists is retried on every reconcile; an
// Event each time would bury the one that said what went wrong, so it is
// announced again only when its message changes or after it went away.
type problems struct {
	m sync.Map // types.UID → *problemSet
}

type problemSet struct {
	mu    sync.Mutex
	notes map[string]string // reason → note
}

// first says whether this reason and note are new for the ModelServer, and
// remembers them.
func (p *problems) first(uid types.UID, reason, note string) bool {
	v, _ := p.m.LoadOrStore(uid, &problemSet{notes: map[string]string{}})
	s := v.(*problemSet)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notes[reason] == note {
		return false
	}
	s.notes[reason] = note
	return true
}

// resolved forgets the given reasons: the next occurrence is news again.
func (p *problems) resolved(uid types.UID, reasons ...string) {
	v, ok := p.m.Load(uid)
	if !ok {
		return
	}
	s := v.(*problemSet)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range reasons {
		delete(s.notes, r)
	}
}

func (p *problems) forget(uid types.UID) { p.m.Delete(uid) }

// sentence makes an Event note read as one: a capital first letter and a
// full stop; and cuts it to the apiserver's limit, which refuses a longer
// Event, and with it the news (a status message, a containerd or Helm
// error can each take most of the limit on their own).
func sentence(format string, args ...any) string {
	s := strings.TrimSpace(fmt.Sprintf(format, args...))
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToUpper(r[0])
	s = string(r)
	if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, clip.Mark) {
		s += "."
	}
	return clip.To(s, noteLimit)
}

// noteLimit is the most bytes an Event's note may have.
const noteLimit = 1024

// phaseNote is the Event note for a change of phase.
func phaseNote(from, to servingv1alpha1.Phase, st servingv1alpha1.ModelServerStatus) string {
	if from == "" {
		from = servingv1alpha1.PhasePending
	}
	switch {
	case to == servingv1alpha1.PhaseReady && st.Endpoints != nil:
		return sentence("ModelServer is Ready (was %s): %s serving pods ready, REST API at %s%s", from, st.Ready, st.Endpoints.REST, servedNote(st))
	case st.Message != "":
		return sentence("ModelServer is %s (was %s): %s", to, from, st.Message)
	default:
		return sentence("ModelServer is %s (was %s)", to, from)
	}
}

// servedNote names what a Ready ModelServer serves, for the Ready Event:
// the one Event of a new ModelServer that all went well for, so it says
// what was fetched as well.
func servedNote(st servingv1alpha1.ModelServerStatus) string {
	var parts []string
	for _, m := range statusModels(st) {
		if m.Digest == "" {
			parts = append(parts, "model "+m.Name)
			continue
		}
		kept := ""
		if m.ServedGeneration != "" {
			// A refetch found it unchanged: say why no pod was replaced.
			kept = ", fetched again unchanged: the pods kept their copy"
		}
		parts = append(parts, fmt.Sprintf("model %s %s%s)", m.Name, strings.TrimSuffix(fetchedNote(m), ")"), kept))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; serving " + strings.Join(parts, ", ")
}

// fetchedNote says what was fetched of a model: its versions and size.
func fetchedNote(m servingv1alpha1.ModelStatus) string {
	noun := "versions"
	if len(m.Versions) == 1 {
		noun = "version"
	}
	return fmt.Sprintf("%s %s (%s)", noun, fetchcontract.JoinVersions(m.Versions, ", "), fetch.FormatBytes(m.SizeBytes))
}

// The reasons of the Events of refresh rounds.
const (
	eventRefreshed     = "Refreshed"
	eventRefreshFailed = "RefreshFailed"
)

// appliedEvent is the reason of the Event for a Helm operation that
// succeeded, and what it says, as a clause: the status write that records
// the Event may add the step the operation started.
func appliedEvent(op release.Op, name string, revision int, why string) (string, string) {
	switch op {
	case release.OpInstall:
		return "Installed", fmt.Sprintf("installed Helm release %s (revision %d)", name, revision)
	case release.OpRecovered:
		return "Recovered", fmt.Sprintf("recovered Helm release %s, left unfinished by an interrupted operation, as revision %d", name, revision)
	default:
		return "Upgraded", fmt.Sprintf("upgraded Helm release %s to revision %d because %s", name, revision, why)
	}
}

// refreshEvents tell of the refresh rounds the status written now is the
// first to see end with a new model, or fail: the ModelServer stays Ready
// through both, so no phase Event does. A round that found the model
// unchanged is no news: the status holds it.
func (r *ModelServerReconciler) refreshEvents(ms *servingv1alpha1.ModelServer, old, st servingv1alpha1.ModelServerStatus) {
	was := map[string]*servingv1alpha1.ModelRefresh{}
	for _, m := range statusModels(old) {
		was[m.Name] = m.Refresh
	}
	for _, m := range statusModels(st) {
		now, before := m.Refresh, was[m.Name]
		if now == nil || (before != nil && before.Round.Equal(&now.Round) && before.State == now.State) {
			continue
		}
		switch now.State {
		case servingv1alpha1.RefreshUpdated:
			r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, eventRefreshed, "Refresh", "%s",
				sentence("model %s: the refresh round begun at %s found a new model, %s; the pods are rolled onto it", m.Name, roundTime(now.Round), fetchedNote(m)))
		case servingv1alpha1.RefreshFailed:
			r.Recorder.Eventf(ms, nil, corev1.EventTypeWarning, eventRefreshFailed, "Refresh", "%s",
				sentence("model %s: the refresh round begun at %s failed (%s); the model fetched before is still served", m.Name, roundTime(now.Round), now.Message))
		}
	}
}

// eventExposed tells of a way in from outside the cluster that carries the
// model's traffic.
const eventExposed = "Exposed"

// eventNoLongerExposed tells of a way in from outside that the status no
// longer lists.
const eventNoLongerExposed = "NoLongerExposed"

// exposedEvents tell of each way in from outside that the status written
// now is the first to list, or lists at another address: the moment the
// model can be reached from outside, which no phase marks (a ModelServer
// is Ready on its own pods, whatever carries its traffic in); and of each
// the status listed before and lists no more: spec.ingress or
// spec.gateway taken out, or a Gateway, controller or load balancer that
// stopped carrying the traffic (its own Warning says why where the
// operator sees it). A status without endpoints, that of a spec the
// operator cannot deploy, says nothing of the ways in.
func (r *ModelServerReconciler) exposedEvents(ms *servingv1alpha1.ModelServer, old, st servingv1alpha1.ModelServerStatus) {
	if st.Endpoints == nil {
		return
	}
	was := map[string]servingv1alpha1.ExternalEndpoint{}
	if old.Endpoints != nil {
		for _, e := range old.Endpoints.External {
			was[e.Via] = e
		}
	}
	for _, e := range st.Endpoints.External {
		prev, listed := was[e.Via]
		delete(was, e.Via)
		if listed && prev == e {
			continue
		}
		var at []string
		if e.REST != "" {
			at = append(at, "REST API at "+e.REST)
		}
		if e.GRPC != "" {
			at = append(at, "gRPC API at "+e.GRPC)
		}
		r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, eventExposed, "Reconcile", "%s",
			sentence("reachable from outside the cluster through %s: %s", e.Via, strings.Join(at, ", ")))
	}
	for _, via := range slices.Sorted(maps.Keys(was)) {
		r.Recorder.Eventf(ms, nil, corev1.EventTypeNormal, eventNoLongerExposed, "Reconcile", "%s",
			sentence("no longer reachable from outside the cluster through %s", via))
	}
}

// refreshFailed says a model's newest refresh round failed.
func refreshFailed(st servingv1alpha1.ModelServerStatus) bool {
	for _, m := range statusModels(st) {
		if m.Refresh != nil && m.Refresh.State == servingv1alpha1.RefreshFailed {
			return true
		}
	}
	return false
}

func roundTime(t metav1.Time) string { return t.UTC().Format(time.RFC3339) }
