package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// A large file is downloaded as parts of d.partSize bytes, several at once
// (as many as the requests the downloader allows), each written in place
// into the file, allocated to its full size first, and each retried on its
// own: a broken connection costs one part, not the file. The file's sha256
// needs its bytes in order, so it is computed over the written prefix of
// the file as it grows, where it lies in the page cache: memory stays a
// few buffers whatever the file's size. Every part must come from the same
// version of the object (its ETag, or GCS generation), so that a file
// replaced during the download is not stitched together from both.

// fetchRanged downloads obj to target as ranges.
func (d *downloader) fetchRanged(ctx context.Context, src rangeSource, obj Object, target string) (rec fileRecord, err error) {
	what := d.src.Describe(obj.Key)
	if d.used.Load()+obj.Size > d.maxBytes {
		return rec, tooLarge(d.maxBytes)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return rec, pathConflict(err, what)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return rec, pathConflict(err, what)
	}
	var counted atomic.Int64 // bytes of the parts written
	defer func() {
		if err != nil {
			_ = f.Close()
			d.used.Add(-counted.Load())
			d.prog.bytes.Add(-counted.Load())
		}
	}()
	if err := preallocate(f, obj.Size); err != nil {
		return rec, classify(err, target)
	}

	parts := int((obj.Size + d.partSize - 1) / d.partSize)
	versions := make([]string, parts)
	var writing sync.Mutex
	written := make(chan int, parts)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hashed := make(chan error, 1)
	go func() {
		var err error
		rec.SHA256, err = hashInOrder(ctx, f, obj.Size, d.partSize, written)
		hashed <- err
	}()

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(partsInFlight(d.concurrency, runtime.GOMAXPROCS(0)))
	for i := range parts {
		if gctx.Err() != nil {
			break // a part failed for good
		}
		off := int64(i) * d.partSize
		n := min(d.partSize, obj.Size-off)
		g.Go(func() error {
			part := fmt.Sprintf("%s (bytes %d-%d)", what, off, off+n-1)
			err := d.retry.do(gctx, part, func(ctx context.Context) error {
				var err error
				versions[i], err = d.copyPart(ctx, src, obj, &rangedFile{file: f, mu: &writing}, off, n, part)
				return err
			})
			if err != nil {
				return err
			}
			counted.Add(n)
			written <- i
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		cancel()
		<-hashed //nolint:errcheck // the download's error is the one to report; the hasher only stops
		return rec, err
	}
	if err := <-hashed; err != nil {
		return rec, classify(err, target)
	}
	for _, v := range versions {
		if v != versions[0] {
			return rec, transientf(servingv1alpha1.ReasonFetchFailed, "%s: the object changed during the fetch (its parts have versions %q and %q)", what, versions[0], v)
		}
	}
	if err := f.Close(); err != nil {
		return rec, classify(err, target)
	}
	rec.Size = obj.Size
	return rec, nil
}

// partsInFlight is how many parts of one file are downloaded at once: as
// many as the requests allowed, but at most four for each CPU the fetch may
// use (GOMAXPROCS follows the container's CPU limit). Every byte of a part
// is copied, and then hashed, on those CPUs; past that, more parts contend
// for them rather than add to the throughput. On 2 CPUs, a 1 GiB file took
// 2.35-2.52 s and 2.0-2.2 CPU-s with 8 parts at once, 2.8-3.1 s and
// 3.5-3.7 CPU-s with 16 (docs/performance.md).
func partsInFlight(requests, cpus int) int {
	return max(1, min(requests, 4*cpus))
}

// copyPart is one attempt at downloading the n bytes of obj at off into f.
// It returns the version of the object they came from. The bytes of a
// failed attempt are taken back from the cap and the progress.
func (d *downloader) copyPart(ctx context.Context, src rangeSource, obj Object, f *rangedFile, off, n int64, what string) (version string, err error) {
	release, err := d.request(ctx)
	if err != nil {
		return "", classify(err, what)
	}
	defer release()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	body, info, err := src.OpenRange(ctx, obj.Key, off, n)
	if err != nil {
		return "", err
	}
	defer func() { _ = body.Close() }()
	if info.Size >= 0 && info.Size != obj.Size {
		return "", transientf(servingv1alpha1.ReasonFetchFailed, "%s: %d bytes listed but the object has %d; the object changed during the fetch", what, obj.Size, info.Size)
	}
	var counted int64
	defer func() {
		if err != nil {
			d.used.Add(-counted)
			d.prog.bytes.Add(-counted)
		}
	}()
	w := capWriter{d: d, name: f.file.Name(), counted: &counted}
	if err := d.writeBody(ctx, cancel, io.LimitReader(body, n+1), io.NewOffsetWriter(f, off), w, what); err != nil {
		return "", err
	}
	if counted != n {
		return "", transientf(servingv1alpha1.ReasonFetchFailed, "%s: %d bytes asked for but %d received", what, n, counted)
	}
	startWriteBack(f.file, off, n)
	return info.Version, nil
}

// hashInOrder returns the sha256 of the size bytes of f, whose parts of
// partSize bytes are written in any order, each index sent on written once
// it is. It hashes each part once every part before it is hashed.
func hashInOrder(ctx context.Context, f *os.File, size, partSize int64, written <-chan int) (string, error) {
	h := sha256.New()
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	parts := int((size + partSize - 1) / partSize)
	ready := make([]bool, parts)
	for next := 0; next < parts; {
		select {
		case i := <-written:
			ready[i] = true
		case <-ctx.Done():
			return "", ctx.Err()
		}
		for ; next < parts && ready[next]; next++ {
			off := int64(next) * partSize
			n := min(partSize, size-off)
			if err := hashFileRange(h, f, off, n, *bp); err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readFileRange copies the n bytes of f at off to w through buf.
func readFileRange(w io.Writer, f *os.File, off, n int64, buf []byte) error {
	got, err := io.CopyBuffer(w, io.NewSectionReader(f, off, n), buf)
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("read back %d bytes of %d at %d", got, n, off)
	}
	return nil
}

// rangedFile is the file of a ranged download, written by one part at a
// time: parallel writes to one file queue on its inode's lock in the
// kernel, where on a machine of few cores their spinning costs more than
// taking turns.
type rangedFile struct {
	file *os.File
	mu   *sync.Mutex
}

func (f *rangedFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.file.WriteAt(p, off)
}
