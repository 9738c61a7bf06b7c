package fetch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// gcsReadOnlyScope is the OAuth scope a service account key's tokens are
// asked for: reading objects, nothing else.
const gcsReadOnlyScope = "https://www.googleapis.com/auth/devstorage.read_only"

// defaultGCSAPI is the Cloud Storage JSON API's base URL.
const defaultGCSAPI = "https://storage.googleapis.com/storage/v1/"

// gcsSource is a Cloud Storage bucket and a prefix in it, read through the
// JSON API on the fetcher's own transport: a listing, an object's size,
// and media downloads, whole or as ranges. It needs four requests of one
// API; Google's client library would have linked gRPC, xDS and
// OpenTelemetry into the fetcher, whose initialisation alone took longer
// than the rest of its start (docs/performance.md).
type gcsSource struct {
	bucketPrefix
	client *http.Client
	api    *url.URL // the JSON API's base, its path ending in "/"
	// pageSize is how many objects a listing page asks for; 0 leaves it
	// to the service (1,000).
	pageSize int
}

// newGCSSource opens a Cloud Storage bucket with the service account key
// of the credentials Secret, the federated identity of spec.model.
// webIdentity, the identity GKE's metadata server gives the pod, or
// anonymously (public buckets) when it has neither.
// Application default credentials are never looked for.
func newGCSSource(ctx context.Context, loc storageuri.Location, creds Credentials, federated WebIdentity, transport http.RoundTripper, maxFiles int) (Source, error) {
	client := &http.Client{Transport: transport}
	key := creds.values[KeyGCSServiceAccount]
	hasKey := strings.TrimSpace(key) != ""
	switch {
	case federated.GKEWorkloadIdentity && hasKey:
		return nil, permanentf(servingv1alpha1.ReasonAccessDenied, "spec.model.webIdentity reads the model as GKE's metadata server identifies the pod: the credentials Secret must not hold %s as well", KeyGCSServiceAccount)
	case federated.GKEWorkloadIdentity:
		client = &http.Client{Transport: &oauth2.Transport{Source: gkeTokens(ctx, federated, creds.Get(KeyGCEMetadataHost)), Base: transport}}
	case federated.Provider != "" && hasKey:
		return nil, permanentf(servingv1alpha1.ReasonAccessDenied, "spec.model.webIdentity federates the pod's identity through %s: the credentials Secret must not hold %s as well", federated.Provider, KeyGCSServiceAccount)
	case federated.Provider != "":
		ts, err := federatedTokens(ctx, federated, creds, transport)
		if err != nil {
			return nil, err
		}
		client = &http.Client{Transport: &oauth2.Transport{Source: ts, Base: transport}}
	case hasKey:
		// Tokens are fetched through the same transport (proxy, trust).
		tokenCtx := context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Transport: transport})
		c, err := google.CredentialsFromJSONWithType(tokenCtx, []byte(key), google.ServiceAccount, gcsReadOnlyScope)
		if err != nil {
			return nil, permanentf(servingv1alpha1.ReasonAccessDenied, "credentials key %s is not a service account key: %s", KeyGCSServiceAccount, creds.Redact(err.Error()))
		}
		client = &http.Client{Transport: &oauth2.Transport{Source: c.TokenSource, Base: transport}}
	}
	api, err := url.Parse(defaultGCSAPI)
	if err != nil {
		return nil, err
	}
	if ep := creds.Get(KeyGCSEndpointURL); ep != "" {
		if api, err = url.Parse(ep); err != nil || api.Host == "" {
			return nil, permanentf(servingv1alpha1.ReasonInvalidURI, "credentials key %s is not a URL", KeyGCSEndpointURL)
		}
		if api.Path == "" || api.Path == "/" {
			api.Path, api.RawPath = "/storage/v1/", ""
		}
	}
	if !strings.HasSuffix(api.Path, "/") {
		api.Path += "/"
		if api.RawPath != "" {
			api.RawPath += "/"
		}
	}
	return &gcsSource{bucketPrefix: newBucketPrefix(loc, maxFiles), client: client, api: api}, nil
}

// objectURL is the JSON API's URL of an object, the bucket's objects
// when name is "". An object's name is one path segment of the URL.
func (s *gcsSource) objectURL(name string, query url.Values) string {
	u := *s.api
	raw := u.EscapedPath() + "b/" + escapeSegment(s.name) + "/o"
	if name != "" {
		raw += "/" + escapeSegment(name)
	}
	u.Path, _ = url.PathUnescape(raw)
	u.RawPath = raw
	u.RawQuery = query.Encode()
	return u.String()
}

// escapeSegment percent-encodes every byte of s but the unreserved ones
// (letters, digits, "-._~"), its slashes too: a reserved character such
// as "+" or ";" means one thing to a server and another to a proxy, and
// escaped it means only itself.
func escapeSegment(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// get sends a GET with header (nil for none) and returns its response if
// its status is one of ok; any other status is a *statusError, and its
// body is read and closed.
func (s *gcsSource) get(ctx context.Context, target string, header http.Header, ok ...int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	if header != nil {
		req.Header = header
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	for _, code := range ok {
		if resp.StatusCode == code {
			return resp, nil
		}
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return nil, gcsStatusError(resp, body)
}

func (s *gcsSource) List(ctx context.Context) (Listing, error) {
	keys := s.listing()
	query := url.Values{"prefix": {s.listPrefix()}, "fields": {"items(name,size,generation),nextPageToken"}}
	if s.pageSize > 0 {
		query.Set("maxResults", strconv.Itoa(s.pageSize))
	}
	for {
		var page struct {
			Items []struct {
				Name       string `json:"name"`
				Size       int64  `json:"size,string"`
				Generation string `json:"generation"`
			} `json:"items"`
			NextPageToken string `json:"nextPageToken"`
		}
		if err := s.getJSON(ctx, s.objectURL("", query), &page); err != nil {
			if isGCSNotFound(err) {
				// A prefix with nothing below it lists empty: a 404 is the bucket's.
				return Listing{}, permanentf(servingv1alpha1.ReasonNotFound, "%s: the bucket does not exist", s.Describe(""))
			}
			return Listing{}, classify(err, s.Describe(""))
		}
		for _, it := range page.Items {
			if err := keys.add(it.Name, it.Size, it.Generation); err != nil {
				return Listing{}, err
			}
		}
		if page.NextPageToken == "" {
			break
		}
		query.Set("pageToken", page.NextPageToken)
	}
	return keys.done(func() (int64, string, bool, error) {
		var attrs struct {
			Size       int64  `json:"size,string"`
			Generation string `json:"generation"`
		}
		err := s.getJSON(ctx, s.objectURL(s.prefix, url.Values{"fields": {"size,generation"}}), &attrs)
		switch {
		case err == nil:
			return attrs.Size, attrs.Generation, true, nil
		case isGCSNotFound(err):
			return 0, "", false, nil
		}
		return 0, "", false, classify(err, s.Describe(""))
	})
}

// getJSON decodes the JSON of a GET's 200 response into v.
func (s *gcsSource) getJSON(ctx context.Context, target string, v any) error {
	resp, err := s.get(ctx, target, nil, http.StatusOK)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("decoding the response of %s: %w", resp.Request.URL.Redacted(), err)
	}
	return nil
}

// media starts the download of an object's bytes as stored, those of the
// range header's when it is not "".
func (s *gcsSource) media(ctx context.Context, rel, byteRange string) (*http.Response, error) {
	header := http.Header{"Accept-Encoding": {"identity"}}
	if byteRange != "" {
		header.Set("Range", byteRange)
	}
	resp, err := s.get(ctx, s.objectURL(s.key(rel), url.Values{"alt": {"media"}}), header, http.StatusOK, http.StatusPartialContent)
	if isGCSNotFound(err) {
		return nil, permanentf(servingv1alpha1.ReasonNotFound, "%s: the object does not exist", s.Describe(rel))
	}
	if err != nil {
		return nil, classify(err, s.Describe(rel))
	}
	// An object stored gzip-encoded is served decompressed, whole whatever
	// the range asked: neither its listed size nor its parts would be what
	// arrives.
	if enc := resp.Header.Get("X-Goog-Stored-Content-Encoding"); enc != "" && enc != "identity" {
		_ = resp.Body.Close()
		return nil, permanentf(servingv1alpha1.ReasonFetchFailed, "%s is stored with Content-Encoding %s; store the model's files without an encoding", s.Describe(rel), enc)
	}
	if byteRange != "" && resp.StatusCode != http.StatusPartialContent {
		_ = resp.Body.Close()
		return nil, transientf(servingv1alpha1.ReasonFetchFailed, "%s: HTTP %d to a request for %s; want 206 Partial Content", s.Describe(rel), resp.StatusCode, byteRange)
	}
	return resp, nil
}

func (s *gcsSource) Open(ctx context.Context, rel string) (io.ReadCloser, objectInfo, error) {
	resp, err := s.media(ctx, rel, "")
	if err != nil {
		return nil, objectInfo{}, err
	}
	return resp.Body, objectInfo{Size: resp.ContentLength, Version: resp.Header.Get("X-Goog-Generation")}, nil
}

func (s *gcsSource) OpenRange(ctx context.Context, rel string, offset, length int64) (io.ReadCloser, objectInfo, error) {
	resp, err := s.media(ctx, rel, fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	if err != nil {
		return nil, objectInfo{}, err
	}
	info := objectInfo{Size: -1, Version: resp.Header.Get("X-Goog-Generation")}
	// Content-Range: bytes first-last/size
	if _, size, ok := strings.Cut(resp.Header.Get("Content-Range"), "/"); ok {
		if n, err := strconv.ParseInt(size, 10, 64); err == nil {
			info.Size = n
		}
	}
	return resp.Body, info, nil
}

func (s *gcsSource) Close() error {
	s.client.CloseIdleConnections()
	return nil
}

// gcsStatusError is an unexpected status from Cloud Storage, with the
// message of its JSON error body when it has one.
func gcsStatusError(resp *http.Response, body []byte) *statusError {
	var parsed struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	e := newStatusError(resp)
	if json.Unmarshal(body, &parsed) == nil && parsed.Error.Message != "" {
		e.status += ": " + firstLineOf(parsed.Error.Message)
	}
	return e
}

func isGCSNotFound(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.code == http.StatusNotFound
}
