package fetch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// A gs:// model's webIdentity of gkeWorkloadIdentity reads the bucket as
// GKE's metadata server identifies the fetch pod: the server, on every
// node of a pool with Workload Identity Federation for GKE, knows a pod by
// its address and gives access tokens of its service account's principal,
// or of the Google service account the account is annotated with. A node
// pool without it answers with the node's own service account: the fetch
// asks who it is first, and refuses to read the model as anyone else.

// KeyGCEMetadataHost is the credentials Secret's key for another metadata
// server than the node's, host[:port], as Google's client libraries read
// GCE_METADATA_HOST.
const KeyGCEMetadataHost = "GCE_METADATA_HOST"

// gkeMetadataHost is where the metadata server answers on every GKE node:
// a link-local address, so no DNS is needed to find it.
const gkeMetadataHost = "169.254.169.254"

// metadataTimeout bounds one request to the metadata server, which
// answers from the node itself.
const metadataTimeout = 10 * time.Second

// metadataClient reaches the metadata server directly: never through the
// proxy or the trust the store's transport may have, as Google's own
// libraries do.
func metadataClient() *http.Client {
	return &http.Client{
		Timeout: metadataTimeout,
		Transport: &http.Transport{
			Proxy:       nil,
			DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		},
	}
}

// gkeTokens are the access tokens the metadata server at host (the
// node's when "") gives the pod, kept until shortly before they expire,
// once it answered as w's identity (gkeIdentity.check).
func gkeTokens(ctx context.Context, w WebIdentity, host string) oauth2.TokenSource {
	m := &gkeIdentity{
		ctx: ctx, client: metadataClient(), expected: w.ServiceAccount,
		base: "http://" + cmp.Or(host, gkeMetadataHost) + "/computeMetadata/v1/instance/service-accounts/default/",
	}
	return oauth2.ReuseTokenSourceWithExpiry(nil, m, webIdentityExpiryWindow)
}

// gkeIdentity is the metadata server's default service account, as the
// pod's fetch sees it.
type gkeIdentity struct {
	ctx    context.Context
	client *http.Client
	base   string
	// expected is the Google service account the pods' service account
	// is annotated with; "" for none, when the server must answer as the
	// account's principal, which is no service account.
	expected string

	mu      sync.Mutex
	checked bool
}

func (m *gkeIdentity) Token() (*oauth2.Token, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	body, err := m.get("token")
	if err != nil {
		return nil, err
	}
	var t struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		TokenType   string `json:"token_type"`
	}
	if json.Unmarshal(body, &t) != nil || t.AccessToken == "" {
		return nil, transientf(servingv1alpha1.ReasonFetchFailed, "GKE's metadata server at %s gave no access token: %.100q", m.host(), body)
	}
	return &oauth2.Token{AccessToken: t.AccessToken, TokenType: cmp.Or(t.TokenType, "Bearer"), Expiry: time.Now().Add(time.Duration(t.ExpiresIn) * time.Second)}, nil
}

// check asks the server, once, who it gives tokens of, and refuses any
// other identity than the pod's: a node pool whose metadata server is the
// Compute Engine one answers with the node's service account, which would
// read the model with whatever the node may read.
func (m *gkeIdentity) check() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.checked {
		return nil
	}
	body, err := m.get("email")
	if err != nil {
		return err
	}
	email := strings.TrimSpace(string(body))
	switch {
	case m.expected != "" && email != m.expected:
		return permanentf(servingv1alpha1.ReasonAccessDenied,
			"GKE's metadata server at %s answers for the fetch pod as %s, not as %s, the Google service account its service account is annotated with (iam.gke.io/gcp-service-account): the node pool must run the GKE metadata server (Workload Identity Federation for GKE, workload metadata GKE_METADATA)", m.host(), email, m.expected)
	case m.expected == "" && strings.Contains(email, "@"):
		return permanentf(servingv1alpha1.ReasonAccessDenied,
			"GKE's metadata server at %s answers for the fetch pod as the Google service account %s, not as the pod's service account (<project>.svc.id.goog), which is annotated with none: the node pool must run the GKE metadata server (Workload Identity Federation for GKE, workload metadata GKE_METADATA); the fetch does not read a model as the node", m.host(), email)
	}
	m.checked = true
	return nil
}

// get reads what of the default service account from the server: a
// refusal is the cluster's setup, which another attempt does not change;
// a server not yet answering (GKE's takes a few seconds to know a new
// pod) or busy is the fetch's retries' to take.
func (m *gkeIdentity) get(what string) ([]byte, error) {
	req, err := http.NewRequestWithContext(m.ctx, http.MethodGet, m.base+what, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Metadata-Flavor", "Google")
	resp, err := m.client.Do(req)
	if err != nil {
		if m.ctx.Err() != nil {
			return nil, m.ctx.Err()
		}
		return nil, &Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: fmt.Sprintf("asking GKE's metadata server at %s for the pod's %s: %v", m.host(), what, unwrapURLError(err)), Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, &Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: fmt.Sprintf("reading GKE's metadata server's answer: %v", err), Err: err}
	}
	detail := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if text := strings.TrimSpace(firstLineOf(string(body))); text != "" {
		detail += ": " + fmt.Sprintf("%.300s", text)
	}
	switch {
	case resp.Header.Get("Metadata-Flavor") != "Google":
		return nil, permanentf(servingv1alpha1.ReasonFetchFailed, "%s answered (%s) without the header Metadata-Flavor: Google: it is not a GKE metadata server", m.host(), detail)
	case resp.StatusCode == http.StatusOK:
		return body, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return nil, transientf(servingv1alpha1.ReasonFetchFailed, "GKE's metadata server at %s gave no %s: %s", m.host(), what, detail)
	}
	return nil, permanentf(servingv1alpha1.ReasonAccessDenied,
		"GKE's metadata server at %s refused the fetch pod its service account's %s: %s; the cluster needs Workload Identity Federation for GKE, and a Google service account the pods' service account is annotated with must let it impersonate it (roles/iam.workloadIdentityUser for <project>.svc.id.goog[<namespace>/<service account>])", m.host(), what, detail)
}

// host is the server's address, as messages name it.
func (m *gkeIdentity) host() string {
	h, _, _ := strings.Cut(strings.TrimPrefix(m.base, "http://"), "/")
	return h
}

// unwrapURLError is err without the method and URL a client's error
// quotes, which the message names already.
func unwrapURLError(err error) error {
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return err
}
