package fetch

import (
	"context"
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
// own: a broken connection costs one part, not the file. A file of
// chunkedMinSize or more is recorded by its chunks' digests (digest.go):
// each part hashes its chunks from the buffers its bytes arrive in. A
// smaller one (parts are small in tests), or a file whose sha256 a URI
// pins, needs its bytes hashed in order: that is done over the written
// prefix of the file as it grows, where it lies in the page cache, so
// memory stays a few buffers whatever the file's size. Every part must
// come from the same version of the object (its ETag, or GCS generation),
// so that a file replaced during the download is not stitched together
// from both.

// fetchRanged downloads obj to target as ranges.
func (d *downloader) fetchRanged(ctx context.Context, src rangeSource, obj Object, target string) (rec fileRecord, err error) {
	what := d.src.Describe(obj.Key)
	if d.used.Load()+obj.Size > d.maxBytes {
		return rec, tooLarge(d.maxBytes)
	}
	resume := d.partial[obj.Key]
	f, err := openRanged(target, obj.Size, len(resume) > 0, what)
	if err != nil {
		return rec, err
	}
	var counted atomic.Int64 // bytes of the parts written
	defer func() {
		if err != nil {
			_ = f.Close()
			d.used.Add(-counted.Load())
			d.prog.bytes.Add(-counted.Load())
		}
	}()

	parts := int((obj.Size + d.partSize - 1) / d.partSize)
	versions := make([]string, parts)
	var writing sync.Mutex
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	digest := d.newRangedDigest(ctx, f, obj.Size, parts)
	kept := d.keepParts(ctx, f, obj, resume, digest, versions, &counted)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(partsInFlight(d.concurrency, runtime.GOMAXPROCS(0)))
	for i := range parts {
		if gctx.Err() != nil {
			break // a part failed for good
		}
		if kept[i] {
			continue
		}
		off := int64(i) * d.partSize
		n := min(d.partSize, obj.Size-off)
		g.Go(func() error {
			part := fmt.Sprintf("%s (bytes %d-%d)", what, off, off+n-1)
			err := d.retry.do(gctx, part, func(ctx context.Context) error {
				var err error
				sums := digest.partHash()
				versions[i], err = d.copyPart(ctx, src, obj, &rangedFile{file: f, mu: &writing}, off, n, sums, part)
				if err == nil {
					digest.partWritten(i, off, sums)
					if sums != nil {
						d.journal.addPart(obj, versions[i], off, n, sums.chunkSums())
					}
				}
				return err
			})
			if err != nil {
				return err
			}
			counted.Add(n)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		cancel()
		digest.wait() //nolint:errcheck // the download's error is the one to report; the hasher only stops
		return rec, err
	}
	if err := digest.wait(); err != nil {
		return rec, classify(err, target)
	}
	for _, v := range versions {
		if v != versions[0] {
			return rec, transientf(servingv1alpha1.ReasonFetchFailed, "%s: the object changed during the fetch (its parts have versions %q and %q)", what, versions[0], v)
		}
	}
	d.noteServed(versions[0])
	if rec, err = digest.record(what); err != nil {
		return rec, err
	}
	if err := f.Close(); err != nil {
		return rec, classify(err, target)
	}
	return rec, nil
}

// openRanged opens the file of a ranged download, allocated to its size.
// A file a stopped fetch had begun (resumed), linked here, keeps its bytes
// until its parts are checked; any other is emptied.
func openRanged(target string, size int64, resumed bool, what string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return nil, pathConflict(err, what)
	}
	flags := os.O_CREATE | os.O_RDWR
	if !resumed {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(target, flags, 0o644)
	if err != nil {
		return nil, pathConflict(err, what)
	}
	if resumed {
		err = f.Truncate(size)
	}
	if err == nil {
		err = preallocate(f, size)
	}
	if err != nil {
		_ = f.Close()
		return nil, classify(err, target)
	}
	return f, nil
}

// keepParts takes the parts a stopped fetch completed of obj's file (its
// journal's parts, resume) that still hash to what it noted, where the
// file is recorded by its chunks' digests: each is counted as downloaded,
// its digests put in place, noted in this fetch's journal, and returned
// by index, not to be downloaded again.
func (d *downloader) keepParts(ctx context.Context, f *os.File, obj Object, resume []partRecord, digest *rangedDigest, versions []string, counted *atomic.Int64) map[int]bool {
	if len(resume) == 0 || digest.chunkSums == nil || digest.inOrder != nil {
		return nil
	}
	kept := map[int]bool{}
	for i, sums := range checkedParts(ctx, f, obj, resume, d.partSize) {
		off := int64(i) * d.partSize
		n := min(d.partSize, obj.Size-off)
		digest.chunkSums.put(off, sums)
		versions[i] = obj.Version
		counted.Add(n)
		d.used.Add(n)
		d.prog.bytes.Add(n)
		d.journal.addPart(obj, obj.Version, off, n, sums)
		kept[i] = true
	}
	return kept
}

// rangedDigest computes the record of a file downloaded as ranges, and
// checks the URI's pin, as its parts arrive.
type rangedDigest struct {
	size int64
	pin  string
	// chunkSums holds the digests of the file's chunks, each part's put in
	// place by the part (nil: the parts do not hash).
	chunkSums chunkTable
	// inOrder hashes the file in order, as its parts are written (nil: not
	// needed), told of each on written; its end is sent on hashed.
	inOrder *contentHash
	written chan int
	hashed  chan error
}

func (d *downloader) newRangedDigest(ctx context.Context, f *os.File, size int64, parts int) *rangedDigest {
	r := &rangedDigest{size: size, pin: d.pin, written: make(chan int, parts), hashed: make(chan error, 1)}
	if size >= chunkedMinSize && d.partSize%digestChunkSize == 0 {
		r.chunkSums = newChunkTable(size)
	}
	switch {
	case r.chunkSums == nil:
		r.inOrder = newContentHash(size, d.pin != "")
	case d.pin != "":
		r.inOrder = newPinHash()
	}
	if r.inOrder == nil {
		r.hashed <- nil
		return r
	}
	go func() { r.hashed <- hashInOrder(ctx, r.inOrder, f, size, d.partSize, r.written) }()
	return r
}

// partHash is what an attempt at a part hashes its bytes into (nil:
// nothing).
func (r *rangedDigest) partHash() *contentHash {
	if r.chunkSums == nil {
		return nil
	}
	return newChunksHash(manifestFormat)
}

// partWritten takes part i, at off, once written, with what it hashed.
func (r *rangedDigest) partWritten(i int, off int64, h *contentHash) {
	if h != nil {
		r.chunkSums.put(off, h.chunkSums())
	}
	if r.inOrder != nil {
		r.written <- i
	}
}

// wait waits for the hash in order, if any, to end.
func (r *rangedDigest) wait() error { return <-r.hashed }

// record is the file's record once every part is written and wait has
// returned.
func (r *rangedDigest) record(what string) (fileRecord, error) {
	if r.pin != "" && r.inOrder.pinnedSHA256() != r.pin {
		return fileRecord{}, checksumMismatch(what, r.pin, r.inOrder.pinnedSHA256())
	}
	if r.chunkSums != nil {
		return recordOf(manifestFormat, r.size, "", r.chunkSums), nil
	}
	return r.inOrder.record(r.size), nil
}

// partsInFlight is how many parts of one file are downloaded at once: as
// many as the requests allowed, but at most four for each CPU the fetch may
// use (GOMAXPROCS follows the container's CPU limit). Every byte of a part
// is copied and hashed on those CPUs; past that, more parts contend for
// them rather than add to the throughput. On 2 CPUs, a 1 GiB file took
// 2.35-2.52 s and 2.0-2.2 CPU-s with 8 parts at once, 2.8-3.1 s and
// 3.5-3.7 CPU-s with 16 (docs/performance.md).
func partsInFlight(requests, cpus int) int {
	return max(1, min(requests, 4*cpus))
}

// copyPart is one attempt at downloading the n bytes of obj at off into f,
// hashing them into sums unless it is nil. It returns the version of the
// object they came from. The bytes of a failed attempt are taken back from
// the cap and the progress.
func (d *downloader) copyPart(ctx context.Context, src rangeSource, obj Object, f *rangedFile, off, n int64, sums *contentHash, what string) (version string, err error) {
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
	if err := sizeChanged(obj, info, what); err != nil {
		return "", err
	}
	if err := changedSinceListed(obj, info.Version, what); err != nil {
		return "", err
	}
	var counted int64
	defer func() {
		if err != nil {
			d.used.Add(-counted)
			d.prog.bytes.Add(-counted)
		}
	}()
	w := capWriter{d: d, name: f.file.Name(), hash: sums, counted: &counted}
	if err := d.writeBody(ctx, cancel, io.LimitReader(body, n+1), io.NewOffsetWriter(f, off), w, what); err != nil {
		return "", err
	}
	if counted != n {
		return "", transientf(servingv1alpha1.ReasonFetchFailed, "%s: %d bytes asked for but %d received", what, n, counted)
	}
	startWriteBack(f.file, off, n)
	return info.Version, nil
}

// sizeChanged fails a range of an object whose size is no longer the one
// listed: it was replaced during the fetch.
func sizeChanged(obj Object, info objectInfo, what string) error {
	if info.Size >= 0 && info.Size != obj.Size {
		return transientf(servingv1alpha1.ReasonFetchFailed, "%s: %d bytes listed but the object has %d; the object changed during the fetch", what, obj.Size, info.Size)
	}
	return nil
}

// hashInOrder hashes into h the size bytes of f, whose parts of partSize
// bytes are written in any order, each index sent on written once it is.
// It hashes each part once every part before it is hashed.
func hashInOrder(ctx context.Context, h io.Writer, f *os.File, size, partSize int64, written <-chan int) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	parts := int((size + partSize - 1) / partSize)
	ready := make([]bool, parts)
	for next := 0; next < parts; {
		select {
		case i := <-written:
			ready[i] = true
		case <-ctx.Done():
			return ctx.Err()
		}
		for ; next < parts && ready[next]; next++ {
			off := int64(next) * partSize
			n := min(partSize, size-off)
			if err := hashFileRange(h, f, off, n, *bp); err != nil {
				return err
			}
		}
	}
	return nil
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
