package fetch

import (
	"context"
	"fmt"
	"io"
	"sync"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// openArchive opens a tar archive as one stream: a large one from a store
// that serves ranges as parts, several at once, handed on in order
// (inorder.go); any other as one download. size is -1 when not known.
func (d *downloader) openArchive(ctx context.Context, obj Object) (io.ReadCloser, int64, error) {
	rs, ok := d.ranged(obj)
	if !ok || d.concurrency < 2 {
		body, info, err := d.src.Open(ctx, obj.Key)
		if err == nil {
			d.noteServed(info.Version)
		}
		return body, info.Size, err
	}
	what := d.src.Describe(obj.Key)
	part := min(inOrderPartSize, d.partSize)
	// Every part must come from the same version of the object, so that
	// an archive replaced during the download is not stitched together
	// from both: then the attempt fails, and the next starts anew.
	var (
		mu      sync.Mutex
		version string
		seen    bool
	)
	sameVersion := func(v string) error {
		mu.Lock()
		defer mu.Unlock()
		if !seen {
			version, seen = v, true
			d.noteServed(v)
		}
		if v != version {
			return transientf(servingv1alpha1.ReasonFetchFailed, "%s: the object changed during the fetch (version %q, then %q)", what, version, v)
		}
		return nil
	}
	get := func(ctx context.Context, off, n int64) ([]byte, error) {
		var (
			data []byte
			v    string
		)
		err := d.retry.do(ctx, fmt.Sprintf("%s (bytes %d-%d)", what, off, off+n-1), func(ctx context.Context) error {
			var err error
			data, v, err = readRange(ctx, rs, obj, off, n, what)
			return err
		})
		if err != nil {
			return nil, err
		}
		return data, sameVersion(v)
	}
	d.retry.log.Info("downloading an archive in ranges", "archive", what, "parts", (obj.Size+part-1)/part, "partBytes", part)
	// A pinned sha256 is checked by the caller, over the bytes read.
	return readInOrder(ctx, obj.Size, part, "", nil, get, func() {}), obj.Size, nil
}

// readRange reads the n bytes of obj from off, and the version they are of.
func readRange(ctx context.Context, rs rangeSource, obj Object, off, n int64, what string) ([]byte, string, error) {
	body, info, err := rs.OpenRange(ctx, obj.Key, off, n)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = body.Close() }()
	if err := sizeChanged(obj, info, what); err != nil {
		return nil, "", err
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(body, data); err != nil {
		return nil, "", err
	}
	return data, info.Version, nil
}
