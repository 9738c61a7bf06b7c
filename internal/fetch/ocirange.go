package fetch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"golang.org/x/sync/semaphore"
)

// A large layer is downloaded as ranges, several at once, when the
// registry serves ranges of it: a registry, or the CDN it sends blob
// downloads to, gives each connection its share, and a model image's
// model is mostly one large layer. The ranges are handed on in order, so
// the layer still unpacks as one stream, and its sha256 is checked at its
// end as for one download. Ranges are an optimization only: a registry
// that answers the first range with anything but that range leaves the
// layer to the one download, whose failures are worded there.
//
// The downloads of one fetch share ociLayersAtOnce streams: a layer holds
// one, and its ranges take more only while they are free, so that files
// pulled at once are not slowed by one file's ranges. One layer at a time
// is ranged, which bounds the memory its ranges wait in to inOrderAhead
// parts (inorder.go).

// ociStreams bounds the downloads of one oci:// fetch.
type ociStreams struct {
	sem *semaphore.Weighted
	// ranging is held by the one layer whose ranges are downloading.
	ranging sync.Mutex
}

func newOCIStreams(n int) *ociStreams {
	return &ociStreams{sem: semaphore.NewWeighted(int64(max(n, 1)))}
}

// blobClient is an HTTP client for the model's repository's blobs, with
// its credentials (a token exchanged once, renewed when refused).
func (m *ociModel) blobClient(ctx context.Context) (*http.Client, error) {
	m.clientOnce.Do(func() {
		repo := m.ref.Context()
		auth, err := m.keys.Resolve(repo)
		if err != nil {
			m.clientErr = err
			return
		}
		rt, err := transport.NewWithContext(ctx, repo.Registry, auth, m.transport, []string{repo.Scope(transport.PullScope)})
		m.client, m.clientErr = &http.Client{Transport: rt}, err
	})
	return m.client, m.clientErr
}

// openRanged opens desc's blob as ranges, or returns nil when it is to be
// downloaded whole: too small, one stream allowed, another layer ranging,
// or a registry that does not serve the range asked.
func (f *fetcher) openRanged(ctx context.Context, desc v1.Descriptor, what string) io.ReadCloser {
	m := f.oci
	part := min(inOrderPartSize, f.o.partSize)
	if desc.Size < rangedMinParts*part || desc.Digest.Algorithm != "sha256" || f.o.Concurrency < 2 || !m.streams.ranging.TryLock() {
		return nil
	}
	ranged := false
	defer func() {
		if !ranged {
			m.streams.ranging.Unlock()
		}
	}()
	client, err := m.blobClient(ctx)
	if err != nil {
		f.log.Debug("layer downloaded whole: no client for ranges", "layer", what, "error", err.Error())
		return nil
	}
	// The client's transport sets the scheme its first request found the
	// registry answering (HTTPS, or plain HTTP where allowed).
	repo := m.ref.Context()
	url := fmt.Sprintf("%s://%s/v2/%s/blobs/%s", repo.Scheme(), repo.RegistryStr(), repo.RepositoryStr(), desc.Digest)
	first, err := askRange(ctx, client, url, 0, part)
	if err != nil {
		f.log.Debug("layer downloaded whole: the registry did not serve a range", "layer", what, "error", err.Error())
		return nil
	}
	ranged = true
	f.log.Info("downloading a layer in ranges", "layer", what, "parts", (desc.Size+part-1)/part, "partBytes", part)
	get := func(ctx context.Context, off, n int64) ([]byte, error) {
		if off == 0 {
			// The answer that showed ranges served: its body is the first
			// part, read while the next are asked for.
			if data, err := readPart(first, n); err == nil {
				return data, nil
			}
		}
		var data []byte
		err := f.retry.do(ctx, fmt.Sprintf("%s (bytes %d-%d)", what, off, off+n-1), func(ctx context.Context) error {
			var err error
			data, err = getRange(ctx, client, url, off, n)
			return err
		})
		return data, err
	}
	return readInOrder(ctx, desc.Size, part, desc.Digest.Hex, m.streams.sem, get, func() {
		_ = first.Body.Close() // when never read
		m.streams.ranging.Unlock()
	})
}

// getRange downloads bytes off to off+n-1 of a blob.
func getRange(ctx context.Context, client *http.Client, url string, off, n int64) ([]byte, error) {
	resp, err := askRange(ctx, client, url, off, n)
	if err != nil {
		return nil, err
	}
	return readPart(resp, n)
}

// askRange asks for bytes off to off+n-1 of a blob: only an answer of that
// range will do. The caller reads its body.
func askRange(ctx context.Context, client *http.Client, url string, off, n int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	req.Header.Set("User-Agent", "modelserver-fetch")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusPartialContent {
		_ = resp.Body.Close()
		return nil, newStatusError(resp)
	}
	if cr := resp.Header.Get("Content-Range"); !strings.HasPrefix(cr, fmt.Sprintf("bytes %d-%d/", off, off+n-1)) {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("asked for bytes %d-%d, the registry sent %q", off, off+n-1, cr)
	}
	return resp, nil
}

// readPart reads a range's n bytes and closes its body.
func readPart(resp *http.Response, n int64) ([]byte, error) {
	defer func() { _ = resp.Body.Close() }()
	data := make([]byte, n)
	if _, err := io.ReadFull(resp.Body, data); err != nil {
		return nil, err
	}
	return data, nil
}
