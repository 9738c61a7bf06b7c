package fetch

import (
	"context"
	"fmt"
	"io"
	"net/http"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// openInParts asks for the file's first part. A server that serves ranges
// answers with it and the file's size: a file larger than the part is read
// as parts several at once, handed on in order (inorder.go), each of the
// version the first named (its ETag, else its Last-Modified), each
// retried on its own. A server
// that does not answers with the whole file, which is read as it comes: a
// Range asked costs nothing there.
func (s *httpSource) openInParts(ctx context.Context) (_ io.ReadCloser, size int64, etag string, _ error) {
	first, err := s.get(ctx, fmt.Sprintf("bytes=0-%d", s.part-1))
	if err != nil {
		return nil, 0, "", err
	}
	if first.StatusCode == http.StatusOK {
		return first.Body, first.ContentLength, strongETag(first), nil
	}
	from, to, size, ok := contentRange(first)
	if !ok || from != 0 || to != min(s.part, size)-1 {
		// Not the range asked, or of a size not told: the whole, then.
		_ = first.Body.Close()
		resp, err := s.get(ctx, "")
		if err != nil {
			return nil, 0, "", err
		}
		return resp.Body, resp.ContentLength, strongETag(resp), nil
	}
	if size <= s.part {
		return first.Body, size, strongETag(first), nil
	}
	version := versionOf(first)
	get := func(ctx context.Context, off, n int64) ([]byte, error) {
		if off == 0 {
			return readPart(first, n)
		}
		var (
			data []byte
			v    string
		)
		rng := fmt.Sprintf("bytes=%d-%d", off, off+n-1)
		err := s.retry.do(ctx, fmt.Sprintf("%s (%s)", s.loc, rng), func(ctx context.Context) error {
			resp, err := s.get(ctx, rng)
			if err != nil {
				return err
			}
			if v = versionOf(resp); resp.StatusCode != http.StatusPartialContent {
				v = "the whole file, not a range"
			}
			if v != version {
				_ = resp.Body.Close()
				return nil // the attempt fails for it, not this part
			}
			data, err = readPart(resp, n)
			return err
		})
		switch {
		case err != nil:
			return nil, err
		case v != version:
			return nil, transientf(servingv1alpha1.ReasonFetchFailed, "%s: the file changed during the fetch (%s, then %s)", s.loc, version, v)
		}
		return data, nil
	}
	// Every part is of the first's version: where that is a strong ETag,
	// it names the whole.
	return readInOrder(ctx, size, s.part, "", nil, get, func() { _ = first.Body.Close() }), size, strongETag(first), nil
}

// contentRange reads a 206 answer's Content-Range, bytes from-to/size;
// false if it says otherwise (a size not told, */size).
func contentRange(resp *http.Response) (from, to, size int64, ok bool) {
	_, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/%d", &from, &to, &size)
	return from, to, size, err == nil
}

// versionOf is what names the content of a server's answer: its ETag,
// else its Last-Modified; "" when it names none.
func versionOf(resp *http.Response) string {
	if etag := resp.Header.Get("ETag"); etag != "" {
		return etag
	}
	return resp.Header.Get("Last-Modified")
}
