package azblobserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/modelserver-dev/modelserver-operator/test/azblobserver"
)

const account = "modelstore"

func start(t *testing.T, useTLS bool) *azblobserver.Server {
	t.Helper()
	return azblobserver.Serve(t, "127.0.0.1:0", account, useTLS)
}

func startIdentity(t *testing.T, issue func(azblobserver.TokenRequest) (azblobserver.Token, error)) *azblobserver.Identity {
	t.Helper()
	return azblobserver.ServeIdentity(t, "127.0.0.1:0", issue)
}

// trusting is an http.Client that trusts the stand-ins' CAs and no proxy.
func trusting(t *testing.T, caPEMs ...[]byte) *http.Client {
	t.Helper()
	roots := x509.NewCertPool()
	for _, p := range caPEMs {
		if !roots.AppendCertsFromPEM(p) {
			t.Fatal("no certificate in CA PEM")
		}
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func clientOptions(hc *http.Client) azcore.ClientOptions {
	// One try: a test of a refusal should see it at once, not after
	// azcore's back-off.
	return azcore.ClientOptions{Transport: hc, Retry: policy.RetryOptions{MaxRetries: -1}}
}

func sharedKeyClient(t *testing.T, s *azblobserver.Server, key string) *container.Client {
	t.Helper()
	cred, err := azblob.NewSharedKeyCredential(s.Account, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClientWithSharedKeyCredential(s.URL+"/models", cred,
		&container.ClientOptions{ClientOptions: clientOptions(trusting(t))})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func anonymousClient(t *testing.T, containerURL string, hc *http.Client) *container.Client {
	t.Helper()
	c, err := container.NewClientWithNoCredential(containerURL, &container.ClientOptions{ClientOptions: clientOptions(hc)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func listAll(ctx context.Context, c *container.Client) ([]string, error) {
	var names []string
	pager := c.NewListBlobsFlatPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return names, err
		}
		for _, b := range page.Segment.BlobItems {
			names = append(names, *b.Name)
		}
	}
	return names, nil
}

func download(ctx context.Context, c *container.Client, name string, o *blob.DownloadStreamOptions) ([]byte, blob.DownloadStreamResponse, error) {
	resp, err := c.NewBlobClient(name).DownloadStream(ctx, o)
	if err != nil {
		return nil, resp, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return body, resp, err
}

func TestListingWithSharedKeyFollowsNextMarkerAcrossPages(t *testing.T) {
	s := start(t, false)
	etags := map[string]string{}
	for i := range 7 {
		name := fmt.Sprintf("mnist/1/variables/variables.data-%05d-of-00007", i)
		etags[name] = s.Put("models", name, []byte(name))
	}
	s.Put("models", "other/saved_model.pb", []byte("x"))
	s.SetPageSize(3)
	c := sharedKeyClient(t, s, s.Key)

	pager := c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: new("mnist/")})
	var names []string
	for pager.More() {
		page, err := pager.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Segment.BlobItems {
			names = append(names, *b.Name)
			p := b.Properties
			if got, want := `"`+string(*p.ETag)+`"`, etags[*b.Name]; got != want {
				t.Errorf("%s: listed ETag %s, Put returned %s", *b.Name, got, want)
			}
			if *p.ContentLength != int64(len(*b.Name)) || *p.BlobType != blob.BlobTypeBlockBlob || p.LastModified.IsZero() || len(p.ContentMD5) != 16 {
				t.Errorf("%s: properties %+v", *b.Name, p)
			}
		}
	}
	if want := slices.Sorted(maps.Keys(etags)); !slices.Equal(names, want) {
		t.Errorf("listed %q, want %q", names, want)
	}
	var statuses []string
	for _, r := range s.Requests() {
		statuses = append(statuses, fmt.Sprintf("%s %s %d", r.Method, r.Auth, r.Status))
	}
	if want := slices.Repeat([]string{"GET SharedKey 200"}, 3); !slices.Equal(statuses, want) {
		t.Errorf("requests %q, want three pages %q", statuses, want)
	}
}

func TestListingWithADelimiterRollsUpPrefixes(t *testing.T) {
	s := start(t, false)
	for _, n := range []string{"mnist/1/saved_model.pb", "mnist/1/variables/variables.index", "mnist/2/saved_model.pb", "mnist/README", "mnistic/x"} {
		s.Put("models", n, []byte(n))
	}
	s.SetPageSize(2)
	c := sharedKeyClient(t, s, s.Key)

	var got []string
	pager := c.NewListBlobsHierarchyPager("/", &container.ListBlobsHierarchyOptions{Prefix: new("mnist/")})
	for pager.More() {
		page, err := pager.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Segment.BlobPrefixes {
			got = append(got, "prefix "+*p.Name)
		}
		for _, b := range page.Segment.BlobItems {
			got = append(got, "blob "+*b.Name)
		}
	}
	if want := []string{"prefix mnist/1/", "prefix mnist/2/", "blob mnist/README"}; !slices.Equal(got, want) {
		t.Errorf("listed %q, want %q", got, want)
	}
}

func TestWrongAccountKeyIsRefusedAsAuthenticationFailed(t *testing.T) {
	s := start(t, false)
	s.Put("models", "saved_model.pb", []byte("graph"))
	c := sharedKeyClient(t, s, base64.StdEncoding.EncodeToString([]byte(strings.Repeat("not the key ", 5))))

	_, err := listAll(t.Context(), c)
	if !bloberror.HasCode(err, bloberror.AuthenticationFailed) {
		t.Fatalf("listing with another account's key: %v, want AuthenticationFailed", err)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusForbidden || !strings.Contains(err.Error(), "AuthenticationErrorDetail") {
		t.Errorf("error %v, want a 403 whose body has the AuthenticationErrorDetail", err)
	}
	_, err = c.NewBlobClient("saved_model.pb").GetProperties(t.Context(), nil)
	if !bloberror.HasCode(err, bloberror.AuthenticationFailed) {
		t.Errorf("HEAD with another account's key: %v, want AuthenticationFailed from x-ms-error-code", err)
	}
}

// tamper changes a request after the SDK signed it.
type tamper func(*http.Request)

func (f tamper) Do(req *policy.Request) (*http.Response, error) {
	f(req.Raw())
	return req.Next()
}

func TestRequestAlteredAfterSigningIsRefused(t *testing.T) {
	s := start(t, false)
	s.Put("models", "saved_model.pb", []byte("0123456789"))
	cred, err := azblob.NewSharedKeyCredential(s.Account, s.Key)
	if err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]tamper{
		"nothing": func(*http.Request) {},
		"range":   func(r *http.Request) { r.Header.Set("x-ms-range", "bytes=0-9"); r.Header.Del("Range") },
		"version": func(r *http.Request) { r.Header.Set("x-ms-version", "2019-12-12") },
		"path":    func(r *http.Request) { r.URL.Path = strings.Replace(r.URL.Path, "/models/", "/other/", 1) },
		"query":   func(r *http.Request) { r.URL.RawQuery = "timeout=30" },
	} {
		t.Run(name, func(t *testing.T) {
			opts := clientOptions(trusting(t))
			opts.PerRetryPolicies = []policy.Policy{change}
			c, err := container.NewClientWithSharedKeyCredential(s.URL+"/models", cred, &container.ClientOptions{ClientOptions: opts})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = download(t.Context(), c, "saved_model.pb", &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: 1, Count: 2}})
			if refused := bloberror.HasCode(err, bloberror.AuthenticationFailed); refused != (name != "nothing") {
				t.Errorf("download with %s changed after signing: %v", name, err)
			}
		})
	}
}

func TestDownloadingARangeReturnsThoseBytes(t *testing.T) {
	s := start(t, false)
	body := []byte("0123456789abcdef")
	s.Put("models", "saved_model.pb", body)
	c := sharedKeyClient(t, s, s.Key)

	got, resp, err := download(t.Context(), c, "saved_model.pb", &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: 4, Count: 6}})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "456789" || *resp.ContentRange != "bytes 4-9/16" || *resp.ContentLength != 6 || resp.ContentMD5 != nil || len(resp.BlobContentMD5) != 16 {
		t.Errorf("range 4+6: body %q, Content-Range %s, length %d, MD5 %x/%x", got, *resp.ContentRange, *resp.ContentLength, resp.ContentMD5, resp.BlobContentMD5)
	}
	got, _, err = download(t.Context(), c, "saved_model.pb", &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: 10}})
	if err != nil || string(got) != "abcdef" {
		t.Errorf("range 10-: %q, %v", got, err)
	}
	if r := s.Requests()[1]; r.Range != "bytes=10-" || r.Status != http.StatusPartialContent {
		t.Errorf("open range request %+v, want x-ms-range bytes=10- answered 206", r)
	}
	_, _, err = download(t.Context(), c, "saved_model.pb", &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: 16, Count: 1}})
	if !bloberror.HasCode(err, bloberror.InvalidRange) {
		t.Errorf("range past the end: %v, want InvalidRange", err)
	}
	_, _, err = download(t.Context(), c, "missing.pb", nil)
	if !bloberror.HasCode(err, bloberror.BlobNotFound) {
		t.Errorf("missing blob: %v, want BlobNotFound", err)
	}
}

func TestAnonymousAccessFollowsThePublicAccessLevel(t *testing.T) {
	for _, tc := range []struct {
		level            string
		canRead, canList bool
	}{
		{level: ""},
		{level: "blob", canRead: true},
		{level: "container", canRead: true, canList: true},
	} {
		t.Run("level="+tc.level, func(t *testing.T) {
			s := start(t, false)
			s.Put("models", "saved_model.pb", []byte("graph"))
			s.SetPublic("models", tc.level)
			c := anonymousClient(t, s.URL+"/models", trusting(t))

			got, _, err := download(t.Context(), c, "saved_model.pb", nil)
			if tc.canRead && (err != nil || string(got) != "graph") {
				t.Errorf("anonymous download: %q, %v", got, err)
			}
			if !tc.canRead && !bloberror.HasCode(err, bloberror.ResourceNotFound) {
				t.Errorf("anonymous download: %v, want ResourceNotFound", err)
			}
			_, err = c.NewBlobClient("saved_model.pb").GetProperties(t.Context(), nil)
			if tc.canRead != (err == nil) {
				t.Errorf("anonymous HEAD: %v", err)
			}
			names, err := listAll(t.Context(), c)
			if tc.canList && (err != nil || !slices.Equal(names, []string{"saved_model.pb"})) {
				t.Errorf("anonymous listing: %q, %v", names, err)
			}
			if !tc.canList && !bloberror.HasCode(err, bloberror.ResourceNotFound) {
				t.Errorf("anonymous listing: %v, want ResourceNotFound", err)
			}
			if r := s.Requests()[0]; r.Auth != "Anonymous" || r.Container != "models" || r.Blob != "saved_model.pb" {
				t.Errorf("request %+v", r)
			}
		})
	}
}

func TestSASTokenReadsUntilItExpires(t *testing.T) {
	s := start(t, false)
	s.Put("models", "saved_model.pb", []byte("graph"))
	valid, expired := azblobserver.NewSAS(time.Now().Add(time.Hour)), azblobserver.NewSAS(time.Now().Add(-time.Minute))
	s.AllowSAS(valid)
	s.AllowSAS(expired)

	c := anonymousClient(t, s.URL+"/models?"+valid, trusting(t))
	if names, err := listAll(t.Context(), c); err != nil || len(names) != 1 {
		t.Errorf("listing with a SAS: %q, %v", names, err)
	}
	if got, _, err := download(t.Context(), c, "saved_model.pb", nil); err != nil || string(got) != "graph" {
		t.Errorf("download with a SAS: %q, %v", got, err)
	}
	if r := s.Requests()[1]; r.Auth != "SAS" || r.Status != http.StatusOK {
		t.Errorf("request %+v, want a SAS read", r)
	}

	_, _, err := download(t.Context(), anonymousClient(t, s.URL+"/models?"+expired, trusting(t)), "saved_model.pb", nil)
	if !bloberror.HasCode(err, bloberror.AuthenticationFailed) || !strings.Contains(err.Error(), "Signed expiry time") {
		t.Errorf("download with an expired SAS: %v, want AuthenticationFailed about the expiry", err)
	}
	forged := strings.Replace(valid, "sp=rl", "sp=rwdl", 1)
	_, _, err = download(t.Context(), anonymousClient(t, s.URL+"/models?"+forged, trusting(t)), "saved_model.pb", nil)
	if !bloberror.HasCode(err, bloberror.AuthenticationFailed) {
		t.Errorf("download with an altered SAS: %v, want AuthenticationFailed", err)
	}
	readOnly := strings.Replace(azblobserver.NewSAS(time.Now().Add(time.Hour)), "sp=rl", "sp=r", 1)
	s.AllowSAS(readOnly)
	_, err = listAll(t.Context(), anonymousClient(t, s.URL+"/models?"+readOnly, trusting(t)))
	if !bloberror.HasCode(err, bloberror.AuthorizationPermissionMismatch) {
		t.Errorf("listing with a SAS without l: %v, want AuthorizationPermissionMismatch", err)
	}
}

// entra is a blob service over https and an Entra ID that issues token for
// client "reader" with secret "s3cret" or any client assertion.
func entra(t *testing.T) (*azblobserver.Server, *azblobserver.Identity, *http.Client) {
	t.Helper()
	s := start(t, true)
	id := startIdentity(t, func(r azblobserver.TokenRequest) (azblobserver.Token, error) {
		if r.ClientSecret != "" && r.ClientSecret != "s3cret" {
			return azblobserver.Token{}, &azblobserver.Refusal{Status: http.StatusUnauthorized, Code: "invalid_client",
				Description: "AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID."}
		}
		return azblobserver.Token{AccessToken: "token-for-" + r.ClientID}, nil
	})
	return s, id, trusting(t, s.CAPEM, id.CAPEM)
}

func entraClient(t *testing.T, s *azblobserver.Server, cred azcore.TokenCredential, hc *http.Client) *container.Client {
	t.Helper()
	c, err := container.NewClient(s.URL+"/models", cred, &container.ClientOptions{ClientOptions: clientOptions(hc)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func secretCredential(t *testing.T, tenant, secret string, id *azblobserver.Identity, hc *http.Client) azcore.TokenCredential {
	t.Helper()
	cred, err := azidentity.NewClientSecretCredential(tenant, "reader", secret, &azidentity.ClientSecretCredentialOptions{
		ClientOptions: azcore.ClientOptions{
			Cloud:     cloud.Configuration{ActiveDirectoryAuthorityHost: id.URL},
			Transport: hc,
		},
		DisableInstanceDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

func TestClientSecretCredentialReadsWithABearerToken(t *testing.T) {
	s, id, hc := entra(t)
	s.Put("models", "saved_model.pb", []byte("graph"))
	s.AllowBearer("token-for-reader", true)
	c := entraClient(t, s, secretCredential(t, s.Tenant, "s3cret", id, hc), hc)

	if names, err := listAll(t.Context(), c); err != nil || len(names) != 1 {
		t.Fatalf("listing with a bearer token: %q, %v", names, err)
	}
	if got, _, err := download(t.Context(), c, "saved_model.pb", nil); err != nil || string(got) != "graph" {
		t.Errorf("download with a bearer token: %q, %v", got, err)
	}
	reqs := id.Requests()
	if len(reqs) != 1 {
		t.Fatalf("token requests %+v, want one, the token cached for the second call", reqs)
	}
	if r := reqs[0]; r.Tenant != s.Tenant || r.ClientID != "reader" || r.ClientSecret != "s3cret" ||
		!slices.Contains(strings.Fields(r.Scope), "https://storage.azure.com/.default") {
		t.Errorf("token request %+v", r)
	}
	if r := s.Requests()[0]; r.Auth != "Bearer" || r.Status != http.StatusOK {
		t.Errorf("blob request %+v", r)
	}
}

func TestWrongClientSecretFailsWithEntrasCode(t *testing.T) {
	s, id, hc := entra(t)
	s.Put("models", "saved_model.pb", []byte("graph"))
	c := entraClient(t, s, secretCredential(t, s.Tenant, "wrong", id, hc), hc)

	_, _, err := download(t.Context(), c, "saved_model.pb", nil)
	var af *azidentity.AuthenticationFailedError
	if !errors.As(err, &af) || af.RawResponse.StatusCode != http.StatusUnauthorized {
		t.Fatalf("download with a wrong secret: %v, want an azidentity.AuthenticationFailedError", err)
	}
	for _, want := range []string{"invalid_client", "AADSTS7000215", "7000215"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("blob service got %d requests, want none without a token", n)
	}
}

func TestClientAssertionCredentialReadsWithABearerToken(t *testing.T) {
	s, id, hc := entra(t)
	s.Put("models", "saved_model.pb", []byte("graph"))
	s.AllowBearer("token-for-workload", true)
	id.Decide(func(r azblobserver.TokenRequest) (azblobserver.Token, error) {
		if r.ClientAssertion != "service-account-token" {
			return azblobserver.Token{}, &azblobserver.Refusal{Status: http.StatusBadRequest, Code: "invalid_client",
				Description: "AADSTS700213: No matching federated identity record found for presented assertion subject."}
		}
		return azblobserver.Token{AccessToken: "token-for-" + r.ClientID, ExpiresIn: time.Hour}, nil
	})
	cred, err := azidentity.NewClientAssertionCredential(s.Tenant, "workload",
		func(context.Context) (string, error) { return "service-account-token", nil },
		&azidentity.ClientAssertionCredentialOptions{
			ClientOptions:            azcore.ClientOptions{Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: id.URL}, Transport: hc},
			DisableInstanceDiscovery: true,
		})
	if err != nil {
		t.Fatal(err)
	}

	if got, _, err := download(t.Context(), entraClient(t, s, cred, hc), "saved_model.pb", nil); err != nil || string(got) != "graph" {
		t.Fatalf("download with a federated token: %q, %v", got, err)
	}
	if r := id.Requests()[0]; r.ClientAssertion != "service-account-token" || r.ClientSecret != "" || r.ClientID != "workload" {
		t.Errorf("token request %+v, want the service account token as the client assertion", r)
	}
}

func TestPrincipalWithoutAReaderRoleIsRefused(t *testing.T) {
	s, id, hc := entra(t)
	s.Put("models", "saved_model.pb", []byte("graph"))
	s.AllowBearer("token-for-reader", false)
	c := entraClient(t, s, secretCredential(t, s.Tenant, "s3cret", id, hc), hc)

	_, _, err := download(t.Context(), c, "saved_model.pb", nil)
	if !bloberror.HasCode(err, bloberror.AuthorizationPermissionMismatch) {
		t.Errorf("download without a role: %v, want AuthorizationPermissionMismatch", err)
	}
}

func TestUnknownBearerTokenIsChallengedOnceAndRefused(t *testing.T) {
	s, id, hc := entra(t)
	s.Put("models", "saved_model.pb", []byte("graph"))
	c := entraClient(t, s, secretCredential(t, s.Tenant, "s3cret", id, hc), hc)

	_, _, err := download(t.Context(), c, "saved_model.pb", nil)
	if !bloberror.HasCode(err, bloberror.InvalidAuthenticationInfo) {
		t.Fatalf("download with a token storage does not take: %v, want InvalidAuthenticationInfo", err)
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) && !strings.Contains(re.RawResponse.Header.Get("WWW-Authenticate"), "resource_id=https://storage.azure.com") {
		t.Errorf("challenge %q", re.RawResponse.Header.Get("WWW-Authenticate"))
	}
	// azblob answers the challenge by asking for a token again (MSAL's
	// cache gives the same one) and retrying once.
	if n := len(s.Requests()); n != 2 {
		t.Errorf("blob service got %d requests, want the first and one retry after the challenge", n)
	}
}

func TestStaleETagIsRefusedAsConditionNotMet(t *testing.T) {
	s := start(t, false)
	old := s.Put("models", "saved_model.pb", []byte("v1"))
	current := s.Put("models", "saved_model.pb", []byte("v2"))
	if old == current {
		t.Fatalf("two Puts gave one ETag %s", old)
	}
	c := sharedKeyClient(t, s, s.Key)

	stale := azcore.ETag(old)
	_, _, err := download(t.Context(), c, "saved_model.pb", &blob.DownloadStreamOptions{
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &stale}},
	})
	if !bloberror.HasCode(err, bloberror.ConditionNotMet) {
		t.Errorf("download if-match a replaced version: %v, want ConditionNotMet", err)
	}
	props, err := c.NewBlobClient("saved_model.pb").GetProperties(t.Context(), nil)
	if err != nil || string(*props.ETag) != current {
		t.Fatalf("properties: ETag %v, %v; want %s", props.ETag, err, current)
	}
	got, _, err := download(t.Context(), c, "saved_model.pb", &blob.DownloadStreamOptions{
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: props.ETag}},
	})
	if err != nil || string(got) != "v2" {
		t.Errorf("download if-match the current version: %q, %v", got, err)
	}
	notModified, err := c.NewBlobClient("saved_model.pb").DownloadStream(t.Context(), &blob.DownloadStreamOptions{
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: props.ETag}},
	})
	if err != nil || notModified.ErrorCode == nil || *notModified.ErrorCode != string(bloberror.ConditionNotMet) {
		t.Errorf("download if-none-match the current version: %+v, %v; want a 304 with ConditionNotMet", notModified.ErrorCode, err)
	}
	s.Delete("models", "saved_model.pb")
	_, err = c.NewBlobClient("saved_model.pb").GetProperties(t.Context(), nil)
	if !bloberror.HasCode(err, bloberror.BlobNotFound) {
		t.Errorf("properties of a deleted blob: %v, want BlobNotFound", err)
	}
}

func TestAwkwardBlobNamesRoundTrip(t *testing.T) {
	s := start(t, false)
	names := []string{
		"models/with space/saved_model.pb", "plus+sign", "per%cent%2F", "ünïcödé/模型", "hash#tag", "question?mark",
		"control\x01char", "a/../b",
	}
	for _, n := range names {
		s.Put("models", n, []byte("body of "+n))
	}
	c := sharedKeyClient(t, s, s.Key)

	listed, err := listAll(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Sorted(slices.Values(names)); !slices.Equal(listed, want) {
		t.Errorf("listed %q, want %q", listed, want)
	}
	for _, n := range names {
		got, _, err := download(t.Context(), c, n, nil)
		if err != nil || string(got) != "body of "+n {
			t.Errorf("download %q: %q, %v", n, got, err)
		}
	}
}

func TestErrorsCarryAzuresCodeAndBody(t *testing.T) {
	s := start(t, false)
	s.Put("models", "saved_model.pb", []byte("graph"))
	s.SetPublic("models", "blob")
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/models/missing.pb", http.StatusNotFound, "BlobNotFound"},
		{http.MethodHead, "/models/missing.pb", http.StatusNotFound, "BlobNotFound"},
		{http.MethodGet, "/private/saved_model.pb", http.StatusNotFound, "ResourceNotFound"},
		{http.MethodPut, "/models/saved_model.pb", http.StatusMethodNotAllowed, "UnsupportedHttpVerb"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), tc.method, s.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-ms-version", "2025-01-05")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("x-ms-error-code") != tc.code || resp.Header.Get("x-ms-version") != "2025-01-05" {
			t.Errorf("%s %s: %d %q, want %d %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("x-ms-error-code"), tc.status, tc.code)
		}
		wantBody := `<?xml version="1.0" encoding="utf-8"?><Error><Code>` + tc.code + `</Code><Message>`
		if tc.method == http.MethodHead && len(body) != 0 || tc.method != http.MethodHead && (!strings.HasPrefix(string(body), wantBody) || !strings.Contains(string(body), "\nRequestId:")) {
			t.Errorf("%s %s: body %q", tc.method, tc.path, body)
		}
	}
}

func TestCloseStopsServing(t *testing.T) {
	s := start(t, false)
	s.Close()
	if _, err := http.Get(s.URL + "/models/x"); err == nil { //nolint:bodyclose,noctx // there is no response
		t.Error("GET after Close succeeded")
	}
}
