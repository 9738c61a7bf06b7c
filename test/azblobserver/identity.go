package azblobserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// TokenRequest is a client-credentials token request as Entra ID received
// it: a secret or a client assertion (a federated token, such as a
// Kubernetes service account's under Azure Workload Identity) for a scope.
type TokenRequest struct {
	Tenant, ClientID string
	// Scope is as sent, space-separated: MSAL adds "openid offline_access
	// profile" to the one asked for.
	Scope           string
	ClientSecret    string
	ClientAssertion string
}

// Token is what an accepted request gets.
type Token struct {
	AccessToken string
	// ExpiresIn is the token's lifetime; zero means an hour. MSAL does not
	// reuse a token that expires within five minutes.
	ExpiresIn time.Duration
}

// Refusal is an Entra ID error: its HTTP status, OAuth error code
// (invalid_client, unauthorized_client, invalid_request, ...) and a
// description that starts with the AADSTS code, as in "AADSTS7000215:
// Invalid client secret provided.".
type Refusal struct {
	Status            int
	Code, Description string
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Description }

// Identity is a stand-in for Entra ID's token endpoint. It is always https:
// azidentity refuses any other authority host.
type Identity struct {
	// URL is the authority host, for cloud.Configuration's
	// ActiveDirectoryAuthorityHost.
	URL string
	// CAPEM is the certificate of the CA that signed the server's.
	CAPEM []byte

	srv *http.Server

	mu       sync.Mutex
	issue    func(TokenRequest) (Token, error)
	requests []TokenRequest
}

// StartIdentity serves on addr (host:0 for a free port) until Close,
// answering token requests with what issue decides: a Token, or a
// *Refusal (any other error is a server error).
func StartIdentity(addr string, issue func(TokenRequest) (Token, error)) (*Identity, error) {
	l, caPEM, err := listen(addr, true)
	if err != nil {
		return nil, fmt.Errorf("start identity service: %w", err)
	}
	i := &Identity{URL: "https://" + l.Addr().String() + "/", CAPEM: caPEM, issue: issue}
	i.srv = &http.Server{Handler: http.HandlerFunc(i.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = i.srv.Serve(l) }()
	return i, nil
}

// Close stops the server.
func (i *Identity) Close() { _ = i.srv.Close() }

// Decide has issue decide the requests from now on.
func (i *Identity) Decide(issue func(TokenRequest) (Token, error)) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.issue = issue
}

// Requests are the token requests received so far, in order.
func (i *Identity) Requests() []TokenRequest {
	i.mu.Lock()
	defer i.mu.Unlock()
	return slices.Clone(i.requests)
}

// serve answers what MSAL asks of an authority whose instance discovery is
// off: the tenant's OpenID configuration, for the token endpoint, then the
// token endpoint itself.
func (i *Identity) serve(w http.ResponseWriter, r *http.Request) {
	tenant, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && rest == "v2.0/.well-known/openid-configuration":
		base := strings.TrimSuffix(i.URL, "/") + "/" + tenant
		writeJSON(w, http.StatusOK, map[string]any{
			"token_endpoint":                        base + "/oauth2/v2.0/token",
			"authorization_endpoint":                base + "/oauth2/v2.0/authorize",
			"issuer":                                base + "/v2.0",
			"token_endpoint_auth_methods_supported": []string{"client_secret_post", "private_key_jwt", "client_secret_basic"},
			"response_types_supported":              []string{"code", "id_token", "code id_token", "id_token token"},
		})
	case r.Method == http.MethodPost && rest == "oauth2/v2.0/token":
		i.token(w, r, tenant)
	default:
		http.NotFound(w, r)
	}
}

const assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

func (i *Identity) token(w http.ResponseWriter, r *http.Request, tenant string) {
	if err := r.ParseForm(); err != nil {
		refuse(w, &Refusal{http.StatusBadRequest, "invalid_request", "AADSTS900144: The request body must contain the following parameter: 'grant_type'."})
		return
	}
	f := r.PostForm
	req := TokenRequest{Tenant: tenant, ClientID: f.Get("client_id"), Scope: f.Get("scope"),
		ClientSecret: f.Get("client_secret"), ClientAssertion: f.Get("client_assertion")}
	// The checks Entra makes of the form itself, before the client counts.
	var bad *Refusal
	switch {
	case f.Get("grant_type") != "client_credentials":
		bad = &Refusal{http.StatusBadRequest, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported grant type '" + f.Get("grant_type") + "'."}
	case req.ClientAssertion != "" && f.Get("client_assertion_type") != assertionType:
		bad = &Refusal{http.StatusBadRequest, "invalid_request", "AADSTS90014: The required field 'client_assertion_type' is missing from the credential."}
	case req.ClientSecret == "" && req.ClientAssertion == "":
		bad = &Refusal{http.StatusUnauthorized, "invalid_client", "AADSTS7000218: The request body must contain the following parameter: 'client_assertion' or 'client_secret'."}
	}
	i.mu.Lock()
	i.requests = append(i.requests, req)
	issue := i.issue
	i.mu.Unlock()
	if bad != nil {
		refuse(w, bad)
		return
	}
	t, err := issue(req)
	if err != nil {
		rf, ok := err.(*Refusal)
		if !ok {
			rf = &Refusal{http.StatusInternalServerError, "server_error", "AADSTS90033: A transient error has occurred: " + err.Error()}
		}
		refuse(w, rf)
		return
	}
	lifetime := int(t.ExpiresIn.Seconds())
	if t.ExpiresIn == 0 {
		lifetime = 3599
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"token_type": "Bearer", "expires_in": lifetime, "ext_expires_in": lifetime, "access_token": t.AccessToken,
	})
}

var aadsts = regexp.MustCompile(`^AADSTS(\d+)`)

// refuse writes r as Entra's JSON error, the numeric code also in
// error_codes and the description followed by the trace, correlation and
// time lines Entra appends.
func refuse(w http.ResponseWriter, r *Refusal) {
	status := r.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	now := time.Now().UTC()
	trace, correlation := newID(), newID()
	codes := []int{}
	if m := aadsts.FindStringSubmatch(r.Description); m != nil {
		n, _ := strconv.Atoi(m[1])
		codes = append(codes, n)
	}
	writeJSON(w, status, map[string]any{
		"error": r.Code,
		"error_description": r.Description + "\r\nTrace ID: " + trace + "\r\nCorrelation ID: " + correlation +
			"\r\nTimestamp: " + now.Format("2006-01-02 15:04:05Z"),
		"error_codes":    codes,
		"timestamp":      now.Format("2006-01-02 15:04:05Z"),
		"trace_id":       trace,
		"correlation_id": correlation,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store, no-cache")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// serveTLS wraps l in TLS with a certificate for localhost, the loopback
// addresses and l's own, signed by a CA made for it alone: a client trusts
// this server and nothing else by adding the CA's PEM to its roots.
func serveTLS(l net.Listener) (net.Listener, []byte, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "azblobserver test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create CA certificate: %w", err)
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate server key: %w", err)
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if a, ok := l.Addr().(*net.TCPAddr); ok && !a.IP.IsUnspecified() {
		ips = append(ips, a.IP)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: ips,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create server certificate: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), caPEM, nil
}
