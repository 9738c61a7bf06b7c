package fetch

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

const (
	testProvider       = "projects/123456789012/locations/global/workloadIdentityPools/clusters/providers/ml-cluster"
	testServiceAccount = "model-reader@ml.iam.gserviceaccount.com"
)

// googleFederation plays Google's STS token exchange and IAM credentials
// impersonation: it federates tokens of the pod's file for testProvider,
// and lets the federated identity impersonate testServiceAccount.
type googleFederation struct {
	*httptest.Server
	mu        sync.Mutex
	exchanges []map[string]string // the STS forms received
	// refuse, when set, is STS's answer instead of a token.
	refuse string
}

func newGoogleFederation(t *testing.T, subjectToken string) *googleFederation {
	t.Helper()
	g := &googleFederation{}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/token":
			_ = r.ParseForm()
			form := map[string]string{}
			for k := range r.PostForm {
				form[k] = r.PostForm.Get(k)
			}
			g.mu.Lock()
			g.exchanges = append(g.exchanges, form)
			refuse := g.refuse
			g.mu.Unlock()
			if refuse != "" || form["audience"] != "//iam.googleapis.com/"+testProvider || form["subject_token"] != subjectToken {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"The audience in ID Token does not match the expected audience."}`)
				return
			}
			_, _ = io.WriteString(w, `{"access_token":"federated","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer","expires_in":3600}`)
		case r.URL.Path == "/v1/projects/-/serviceAccounts/"+testServiceAccount+":generateAccessToken" && r.Header.Get("Authorization") == "Bearer federated":
			_, _ = io.WriteString(w, `{"accessToken":"impersonated","expireTime":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`)
		default:
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":{"code":403,"message":"Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).","status":"PERMISSION_DENIED"}}`)
		}
	}))
	t.Cleanup(g.Close)
	return g
}

// TestAGCSModelIsFetchedThroughWorkloadIdentityFederation: with a gs://
// webIdentity, the pod's token is exchanged at Google's STS for the
// provider, the federated token impersonates the service account named,
// and the bucket is read with what that gives; without a service account,
// with the federated token itself.
func TestAGCSModelIsFetchedThroughWorkloadIdentityFederation(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("pod-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := model(1)
	for _, tc := range []struct {
		name, serviceAccount, bucketToken string
	}{
		{"impersonating a service account", testServiceAccount, "impersonated"},
		{"as the federated identity", "", "federated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gcs := newFakeGCS(t)
			gcs.requiredToken = tc.bucketToken
			gcs.put("private/m", files)
			google := newGoogleFederation(t, "pod-token")
			o, _ := testOptions(t, "gs://models/private/m", secretDir(t, map[string]string{
				KeyGCSEndpointURL: gcs.URL, KeyGCPSTSEndpointURL: google.URL, KeyGCPIAMEndpointURL: google.URL}))
			o.WebIdentity = WebIdentity{Provider: testProvider, ServiceAccount: tc.serviceAccount, TokenFile: token}
			if _, err := Run(context.Background(), o); err != nil {
				t.Fatal(err)
			}
			assertTree(t, o.Dest, files)
			google.mu.Lock()
			defer google.mu.Unlock()
			if len(google.exchanges) != 1 || google.exchanges[0]["subject_token_type"] != "urn:ietf:params:oauth:token-type:jwt" {
				t.Errorf("STS exchanges %v; want one, of a JWT", google.exchanges)
			}
		})
	}
}

// TestAFederationGoogleRefusesSaysWhy: a token the provider does not
// take, or a service account the identity may not impersonate, fails the
// fetch for good with Google's words and what to check; a key beside the
// federation is refused.
func TestAFederationGoogleRefusesSaysWhy(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("pod-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	gcs := newFakeGCS(t)
	gcs.requiredToken = "impersonated"
	gcs.put("private/m", model(1))
	google := newGoogleFederation(t, "pod-token")
	for _, tc := range []struct {
		name, provider, serviceAccount, refuse string
		extra                                  map[string]string
		message                                []string
	}{
		{name: "a provider that refuses the token", provider: testProvider, serviceAccount: testServiceAccount, refuse: "yes",
			message: []string{"Google refused the pod's service account token for provider " + testProvider, "HTTP 400: invalid_grant (The audience in ID Token does not match the expected audience.)", "roles/iam.workloadIdentityUser"}},
		{name: "a service account not granted", provider: testProvider, serviceAccount: "other@ml.iam.gserviceaccount.com",
			message: []string{"service account other@ml.iam.gserviceaccount.com", "HTTP 403: PERMISSION_DENIED (Permission 'iam.serviceAccounts.getAccessToken' denied"}},
		{name: "a key beside it", provider: testProvider, extra: map[string]string{KeyGCSServiceAccount: `{"type":"service_account"}`},
			message: []string{"must not hold service-account.json as well"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			google.mu.Lock()
			google.refuse = tc.refuse
			google.mu.Unlock()
			values := map[string]string{KeyGCSEndpointURL: gcs.URL, KeyGCPSTSEndpointURL: google.URL, KeyGCPIAMEndpointURL: google.URL}
			for k, v := range tc.extra {
				values[k] = v
			}
			o, _ := testOptions(t, "gs://models/private/m", secretDir(t, values))
			o.WebIdentity = WebIdentity{Provider: tc.provider, ServiceAccount: tc.serviceAccount, TokenFile: token}
			o.Retry.Attempts = 1
			_, err := Run(context.Background(), o)
			fe := wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
			for _, m := range tc.message {
				if !strings.Contains(fe.Message, m) {
					t.Errorf("message %q, want %q in it", fe.Message, m)
				}
			}
		})
	}
}

func TestGoogleErrorsAreSaidInTheirWords(t *testing.T) {
	for body, want := range map[string]string{
		`{"error":"invalid_grant","error_description":"Token expired."}`:                     "invalid_grant (Token expired.)",
		`{"error":"unauthorized_client"}`:                                                    "unauthorized_client",
		`{"error":{"code":403,"message":"Permission denied.","status":"PERMISSION_DENIED"}}`: "PERMISSION_DENIED (Permission denied.)",
		"<html>Bad gateway</html>\nmore":                                                     "<html>Bad gateway</html>",
	} {
		if got := googleError(body); got != want {
			t.Errorf("googleError(%q) = %q, want %q", body, got, want)
		}
	}
}
