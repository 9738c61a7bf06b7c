package fetch

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/test/gkemetadata"
)

// workloadPool is what GKE's metadata server answers as for a pod whose
// service account is annotated with no Google service account.
const workloadPool = "ml.svc.id.goog"

// metadataServer starts the stand-in, answering every caller as id.
func metadataServer(t *testing.T, id gkemetadata.Identity) *gkemetadata.Server {
	t.Helper()
	s, err := gkemetadata.Start("127.0.0.1:0", func(string) (gkemetadata.Identity, error) { return id, nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestAGCSModelIsReadAsGKEsMetadataServerIdentifiesThePod: with
// gkeWorkloadIdentity, the bucket is read with the metadata server's
// token, once it answered as the pod's principal (no service account
// annotated) or as the annotated Google service account; the identity is
// asked once, the token again when it is about to expire.
func TestAGCSModelIsReadAsGKEsMetadataServerIdentifiesThePod(t *testing.T) {
	files := model(1, 2)
	for _, tc := range []struct {
		name, email, annotated string
	}{
		{"as the service account's principal", workloadPool, ""},
		{"as the annotated Google service account", testServiceAccount, testServiceAccount},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gcs := newFakeGCS(t)
			gcs.requiredToken = "gke-token"
			gcs.put("private/m", files)
			// A token that expires within the renewal window is renewed
			// at each request.
			md := metadataServer(t, gkemetadata.Identity{Email: tc.email, Token: "gke-token", ExpiresIn: 30 * time.Second})
			o, _ := testOptions(t, "gs://models/private/m", secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL, KeyGCEMetadataHost: md.Host}))
			o.WebIdentity = WebIdentity{GKEWorkloadIdentity: true, ServiceAccount: tc.annotated}
			if _, err := Run(context.Background(), o); err != nil {
				t.Fatal(err)
			}
			assertTree(t, o.Dest, files)
			emails, tokens := 0, 0
			for _, r := range md.Requests() {
				switch r.What {
				case "email":
					emails++
				case "token":
					tokens++
				}
			}
			if emails != 1 || tokens < 2 {
				t.Errorf("%d identity and %d token requests; want 1, and a token renewed (2 or more)", emails, tokens)
			}
		})
	}
}

// TestAFetchDoesNotReadAModelAsAnotherIdentity: a metadata server that
// answers as the node's service account (a node pool without GKE's
// metadata server), or as another account than the annotated one, fails
// the fetch for good before anything is asked of the bucket; a refusal is
// said in the server's words; a server without GKE's header is not one.
func TestAFetchDoesNotReadAModelAsAnotherIdentity(t *testing.T) {
	const node = "123456789012-compute@developer.gserviceaccount.com"
	for _, tc := range []struct {
		name, annotated string
		id              gkemetadata.Identity
		refusal         *gkemetadata.Refusal
		plain           bool // a server that is not a metadata server
		reason          string
		message         []string
	}{
		{name: "the node's identity", id: gkemetadata.Identity{Email: node, Token: "node-token"}, reason: servingv1alpha1.ReasonAccessDenied,
			message: []string{"as the Google service account " + node, "GKE_METADATA", "does not read a model as the node"}},
		{name: "another account than the annotated one", annotated: testServiceAccount, id: gkemetadata.Identity{Email: node, Token: "node-token"},
			reason: servingv1alpha1.ReasonAccessDenied, message: []string{"as " + node + ", not as " + testServiceAccount, "iam.gke.io/gcp-service-account"}},
		{name: "a refusal", annotated: testServiceAccount, refusal: &gkemetadata.Refusal{Status: http.StatusForbidden, Message: "Unable to generate access token; IAM returned 403 Forbidden: Permission 'iam.serviceAccounts.getAccessToken' denied"},
			reason: servingv1alpha1.ReasonAccessDenied, message: []string{"HTTP 403: Unable to generate access token", "roles/iam.workloadIdentityUser"}},
		{name: "not a metadata server", plain: true, reason: servingv1alpha1.ReasonFetchFailed, message: []string{"without the header Metadata-Flavor: Google"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gcs := newFakeGCS(t)
			gcs.put("private/m", model(1))
			host := ""
			if tc.plain {
				host = strings.TrimPrefix(gcs.URL, "http://")
			} else {
				md := metadataServer(t, tc.id)
				if tc.refusal != nil {
					md.Decide(func(string) (gkemetadata.Identity, error) { return gkemetadata.Identity{}, tc.refusal })
				}
				host = md.Host
			}
			o, _ := testOptions(t, "gs://models/private/m", secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL, KeyGCEMetadataHost: host}))
			o.WebIdentity = WebIdentity{GKEWorkloadIdentity: true, ServiceAccount: tc.annotated}
			before := gcs.requests.Load()
			_, err := Run(context.Background(), o)
			fe := wantFailure(t, err, tc.reason, ExitPermanent)
			for _, m := range tc.message {
				if !strings.Contains(fe.Message, m) {
					t.Errorf("message %q, want %q in it", fe.Message, m)
				}
			}
			if read := gcs.requests.Load() - before; !tc.plain && read != 0 {
				t.Errorf("%d requests reached the bucket; want none", read)
			}
		})
	}
}

// TestAMetadataServerNotYetAnsweringIsWaitedFor: GKE's server takes a few
// seconds to know a new pod; until it does, the fetch retries.
func TestAMetadataServerNotYetAnsweringIsWaitedFor(t *testing.T) {
	gcs := newFakeGCS(t)
	gcs.requiredToken = "gke-token"
	gcs.put("private/m", model(1))
	var calls atomic.Int32
	md := metadataServer(t, gkemetadata.Identity{})
	md.Decide(func(string) (gkemetadata.Identity, error) {
		if calls.Add(1) <= 2 {
			return gkemetadata.Identity{}, &gkemetadata.Refusal{Status: http.StatusServiceUnavailable, Message: "pod not yet known"}
		}
		return gkemetadata.Identity{Email: workloadPool, Token: "gke-token", ExpiresIn: time.Hour}, nil
	})
	o, _ := testOptions(t, "gs://models/private/m", secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL, KeyGCEMetadataHost: md.Host}))
	o.WebIdentity = WebIdentity{GKEWorkloadIdentity: true}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, model(1))
	if n := calls.Load(); n < 4 {
		t.Errorf("%d calls to the metadata server; want 2 refused, then the identity and a token", n)
	}
}

// TestAnArtifactRegistryModelIsPulledWithGKEsToken: with
// gkeWorkloadIdentity, an oci:// model in Google's registry is pulled as
// user oauth2accesstoken with the metadata server's token; a refusal says
// what the identity needs. Any other registry is never given the token.
func TestAnArtifactRegistryModelIsPulledWithGKEsToken(t *testing.T) {
	reg := newTestRegistry(t, "oauth2accesstoken:gke-token")
	uri := reg.push(t, "models/resnet:v1", imageOf(t, entries(prefixed("models/", model(1)))))
	md := metadataServer(t, gkemetadata.Identity{Email: workloadPool, Token: "gke-token", ExpiresIn: time.Hour})
	pull := func() (Options, error) {
		o, _ := testOptions(t, uri, secretDir(t, map[string]string{KeyGCEMetadataHost: md.Host}))
		o.WebIdentity = WebIdentity{GKEWorkloadIdentity: true}
		o.Retry.Attempts = 1
		_, err := Run(context.Background(), o)
		return o, err
	}

	// Not Google's: the registry's challenge gets no token.
	_, err := pull()
	fe := wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
	if n := len(md.Requests()); n != 0 {
		t.Errorf("the metadata server was asked %d times for a registry not Google's; want never", n)
	}
	if !strings.Contains(fe.Message, "no credentials for "+reg.host+" were given") {
		t.Errorf("message %q; want no credentials said", fe.Message)
	}

	was := googleRegistry
	googleRegistry = func(host string) bool { return host == reg.host }
	t.Cleanup(func() { googleRegistry = was })
	o, err := pull()
	if err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, model(1))

	md.Decide(func(string) (gkemetadata.Identity, error) {
		return gkemetadata.Identity{Email: workloadPool, Token: "another-token", ExpiresIn: time.Hour}, nil
	})
	_, err = pull()
	fe = wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
	if !strings.Contains(fe.Message, "refused the token of GKE's metadata server") || !strings.Contains(fe.Message, "roles/artifactregistry.reader") {
		t.Errorf("message %q; want the token refused, and the role it needs", fe.Message)
	}
}
