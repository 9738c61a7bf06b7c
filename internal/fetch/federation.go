package fetch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google/externalaccount"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// A gs:// model's webIdentity is Google Cloud's Workload Identity
// Federation: the pod's service account token is exchanged at Google's STS
// for a federated access token, which impersonates a Google service
// account if one is named, or reads the bucket itself.

// Keys of the credentials Secret for other endpoints than Google's own
// (Private Service Connect).
const (
	KeyGCPSTSEndpointURL = "GCP_STS_ENDPOINT_URL"
	KeyGCPIAMEndpointURL = "GCP_IAM_CREDENTIALS_ENDPOINT_URL"
)

// federatedTokens exchanges w's token for access tokens to read Cloud
// Storage with, through transport.
func federatedTokens(ctx context.Context, w WebIdentity, creds Credentials, transport http.RoundTripper) (oauth2.TokenSource, error) {
	conf := externalaccount.Config{
		Audience:             "//iam.googleapis.com/" + w.Provider,
		SubjectTokenType:     "urn:ietf:params:oauth:token-type:jwt",
		TokenURL:             googleEndpoint(creds.Get(KeyGCPSTSEndpointURL), "https://sts.googleapis.com", "/v1/token"),
		Scopes:               []string{gcsReadOnlyScope},
		SubjectTokenSupplier: tokenFile(w.TokenFile),
	}
	if w.ServiceAccount != "" {
		conf.ServiceAccountImpersonationURL = googleEndpoint(creds.Get(KeyGCPIAMEndpointURL), "https://iamcredentials.googleapis.com",
			"/v1/projects/-/serviceAccounts/"+w.ServiceAccount+":generateAccessToken")
	}
	tokenCtx := context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Transport: transport})
	ts, err := externalaccount.NewTokenSource(tokenCtx, conf)
	if err != nil {
		return nil, permanentf(servingv1alpha1.ReasonAccessDenied, "spec.model.webIdentity: %v", err)
	}
	return oauth2.ReuseTokenSource(nil, federatedToken{ts, w}), nil
}

// googleEndpoint is path at base, or at Google's own API, google, where
// the Secret names no base.
func googleEndpoint(base, google, path string) string {
	return strings.TrimSuffix(cmp.Or(base, google), "/") + path
}

// SubjectToken gives the projected token to Google's STS, read again at
// each exchange: the kubelet renews it.
func (f tokenFile) SubjectToken(context.Context, externalaccount.SupplierOptions) (string, error) {
	return f.token()
}

// federatedToken says why a token was not given, in the fetch's terms:
// what Google refused is the provider's or the service account's setup,
// which a retry does not change.
type federatedToken struct {
	oauth2.TokenSource
	w WebIdentity
}

var googleStatus = regexp.MustCompile(`status code (\d+): (.*)$`)

func (f federatedToken) Token() (*oauth2.Token, error) {
	t, err := f.TokenSource.Token()
	if err == nil {
		return t, nil
	}
	var fe *Error
	if errors.As(err, &fe) {
		return nil, fe
	}
	m := googleStatus.FindStringSubmatch(err.Error())
	if m == nil {
		return nil, err // a network error: the fetch's retries take it
	}
	code, _ := strconv.Atoi(m[1])
	detail := googleError(m[2])
	what := "provider " + f.w.Provider
	if f.w.ServiceAccount != "" {
		what += " and service account " + f.w.ServiceAccount
	}
	if code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout {
		return nil, &Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: fmt.Sprintf("exchanging the pod's token with %s: HTTP %d: %s", what, code, detail), Err: err}
	}
	return nil, permanentf(servingv1alpha1.ReasonAccessDenied,
		"Google refused the pod's service account token for %s: HTTP %d: %s; the provider must trust this cluster's service account issuer and the token's audience, a service account named must let the federated identity impersonate it (roles/iam.workloadIdentityUser), and the bucket let whoever reads it read it", what, code, detail)
}

// googleError is the words of an error body of Google's STS or IAM
// credentials API: {"error": "invalid_grant", "error_description": "..."}
// or {"error": {"message": "...", "status": "PERMISSION_DENIED"}}.
func googleError(body string) string {
	var sts struct {
		Error       json.RawMessage `json:"error"`
		Description string          `json:"error_description"`
	}
	if json.Unmarshal([]byte(body), &sts) != nil {
		return firstLineOf(body)
	}
	var code string
	if json.Unmarshal(sts.Error, &code) == nil {
		if sts.Description != "" {
			return code + " (" + sts.Description + ")"
		}
		return code
	}
	var api struct {
		Message string `json:"message"`
		Status  string `json:"status"`
	}
	if json.Unmarshal(sts.Error, &api) == nil && api.Message != "" {
		return api.Status + " (" + api.Message + ")"
	}
	return firstLineOf(body)
}
