package fetch

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// fakeGCS is fake-gcs-server behind a handler that, when a token is
// required, refuses requests without it, as GCS refuses a private
// bucket's anonymous readers.
type fakeGCS struct {
	*httptest.Server
	store         *fakestorage.Server
	requiredToken string
	requests      atomic.Int32
}

func newFakeGCS(t *testing.T) *fakeGCS {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// PublicHost: object downloads (the XML API) come to this address.
	store, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true, PublicHost: ln.Addr().String(), Writer: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeGCS{store: store}
	handler := store.HTTPHandler()
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		if f.requiredToken != "" && r.Header.Get("Authorization") != "Bearer "+f.requiredToken {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":401,"message":"Anonymous caller does not have storage.objects.list access"}}`)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	f.Listener = ln
	f.Config.ErrorLog = log.New(io.Discard, "", 0)
	f.Start()
	t.Cleanup(func() { f.Close(); store.Stop() })
	return f
}

func (f *fakeGCS) put(prefix string, files map[string][]byte) {
	for name, data := range files {
		f.store.CreateObject(fakestorage.Object{
			ObjectAttrs: fakestorage.ObjectAttrs{BucketName: testBucket, Name: prefix + "/" + name},
			Content:     data,
		})
	}
}

// tokenServer plays Google's OAuth token endpoint: it grants token to
// the JWT assertions of clientEmail, and refuses others.
func tokenServer(t *testing.T, clientEmail, token string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		parts := strings.Split(r.Form.Get("assertion"), ".")
		var claims struct {
			Iss string `json:"iss"`
		}
		if len(parts) == 3 {
			if b, err := jwtPart(parts[1]); err == nil {
				_ = json.Unmarshal(b, &claims)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if claims.Iss != clientEmail {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
			return
		}
		_, _ = io.WriteString(w, `{"access_token":"`+token+`","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// serviceAccountKey is a service account JSON key whose tokens come from
// tokenURI.
func serviceAccountKey(t *testing.T, email, tokenURI string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{
		"type":           "service_account",
		"project_id":     "test",
		"private_key_id": "0123456789abcdef0123456789abcdef01234567",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   email,
		"client_id":      "1",
		"token_uri":      tokenURI,
	})
	return string(b)
}

func TestFetchingFromAPublicGCSBucket(t *testing.T) {
	gcs := newFakeGCS(t)
	files := model(1, 3)
	gcs.put("resnet", files)
	gcs.put("resnet-other", model(4))
	o, _ := testOptions(t, "gs://models/resnet", secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL}))
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if !reflect.DeepEqual(sum.Versions, []int64{1, 3}) {
		t.Errorf("versions %v; want [1 3]", sum.Versions)
	}
}

func TestFetchingFromGCSWithAServiceAccount(t *testing.T) {
	gcs := newFakeGCS(t)
	gcs.requiredToken = "token-for-fetcher"
	files := model(2)
	gcs.put("private/m", files)
	const email = "fetcher@test.iam.gserviceaccount.com"
	tokens := tokenServer(t, email, gcs.requiredToken)

	t.Run("a granted key", func(t *testing.T) {
		creds := secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL, KeyGCSServiceAccount: serviceAccountKey(t, email, tokens.URL)})
		o, _ := testOptions(t, "gs://models/private/m", creds)
		if _, err := Run(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		assertTree(t, o.Dest, files)
	})
	t.Run("a refused key", func(t *testing.T) {
		key := serviceAccountKey(t, "stranger@test.iam.gserviceaccount.com", tokens.URL)
		creds := secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL, KeyGCSServiceAccount: key})
		o, logs := testOptions(t, "gs://models/private/m", creds)
		_, err := Run(context.Background(), o)
		wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
		var parsed map[string]string
		_ = json.Unmarshal([]byte(key), &parsed)
		line := strings.Split(strings.TrimSpace(parsed["private_key"]), "\n")[3]
		if strings.Contains(TerminationMessage(Summary{}, err), line) || strings.Contains(logs.String(), line) {
			t.Error("the private key shows in the message or the logs")
		}
		assertNothingPublished(t, o.Dest)
	})
	t.Run("no key", func(t *testing.T) {
		o, _ := testOptions(t, "gs://models/private/m", secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL}))
		_, err := Run(context.Background(), o)
		wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
	})
}

func TestMissingGCSModelIsNotFound(t *testing.T) {
	gcs := newFakeGCS(t)
	gcs.put("resnet", model(1))
	creds := secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL})
	for _, uri := range []string{"gs://models/absent", "gs://no-such-bucket/resnet"} {
		t.Run(uri, func(t *testing.T) {
			o, _ := testOptions(t, uri, creds)
			_, err := Run(context.Background(), o)
			wantFailure(t, err, servingv1alpha1.ReasonNotFound, ExitPermanent)
			assertNothingPublished(t, o.Dest)
		})
	}
}

func jwtPart(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(s)
}
