package fetch

import (
	"context"
	"io"
	"net/http"
	"path"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// httpSource is one file at an http(s):// URL: a model archive, or a
// single file. Headers from the credentials Secret go with every request.
type httpSource struct {
	client *http.Client
	loc    storageuri.Location
	// part, when not 0, is the size of the parts a large file is read in,
	// several at once, when the server serves ranges (httprange.go), each
	// retried on its own by retry.
	part  int64
	retry *retrier
}

func newHTTPSource(loc storageuri.Location, creds Credentials, transport http.RoundTripper, part int64, retry *retrier) (Source, error) {
	headers, err := parseHeaders(creds.values[KeyHTTPHeaders])
	if err != nil {
		return nil, err
	}
	if len(headers) > 0 {
		transport = &headerTransport{base: transport, host: loc.URL.Host, headers: headers}
	}
	return &httpSource{client: &http.Client{Transport: transport}, loc: loc, part: part, retry: retry}, nil
}

func (s *httpSource) List(context.Context) (Listing, error) {
	return Listing{Single: true, Objects: []Object{{Key: path.Base(s.loc.URL.Path), Size: -1}}}, nil
}

func (s *httpSource) Open(ctx context.Context, _ string) (io.ReadCloser, objectInfo, error) {
	if s.part > 0 {
		body, size, err := s.openInParts(ctx)
		return body, objectInfo{Size: size}, err
	}
	resp, err := s.get(ctx, "")
	if err != nil {
		return nil, objectInfo{}, err
	}
	return resp.Body, objectInfo{Size: resp.ContentLength}, nil
}

// get asks for the file, or the range of it rng names ("" for all): an
// answer of 200 or 206, whose body the caller reads, or an error.
func (s *httpSource) get(ctx context.Context, rng string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.loc.URL.String(), nil)
	if err != nil {
		return nil, permanentf(servingv1alpha1.ReasonInvalidURI, "%s: %v", s.loc, err)
	}
	// The checksum and sizes are those of the bytes as stored.
	req.Header.Set("Accept-Encoding", "identity")
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, classify(err, s.loc.String())
	}
	if resp.StatusCode != http.StatusOK && (rng == "" || resp.StatusCode != http.StatusPartialContent) {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		return nil, classify(newStatusError(resp), s.loc.String())
	}
	return resp, nil
}

func (s *httpSource) Describe(string) string { return s.loc.String() }

func (s *httpSource) Close() error {
	s.client.CloseIdleConnections()
	return nil
}
