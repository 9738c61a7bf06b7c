package fetch

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
	"github.com/modelserver-dev/modelserver-operator/test/azblobserver"
)

// The account the stand-in serves, and a model's URI in it; the Secret's
// AZURE_STORAGE_BLOB_ENDPOINT points the fetch at the stand-in.
const (
	azureAccount = "modelstore"
	azureModels  = "https://" + azureAccount + ".blob.core.windows.net/models"
)

func startAzure(t *testing.T, useTLS bool) *azblobserver.Server {
	t.Helper()
	return azblobserver.Serve(t, "127.0.0.1:0", azureAccount, useTLS)
}

func putAzure(srv *azblobserver.Server, prefix string, files map[string][]byte) {
	for name, data := range files {
		srv.Put("models", prefix+"/"+name, data)
	}
}

// azureKeys are a Secret's keys that read srv with its account key.
func azureKeys(srv *azblobserver.Server) map[string]string {
	return map[string]string{KeyAzureBlobEndpoint: srv.URL, KeyAzureAccessKey: srv.Key + "\n"}
}

// throughHook puts a proxy before srv that shows seen every request: a
// Shared Key signature does not cover the host, so the store accepts what
// the proxy forwards.
func throughHook(t *testing.T, srv *azblobserver.Server, seen func(*http.Request)) string {
	t.Helper()
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen(r)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(hook.Close)
	return hook.URL + target.Path
}

func TestFetchingFromAzureWithTheAccountKey(t *testing.T) {
	srv := startAzure(t, false)
	files := model(1, 3)
	putAzure(srv, "resnet", files)
	putAzure(srv, "resnet-other", model(4))
	o, logs := testOptions(t, azureModels+"/resnet/", secretDir(t, azureKeys(srv)))
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, files)
	if !reflect.DeepEqual(sum.Versions, []int64{1, 3}) {
		t.Errorf("versions %v; want [1 3]", sum.Versions)
	}
	for _, r := range srv.Requests() {
		if r.Auth != "SharedKey" {
			t.Errorf("%s %s/%s authenticated by %s; want SharedKey", r.Method, r.Container, r.Blob, r.Auth)
		}
	}

	t.Run("a wrong key", func(t *testing.T) {
		keys := azureKeys(srv)
		wrong := "d3JvbmcgYWNjb3VudCBrZXkgb2YgdGhpcnR5IHR3byBieXRlcw=="
		keys[KeyAzureAccessKey] = wrong
		o, logs := testOptions(t, azureModels+"/resnet", secretDir(t, keys))
		_, err := Run(context.Background(), o)
		fe := wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
		if !strings.Contains(fe.Message, azureModels+"/resnet/: access denied: AuthenticationFailed") {
			t.Errorf("message %q does not name the container and Azure's code", fe.Message)
		}
		if strings.Contains(TerminationMessage(Summary{}, err), wrong) || strings.Contains(logs.String(), wrong) {
			t.Error("the key shows in the message or the logs")
		}
		assertNothingPublished(t, o.Dest)
	})
	t.Run("a key that is not base64", func(t *testing.T) {
		keys := azureKeys(srv)
		keys[KeyAzureAccessKey] = "not a key!"
		o, _ := testOptions(t, azureModels+"/resnet", secretDir(t, keys))
		_, err := Run(context.Background(), o)
		fe := wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
		if !strings.Contains(fe.Message, "credentials key AZURE_STORAGE_ACCESS_KEY is not an account key (base64)") {
			t.Errorf("message %q", fe.Message)
		}
	})
}

func TestFetchingFromAzureWithASharedAccessSignature(t *testing.T) {
	srv := startAzure(t, false)
	files := model(2)
	putAzure(srv, "m", files)
	sas := azblobserver.NewSAS(time.Now().Add(time.Hour))
	srv.AllowSAS(sas)
	expired := azblobserver.NewSAS(time.Now().Add(-time.Hour))
	srv.AllowSAS(expired)
	withSAS := func(token string) map[string]string {
		return map[string]string{KeyAzureBlobEndpoint: srv.URL, KeyAzureSASToken: token}
	}

	for name, c := range map[string]struct {
		uri  string
		keys map[string]string
	}{
		"in the Secret":               {azureModels + "/m", withSAS(sas)},
		"in the Secret, with its '?'": {azureModels + "/m", withSAS("?" + sas + "\n")},
	} {
		t.Run(name, func(t *testing.T) {
			o, logs := testOptions(t, c.uri, secretDir(t, c.keys))
			if _, err := Run(context.Background(), o); err != nil {
				t.Fatalf("%v\n%s", err, logs)
			}
			assertTree(t, o.Dest, files)
			sig, _ := url.ParseQuery(sas)
			if strings.Contains(logs.String(), sig.Get("sig")) {
				t.Error("the signature shows in the logs")
			}
		})
	}
	t.Run("to a store that is down", func(t *testing.T) {
		// The signature is re-encoded in the request's URL, which an
		// error of the transport quotes.
		signed := "sv=2024-08-04&sp=rl&se=2030-01-01T00:00:00Z&sig=c2lnbmF0dXJlK29mK3RoZStTQVM%3D"
		o, logs := testOptions(t, azureModels+"/m", secretDir(t, map[string]string{KeyAzureBlobEndpoint: "http://127.0.0.1:1/acct", KeyAzureSASToken: signed}))
		o.Retry.Attempts = 1
		_, err := Run(context.Background(), o)
		msg := TerminationMessage(Summary{}, err)
		for _, form := range []string{"c2lnbmF0dXJlK29mK3RoZStTQVM", "c2lnbmF0dXJlK29mK3RoZStTQVM="} {
			if strings.Contains(msg, form) || strings.Contains(logs.String(), form) {
				t.Errorf("the signature shows: %s\n%s", msg, logs)
			}
		}
	})
	t.Run("expired", func(t *testing.T) {
		o, _ := testOptions(t, azureModels+"/m", secretDir(t, withSAS(expired)))
		_, err := Run(context.Background(), o)
		wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
	})
	t.Run("and a key", func(t *testing.T) {
		keys := azureKeys(srv)
		before := len(srv.Requests())
		keys[KeyAzureSASToken] = sas
		o, _ := testOptions(t, azureModels+"/m", secretDir(t, keys))
		_, err := Run(context.Background(), o)
		fe := wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
		if !strings.Contains(fe.Message, "the model is read with one identity, and it is given AZURE_STORAGE_ACCESS_KEY and AZURE_STORAGE_SAS_TOKEN") {
			t.Errorf("message %q", fe.Message)
		}
		if n := len(srv.Requests()) - before; n != 0 {
			t.Errorf("%d requests made with two identities; want none", n)
		}
	})
}

func TestFetchingFromAPublicAzureContainer(t *testing.T) {
	srv := startAzure(t, false)
	files := model(1)
	putAzure(srv, "m", files)
	endpoint := secretDir(t, map[string]string{KeyAzureBlobEndpoint: srv.URL})

	o, _ := testOptions(t, azureModels+"/m", endpoint)
	_, err := Run(context.Background(), o)
	fe := wantFailure(t, err, servingv1alpha1.ReasonNotFound, ExitPermanent)
	if !strings.Contains(fe.Message, "not found, or not public (ResourceNotFound)") {
		t.Errorf("a private container read anonymously: message %q", fe.Message)
	}

	srv.SetPublic("models", "container")
	o, _ = testOptions(t, azureModels+"/m", endpoint)
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
}

func TestAMissingAzureModelIsNotFound(t *testing.T) {
	srv := startAzure(t, false)
	putAzure(srv, "resnet", model(1))
	creds := secretDir(t, azureKeys(srv))
	for uri, want := range map[string]string{
		azureModels + "/absent": "no objects under " + azureModels + "/absent/",
		"https://" + azureAccount + ".blob.core.windows.net/no-such-container/resnet": "no-such-container/resnet/: the container does not exist",
	} {
		t.Run(uri, func(t *testing.T) {
			o, _ := testOptions(t, uri, creds)
			_, err := Run(context.Background(), o)
			fe := wantFailure(t, err, servingv1alpha1.ReasonNotFound, ExitPermanent)
			if !strings.Contains(fe.Message, want) {
				t.Errorf("message %q; want %q", fe.Message, want)
			}
			assertNothingPublished(t, o.Dest)
		})
	}
}

// TestFetchingFromAzureAsAServicePrincipal: the Secret's client secret
// signs in at Microsoft Entra ID (the stand-in, over TLS as Entra is),
// and the bearer token reads the container; what Entra or the store
// refuses says why.
func TestFetchingFromAzureAsAServicePrincipal(t *testing.T) {
	const (
		tenant   = "11111111-2222-3333-4444-555555555555"
		clientID = "00000000-1111-2222-3333-444444444444"
		secret   = "client-secret-of-the-model-reader"
	)
	srv := startAzure(t, true)
	files := model(1)
	putAzure(srv, "m", files)
	srv.AllowBearer("token-of-the-reader", true)
	srv.AllowBearer("token-of-a-stranger", false)
	issue := func(r azblobserver.TokenRequest) (azblobserver.Token, error) {
		switch {
		case r.Tenant != tenant || r.ClientID != clientID:
			return azblobserver.Token{}, &azblobserver.Refusal{Status: http.StatusBadRequest, Code: "unauthorized_client", Description: "AADSTS700016: Application not found in the directory."}
		case r.ClientSecret == secret:
			return azblobserver.Token{AccessToken: "token-of-the-reader"}, nil
		case r.ClientSecret == "secret-of-a-stranger":
			return azblobserver.Token{AccessToken: "token-of-a-stranger"}, nil
		}
		return azblobserver.Token{}, &azblobserver.Refusal{Status: http.StatusUnauthorized, Code: "invalid_client", Description: "AADSTS7000215: Invalid client secret provided."}
	}
	entra := azblobserver.ServeIdentity(t, "127.0.0.1:0", issue)
	keys := func(clientSecret string) map[string]string {
		return map[string]string{
			KeyAzureBlobEndpoint: srv.URL, KeyAzureAuthorityHost: entra.URL, KeyAzureCABundle: string(srv.CAPEM) + string(entra.CAPEM),
			KeyAzureTenantID: tenant, KeyAzureClientID: clientID, KeyAzureClientSecret: clientSecret,
		}
	}

	o, logs := testOptions(t, azureModels+"/m", secretDir(t, keys(secret)))
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, files)
	if got := entra.Requests(); len(got) != 1 || !strings.HasPrefix(got[0].Scope, "https://storage.azure.com/.default") {
		t.Errorf("token requests %+v; want one, for Azure Storage", got)
	}

	t.Run("a wrong secret", func(t *testing.T) {
		o, logs := testOptions(t, azureModels+"/m", secretDir(t, keys("a-wrong-client-secret")))
		_, err := Run(context.Background(), o)
		fe := wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
		if !strings.Contains(fe.Message, "Microsoft Entra ID refused service principal "+clientID+" of tenant "+tenant+": HTTP 401: invalid_client (AADSTS7000215: Invalid client secret provided.); check AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET") {
			t.Errorf("message %q does not give Entra's words", fe.Message)
		}
		if strings.Contains(TerminationMessage(Summary{}, err), "a-wrong-client-secret") || strings.Contains(logs.String(), "a-wrong-client-secret") {
			t.Error("the secret shows in the message or the logs")
		}
	})
	t.Run("Entra ID unavailable once", func(t *testing.T) {
		var calls atomic.Int32
		t.Cleanup(func() { entra.Decide(issue) })
		entra.Decide(func(r azblobserver.TokenRequest) (azblobserver.Token, error) {
			if calls.Add(1) == 1 {
				return azblobserver.Token{}, errors.New("the service is busy")
			}
			return azblobserver.Token{AccessToken: "token-of-the-reader"}, nil
		})
		o, logs := testOptions(t, azureModels+"/m", secretDir(t, keys(secret)))
		if _, err := Run(context.Background(), o); err != nil {
			t.Fatalf("%v\n%s", err, logs)
		}
		if !strings.Contains(logs.String(), "signing in at Microsoft Entra ID as service principal") {
			t.Errorf("the retried sign-in is not logged:\n%s", logs)
		}
	})
	t.Run("no role on the container", func(t *testing.T) {
		o, _ := testOptions(t, azureModels+"/m", secretDir(t, keys("secret-of-a-stranger")))
		_, err := Run(context.Background(), o)
		fe := wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
		if !strings.Contains(fe.Message, "access denied: AuthorizationPermissionMismatch (This request is not authorized to perform this operation using this permission.); the identity must be allowed to list and read blobs") {
			t.Errorf("message %q", fe.Message)
		}
	})
	t.Run("no tenant", func(t *testing.T) {
		k := keys(secret)
		delete(k, KeyAzureTenantID)
		o, _ := testOptions(t, azureModels+"/m", secretDir(t, k))
		_, err := Run(context.Background(), o)
		fe := wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
		if !strings.Contains(fe.Message, "credentials key AZURE_CLIENT_SECRET needs AZURE_TENANT_ID and AZURE_CLIENT_ID beside it") {
			t.Errorf("message %q", fe.Message)
		}
	})
	t.Run("a store over plain HTTP", func(t *testing.T) {
		plain := startAzure(t, false)
		k := keys(secret)
		k[KeyAzureBlobEndpoint] = plain.URL
		o, _ := testOptions(t, azureModels+"/m", secretDir(t, k))
		_, err := Run(context.Background(), o)
		fe := wantFailure(t, err, servingv1alpha1.ReasonInvalidURI, ExitPermanent)
		if !strings.Contains(fe.Message, "a bearer token is only sent over https") || len(plain.Requests()) != 0 {
			t.Errorf("message %q, %d requests; want none", fe.Message, len(plain.Requests()))
		}
	})
}

// TestFetchingFromAzureWithWorkloadIdentity: the projected token is the
// client assertion of the application's sign-in, read again from its file
// for each new access token.
func TestFetchingFromAzureWithWorkloadIdentity(t *testing.T) {
	const (
		tenant   = "contoso.onmicrosoft.com"
		clientID = "00000000-1111-2222-3333-444444444444"
	)
	srv := startAzure(t, true)
	files := model(1)
	putAzure(srv, "m", files)
	srv.AllowBearer("federated-token", true)
	tokenPath := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenPath, []byte("service-account-token-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	entra := azblobserver.ServeIdentity(t, "127.0.0.1:0", func(r azblobserver.TokenRequest) (azblobserver.Token, error) {
		if r.ClientAssertion == "service-account-token-1" && r.ClientID == clientID && r.Tenant == tenant && r.ClientSecret == "" {
			return azblobserver.Token{AccessToken: "federated-token"}, nil
		}
		return azblobserver.Token{}, &azblobserver.Refusal{Status: http.StatusBadRequest, Code: "invalid_client",
			Description: "AADSTS700213: No matching federated identity record found for presented assertion subject."}
	})
	creds := secretDir(t, map[string]string{KeyAzureBlobEndpoint: srv.URL, KeyAzureAuthorityHost: entra.URL, KeyAzureCABundle: string(srv.CAPEM) + string(entra.CAPEM)})
	o, logs := testOptions(t, azureModels+"/m", creds)
	o.WebIdentity = WebIdentity{ClientID: clientID, TenantID: tenant, TokenFile: tokenPath}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, files)

	if err := os.WriteFile(tokenPath, []byte("service-account-token-of-another-subject"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, _ = testOptions(t, azureModels+"/m", creds)
	o.WebIdentity = WebIdentity{ClientID: clientID, TenantID: tenant, TokenFile: tokenPath}
	_, err := Run(context.Background(), o)
	fe := wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
	if !strings.Contains(fe.Message, "Microsoft Entra ID refused application "+clientID+" of tenant "+tenant+" with the pod's service account token: HTTP 400: invalid_client (AADSTS700213: No matching federated identity record found") ||
		!strings.Contains(fe.Message, "federated credential must name this cluster's service account issuer") {
		t.Errorf("message %q does not give Entra's words", fe.Message)
	}

	withKey := secretDir(t, map[string]string{KeyAzureBlobEndpoint: srv.URL, KeyAzureAccessKey: srv.Key})
	o, _ = testOptions(t, azureModels+"/m", withKey)
	o.WebIdentity = WebIdentity{ClientID: clientID, TenantID: tenant, TokenFile: tokenPath}
	_, err = Run(context.Background(), o)
	if fe := wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent); !strings.Contains(fe.Message, "AZURE_STORAGE_ACCESS_KEY and spec.model.webIdentity") {
		t.Errorf("a key beside the application: message %q", fe.Message)
	}
}

func TestALargeAzureBlobIsFetchedAsRangesOfItsListedVersion(t *testing.T) {
	srv := startAzure(t, false)
	files := largeModel()
	putAzure(srv, "m", files)
	var seen rangesOf
	endpoint := throughHook(t, srv, func(r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/m/"+largeFileKey) {
			seen.add(cmp.Or(r.Header.Get("x-ms-range"), r.Header.Get("Range")))
		}
	})
	keys := azureKeys(srv)
	keys[KeyAzureBlobEndpoint] = endpoint
	o, _ := testOptions(t, azureModels+"/m", secretDir(t, keys))
	o.partSize = testPartSize
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if len(seen.ranges) != 11 || seen.count("bytes=655360-655482") != 1 {
		t.Fatalf("requests for the large file: %q; want one for each of its 11 parts", seen.ranges)
	}

	t.Run("replaced during the download", func(t *testing.T) {
		var (
			mu    sync.Mutex
			parts int
		)
		endpoint := throughHook(t, srv, func(r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/m/"+largeFileKey) {
				if parts++; parts == 4 {
					srv.Put("models", "m/"+largeFileKey, make([]byte, len(files[largeFileKey])))
				}
			}
		})
		keys[KeyAzureBlobEndpoint] = endpoint
		o, _ := testOptions(t, azureModels+"/m", secretDir(t, keys))
		wantNoStitch(t, o)
	})
}

func TestAnAzureListingOfManyPagesListsEveryBlob(t *testing.T) {
	srv := startAzure(t, false)
	files := model(1, 2)
	putAzure(srv, "m", files)
	putAzure(srv, "m2", model(3)) // beside the prefix, not below it
	srv.SetPageSize(3)
	o, _ := testOptions(t, azureModels+"/m", secretDir(t, azureKeys(srv)))
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	lists := 0
	for _, r := range srv.Requests() {
		if r.Blob == "" && r.Method == http.MethodGet {
			lists++
		}
	}
	if want := (len(files) + 2) / 3; lists != want {
		t.Errorf("%d listing requests; want %d pages of 3", lists, want)
	}
}

func TestAzureBlobNamesWithURLCharactersAreFetched(t *testing.T) {
	srv := startAzure(t, false)
	files := model(1)
	for _, name := range []string{"1/assets/vocab #1?.txt", "1/assets/100%+50%.txt", "1/assets/é ü.txt", "1/assets/a;b=c&d.txt"} {
		files[name] = []byte(name)
	}
	putAzure(srv, "odd names/m", files)
	o, _ := testOptions(t, azureModels+"/odd%20names/m", secretDir(t, azureKeys(srv)))
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
}

func TestAnAzureBlobAtThePrefixIsFetchedAsAnArchive(t *testing.T) {
	srv := startAzure(t, false)
	files := model(1)
	srv.Put("models", "exports/m.tar.gz", tarball(t, true, entries(files)))
	o, _ := testOptions(t, azureModels+"/exports/m.tar.gz", secretDir(t, azureKeys(srv)))
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
}

// TestAnAzureRefetchDownloadsOnlyWhatChanged: blobs listed with the ETag
// they were fetched at are taken from the earlier copy.
func TestAnAzureRefetchDownloadsOnlyWhatChanged(t *testing.T) {
	srv := startAzure(t, false)
	putAzure(srv, "resnet", model(1))
	var downloads atomic.Int32
	endpoint := throughHook(t, srv, func(r *http.Request) {
		if r.Method == http.MethodGet && !r.URL.Query().Has("comp") {
			downloads.Add(1)
		}
	})
	keys := azureKeys(srv)
	keys[KeyAzureBlobEndpoint] = endpoint
	creds := secretDir(t, keys)
	models := t.TempDir()
	for _, gen := range []string{"0000000a", "0000000b"} {
		o, logs := testOptions(t, azureModels+"/resnet", creds)
		o.Dest = filepath.Join(models, gen)
		downloads.Store(0)
		if _, err := Run(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		if gen == "0000000a" {
			putAzure(srv, "resnet", model(2))
			continue
		}
		if n, want := downloads.Load(), int32(len(model(2))); n != want {
			t.Errorf("the refetch made %d downloads, want %d, of version 2's files\n%s", n, want, logs)
		}
		assertTree(t, o.Dest, mergeTrees(model(1), model(2)))
	}
}

// TestADataLakeDirectoryIsADirectory: a hierarchical namespace lists its
// directories as empty blobs, marked by metadata or a resource type; they
// must not be taken as files beside the files below them.
func TestADataLakeDirectoryIsADirectory(t *testing.T) {
	yes, dir := "true", "directory"
	for _, c := range []struct {
		item *container.BlobItem
		want bool
	}{
		{&container.BlobItem{Properties: &container.BlobProperties{}, Metadata: map[string]*string{"hdi_isfolder": &yes}}, true},
		{&container.BlobItem{Properties: &container.BlobProperties{}, Metadata: map[string]*string{"Hdi_IsFolder": &yes}}, true},
		{&container.BlobItem{Properties: &container.BlobProperties{ResourceType: &dir}}, true},
		{&container.BlobItem{Properties: &container.BlobProperties{}, Metadata: map[string]*string{"owner": &yes}}, false},
		{&container.BlobItem{Properties: &container.BlobProperties{}}, false},
	} {
		if got := isAzureDirectory(c.item); got != c.want {
			t.Errorf("isAzureDirectory(%+v) = %v; want %v", c.item, got, c.want)
		}
	}
}

// TestADataLakeModelIsFetchedFromItsAbfssURI: an account with a
// hierarchical namespace (Data Lake Storage Gen2), whose Blob API lists
// each directory as an empty blob marked hdi_isfolder, read from the
// abfss:// URI that Spark, Databricks and Azure Machine Learning give, and
// from the dfs endpoint's https:// URI, through the blob endpoint.
func TestADataLakeModelIsFetchedFromItsAbfssURI(t *testing.T) {
	srv := startAzure(t, false)
	files := model(1, 2)
	putAzure(srv, "lake/resnet", files)
	dirs := map[string]bool{"lake": true}
	for name := range files {
		for dir := path.Dir("lake/resnet/" + name); dir != "."; dir = path.Dir(dir) {
			dirs[dir] = true
		}
	}
	for dir := range dirs {
		srv.PutDirectory("models", dir)
	}
	for _, uri := range []string{
		"abfss://models@" + azureAccount + ".dfs.core.windows.net/lake/resnet",
		"https://" + azureAccount + ".dfs.core.windows.net/models/lake/resnet/",
	} {
		o, logs := testOptions(t, uri, secretDir(t, azureKeys(srv)))
		sum, err := Run(context.Background(), o)
		if err != nil {
			t.Fatalf("%s: %v\n%s", uri, err, logs)
		}
		assertTree(t, o.Dest, files)
		if !reflect.DeepEqual(sum.Versions, []int64{1, 2}) || sum.Files != int64(len(files)) {
			t.Errorf("%s: versions %v, %d files; want [1 2], %d files", uri, sum.Versions, sum.Files, len(files))
		}
	}
}

func TestAnAzureEndpointInTheSecretMustBeAURL(t *testing.T) {
	loc, err := storageuri.Parse(azureModels + "/m")
	if err != nil {
		t.Fatal(err)
	}
	for ep, want := range map[string]string{
		"http://127.0.0.1:10000/devstoreaccount1/": "http://127.0.0.1:10000/devstoreaccount1/models",
		"https://blob.azurestack.example":          "https://blob.azurestack.example/models",
		"":                                         azureModels,
		"ftp://h":                                  "",
		"https://h/?sv=1":                          "",
	} {
		creds, err := LoadCredentials(secretDir(t, map[string]string{KeyAzureBlobEndpoint: ep}))
		if err != nil {
			t.Fatal(err)
		}
		got, err := azureContainerURL(loc, creds)
		switch {
		case want == "" && err == nil:
			t.Errorf("%q: %s; want it refused", ep, got)
		case want != "" && (err != nil || got.String() != want):
			t.Errorf("%q: %v, %v; want %s", ep, got, err, want)
		}
	}
	// The endpoint of the account's cloud's Entra ID.
	for host, want := range map[string]string{
		"https://a.blob.core.windows.net/c":       "https://login.microsoftonline.com/",
		"https://a.blob.core.chinacloudapi.cn/c":  "https://login.chinacloudapi.cn/",
		"https://a.blob.core.usgovcloudapi.net/c": "https://login.microsoftonline.us/",
	} {
		loc, _ := storageuri.Parse(host)
		if got := azureCloud(loc, Credentials{}).ActiveDirectoryAuthorityHost; got != want {
			t.Errorf("%s: Entra ID at %s; want %s", host, got, want)
		}
	}
}

// TestAStoppedAzureFetchResumes: the files an Azure fetch completed before
// the store failed it are kept, by the ETags they were listed with, and
// the next attempt downloads only the others.
func TestAStoppedAzureFetchResumes(t *testing.T) {
	srv := startAzure(t, false)
	files := model(1, 2)
	putAzure(srv, "m", files)
	var (
		failing   atomic.Bool
		downloads atomic.Int32
	)
	failing.Store(true)
	endpoint := throughHook(t, srv, func(r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Query().Get("comp") != "list" {
			downloads.Add(1)
		}
	})
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() && strings.HasSuffix(r.URL.Path, "/m/2/saved_model.pb") {
			w.Header().Set("x-ms-error-code", "ServerBusy")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		target, _ := url.Parse(endpoint)
		httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host}).ServeHTTP(w, r)
	}))
	t.Cleanup(busy.Close)
	keys := azureKeys(srv)
	keys[KeyAzureBlobEndpoint] = busy.URL + "/" + azureAccount
	o, _ := testOptions(t, azureModels+"/m", secretDir(t, keys))
	o.Concurrency = 1
	_, err := Run(context.Background(), o)
	if fe := wantFailure(t, err, servingv1alpha1.ReasonFetchFailed, ExitTransient); !strings.Contains(fe.Message, "ServerBusy") {
		t.Errorf("message %q does not give Azure's code", fe.Message)
	}
	assertNotPublished(t, o.Dest)

	failing.Store(false)
	downloads.Store(0)
	logs := &logBuffer{}
	o.Logger = testLogger(logs)
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if n := int(downloads.Load()); n == 0 || n >= len(files) || !strings.Contains(logs.String(), "resuming a stopped fetch") {
		t.Errorf("the resumed fetch made %d of %d downloads; want only those not completed before\n%s", n, len(files), logs)
	}
	assertTree(t, o.Dest, files)
}

// TestAnArchivedAzureBlobIsRefusedByNameBeforeAnyDownload: a blob in the
// Archive tier cannot be read until it is rehydrated; the listing says
// so, naming it, before the others are downloaded, and so does the
// download of an archived archive.
func TestAnArchivedAzureBlobIsRefusedByNameBeforeAnyDownload(t *testing.T) {
	srv := startAzure(t, false)
	files := model(1)
	putAzure(srv, "m", files)
	srv.SetTier("models", "m/1/variables/variables.index", "Archive")
	srv.Put("models", "exports/m.tar.gz", tarball(t, true, entries(files)))
	srv.SetTier("models", "exports/m.tar.gz", "Archive")
	creds := secretDir(t, azureKeys(srv))

	o, _ := testOptions(t, azureModels+"/m", creds)
	_, err := Run(context.Background(), o)
	fe := wantFailure(t, err, servingv1alpha1.ReasonFetchFailed, ExitPermanent)
	if !strings.Contains(fe.Message, "1 blob is in the Archive tier, whose bytes cannot be read (1/variables/variables.index); rehydrate them") {
		t.Errorf("message %q", fe.Message)
	}
	for _, r := range srv.Requests() {
		if r.Method == http.MethodGet && r.Blob != "" {
			t.Errorf("a blob was downloaded: %+v", r)
		}
	}

	o, _ = testOptions(t, azureModels+"/exports/m.tar.gz", creds)
	_, err = Run(context.Background(), o)
	if fe := wantFailure(t, err, servingv1alpha1.ReasonFetchFailed, ExitPermanent); !strings.Contains(fe.Message, "the blob is in the Archive tier") {
		t.Errorf("message %q", fe.Message)
	}
}
