package fetch

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"

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
	// first is the answer to the ask for the file's first kilobyte, once
	// made (firstKilobyte).
	first *firstKilobyte
}

// firstKilobyte is what a server's answer to the ask for a file's first
// kilobyte says of the file.
type firstKilobyte struct {
	head        []byte
	disposition string
	// etag is its strong ETag, "" if none (strongETag).
	etag string
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

// List is the one file the URL names. A URL that does not name an archive
// (Kaggle's and TF Hub's model downloads end in /download or a version
// number) is asked for its first bytes: the archive's name in the answer's
// Content-Disposition, or else its format by its magic bytes, tells how to
// extract it.
func (s *httpSource) List(ctx context.Context) (Listing, error) {
	key := path.Base(s.loc.URL.Path)
	if archiveKindOf(key) == archiveNone {
		first, err := s.firstKilobyte(ctx)
		if err != nil {
			return Listing{}, err
		}
		key = archiveName(key, first.disposition, first.head)
	}
	return Listing{Single: true, Objects: []Object{{Key: key, Size: -1}}}, nil
}

// firstKilobyte asks for the file's first kilobyte, once: List reads the
// archive's name or format from it, takeUnchangedArchive its ETag.
func (s *httpSource) firstKilobyte(ctx context.Context) (*firstKilobyte, error) {
	if s.first != nil {
		return s.first, nil
	}
	resp, err := s.get(ctx, "bytes=0-1023")
	if err != nil {
		return nil, err
	}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_ = resp.Body.Close()
	s.first = &firstKilobyte{head: head, disposition: resp.Header.Get("Content-Disposition"), etag: strongETag(resp)}
	return s.first, nil
}

// archiveName is the name of a download the URL calls name: the
// archive's name the server gave in its Content-Disposition, or name with
// the suffix of the archive format head begins with; name if neither.
func archiveName(name, disposition string, head []byte) string {
	if _, params, err := mime.ParseMediaType(disposition); err == nil {
		if given := path.Base(strings.ReplaceAll(params["filename"], "\\", "/")); archiveKindOf(given) != archiveNone && storageuri.SafeRelPath(given) {
			return given
		}
	}
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return name + ".tar.gz"
	case bytes.HasPrefix(head, []byte("PK\x03\x04")):
		return name + ".zip"
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return name + ".tar"
	}
	return name
}

func (s *httpSource) Open(ctx context.Context, _ string) (io.ReadCloser, objectInfo, error) {
	if s.part > 0 {
		body, size, etag, err := s.openInParts(ctx)
		return body, objectInfo{Size: size, Version: etag}, err
	}
	resp, err := s.get(ctx, "")
	if err != nil {
		return nil, objectInfo{}, err
	}
	// A weak ETag names no bytes: the answer's version is then unknown.
	return resp.Body, objectInfo{Size: resp.ContentLength, Version: strongETag(resp)}, nil
}

// strongETag is the answer's ETag if it is a strong one, which names the
// bytes; "" for a weak one (W/"..."), which may name others as well.
func strongETag(resp *http.Response) string {
	etag := resp.Header.Get("ETag")
	if strings.HasPrefix(etag, "W/") {
		return ""
	}
	return etag
}

// get asks for the file, or the range of it rng names ("" for all): an
// answer of 200 or 206, whose body the caller reads, or an error.
func (s *httpSource) get(ctx context.Context, rng string) (*http.Response, error) {
	what := s.loc.String()
	return getFile(ctx, s.client, s.loc.URL.String(), rng, what, func(resp *http.Response) error {
		return classify(newStatusError(resp), what)
	})
}

// getFile asks client for target, or the range of it rng names ("" for
// all), as stored: an answer of 200, or 206 to a range, whose body the
// caller reads, or an error naming what. Another answer is drained, and
// refused words its error.
func getFile(ctx context.Context, client *http.Client, target, rng, what string, refused func(*http.Response) error) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, permanentf(servingv1alpha1.ReasonInvalidURI, "%s: %v", what, err)
	}
	// The checksum and sizes are those of the bytes as stored.
	req.Header.Set("Accept-Encoding", "identity")
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, classify(err, what)
	}
	if resp.StatusCode != http.StatusOK && (rng == "" || resp.StatusCode != http.StatusPartialContent) {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		return nil, refused(resp)
	}
	return resp, nil
}

func (s *httpSource) Describe(string) string { return s.loc.String() }

func (s *httpSource) Close() error {
	s.client.CloseIdleConnections()
	return nil
}
