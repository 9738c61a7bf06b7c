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
}

func newHTTPSource(loc storageuri.Location, creds Credentials, transport http.RoundTripper) (Source, error) {
	headers, err := parseHeaders(creds.values[KeyHTTPHeaders])
	if err != nil {
		return nil, err
	}
	if len(headers) > 0 {
		transport = &headerTransport{base: transport, headers: headers}
	}
	return &httpSource{client: &http.Client{Transport: transport}, loc: loc}, nil
}

func (s *httpSource) List(context.Context) (Listing, error) {
	return Listing{Single: true, Objects: []Object{{Key: path.Base(s.loc.URL.Path), Size: -1}}}, nil
}

func (s *httpSource) Open(ctx context.Context, _ string) (io.ReadCloser, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.loc.URL.String(), nil)
	if err != nil {
		return nil, 0, permanentf(servingv1alpha1.ReasonInvalidURI, "%s: %v", s.loc, err)
	}
	// The checksum and sizes are those of the bytes as stored.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, 0, classify(err, s.loc.String())
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		return nil, 0, classify(&statusError{code: resp.StatusCode, status: resp.Status}, s.loc.String())
	}
	return resp.Body, resp.ContentLength, nil
}

func (s *httpSource) Describe(string) string { return s.loc.String() }

func (s *httpSource) Close() error {
	s.client.CloseIdleConnections()
	return nil
}
