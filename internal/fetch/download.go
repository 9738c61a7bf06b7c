package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// fileRecord is one file of a fetched model: its path below the model's
// base directory, size and content digest, one of four (digest.go).
type fileRecord struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	// SHA256 is the file's sha256: every file's in format 1, a file's
	// below chunkedMinSize in format 2.
	SHA256 string `json:"sha256,omitempty"`
	// ChunkedSHA256 is the sha256 of the file's chunks' sha256 digests: a
	// file's of chunkedMinSize or more in format 2.
	ChunkedSHA256 string `json:"chunkedSha256,omitempty"`
	// BLAKE3 is the file's BLAKE3: a file's below chunkedMinSize in
	// format 3.
	BLAKE3 string `json:"blake3,omitempty"`
	// ChunkedBLAKE3 is the BLAKE3 of the file's chunks' BLAKE3 digests: a
	// file's of chunkedMinSize or more in format 3.
	ChunkedBLAKE3 string `json:"chunkedBlake3,omitempty"`
	// Source is the version the source listed the file with (Object.Version),
	// "" when it told none: a later fetch of the same URI takes a file
	// listed with the same path, size and version from here.
	Source string `json:"source,omitempty"`
	// ModTime is the file's modification time when its model was
	// published, in Unix nanoseconds (0: not recorded). A later fetch
	// that links the file takes its digests from this record, without
	// reading it again, while its size and modification time are still
	// these, as rsync's quick check does: a write to the file would have
	// changed the time.
	ModTime int64 `json:"modTime,omitempty"`
}

// content is the record without what it says of the file's history: what
// the file's bytes alone decide.
func (r fileRecord) content() fileRecord {
	r.Source, r.ModTime = "", 0
	return r
}

// downloader copies a source's files into a directory, several at once,
// each retried on its own, all within one byte cap. A large file, from a
// source that serves ranges, is downloaded as parts, several at once (see
// fetchRanged); concurrency bounds the requests in flight, of whole files
// and of parts together.
type downloader struct {
	src         Source
	dir         string
	retry       *retrier
	concurrency int
	maxBytes    int64
	used        atomic.Int64 // bytes written that count toward maxBytes
	stall       time.Duration
	prog        *progress
	// partSize is the size of a part of a ranged download (0: no ranged
	// downloads); a file of at least rangedMinParts parts is ranged.
	partSize int64
	// pin, when not empty, is the sha256 that a URI's #sha256 fragment
	// requires of the one file or archive the URI names.
	pin string
	// requests holds a token for each request in flight; nil until the
	// first download makes it, with room for concurrency tokens.
	requests     chan struct{}
	requestsOnce sync.Once
	// journal notes each file and part completed, nil if none is kept.
	journal *journal
	// partial are the parts a stopped fetch completed of files it had
	// begun as ranges, by path, linked into dir (earlier.linkPartial).
	partial map[string][]partRecord
	// single says the URI names one file; served is then the version of
	// the object its bytes were last read from (noteServed).
	single bool
	served atomic.Pointer[string]
}

// noteServed notes, for the one file the URI names, the version of the
// object an attempt at its download reads (its ranges all have the same):
// once the download succeeds, the last noted is that of its bytes.
func (d *downloader) noteServed(version string) {
	if d.single {
		d.served.Store(&version)
	}
}

// servedVersion is the version the one file the URI names was downloaded
// as, "" if the store did not say.
func (d *downloader) servedVersion() string {
	if v := d.served.Load(); v != nil {
		return *v
	}
	return ""
}

// DefaultPartSize is the size of a part of a large file downloaded as
// ranges. Large enough that a part's request costs little beside its
// transfer, small enough that a file of a few of them keeps every stream
// busy.
const DefaultPartSize int64 = 16 << 20

// rangedMinParts: a file of fewer parts is one request. Below it, the
// parallel downloads of other files keep the streams busy.
const rangedMinParts = 4

var (
	bufPool = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}
)

// fileWriteSize is the most a download hands the page cache in one
// write. Since Linux 6.16 ext4 caches a file in folios as large as the
// writes that fill it, and a large folio needs a free block of its size.
// Where such blocks are costly to get (the test VM reports free blocks to
// its host, virtio-balloon, and their pages fault back in on first touch),
// 1 GiB written 1 MiB at a time took 0.9-1.1 s of kernel time, 128 KiB at
// a time 0.2 s, and a 1 GiB fetch 0.9-1.6 s against 0.6 s
// (docs/performance.md, "The model fetch beside s5cmd and rclone").
const fileWriteSize = 128 << 10

// errStalled ends an attempt on which no byte arrived for too long.
var errStalled = errors.New("stalled")

// downloadAll downloads objs into d.dir with d.concurrency workers. The
// first failure stops the others; it is the error returned.
func (d *downloader) downloadAll(ctx context.Context, objs []Object) ([]fileRecord, error) {
	records := make([]fileRecord, len(objs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(d.concurrency, 1))
	for i := range objs {
		g.Go(func() error {
			rec, err := d.fetchFile(gctx, objs[i], filepath.FromSlash(objs[i].Key))
			if err != nil {
				return err
			}
			rec.Source = objs[i].Version
			records[i] = rec
			d.journal.add(rec)
			d.prog.files.Add(1)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, classify(err, "")
	}
	return records, nil
}

// fetchFile downloads one object to rel below d.dir, with retries: a
// large one as ranges (fetchRanged), each retried on its own; any other
// whole, retried whole.
func (d *downloader) fetchFile(ctx context.Context, obj Object, rel string) (fileRecord, error) {
	var (
		rec    fileRecord
		err    error
		target = filepath.Join(d.dir, rel)
	)
	if rs, ok := d.ranged(obj); ok {
		rec, err = d.fetchRanged(ctx, rs, obj, target)
	} else {
		err = d.retry.do(ctx, d.src.Describe(obj.Key), func(ctx context.Context) error {
			var err error
			rec, err = d.copyOnce(ctx, obj, target)
			return err
		})
	}
	rec.Path = filepath.ToSlash(rel)
	return rec, err
}

// ranged gives the source to download obj from as ranges, when it
// serves them and obj is large enough.
func (d *downloader) ranged(obj Object) (rangeSource, bool) {
	rs, ok := d.src.(rangeSource)
	return rs, ok && d.partSize > 0 && obj.Size >= rangedMinParts*d.partSize
}

// request takes a token for a request, waiting while concurrency of them
// are in flight; release gives it back.
func (d *downloader) request(ctx context.Context) (release func(), err error) {
	d.requestsOnce.Do(func() { d.requests = make(chan struct{}, max(d.concurrency, 1)) })
	select {
	case d.requests <- struct{}{}:
		return func() { <-d.requests }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// copyOnce is one attempt at downloading obj to target. The bytes of a
// failed attempt are taken back from the cap and the progress.
func (d *downloader) copyOnce(ctx context.Context, obj Object, target string) (rec fileRecord, err error) {
	what := d.src.Describe(obj.Key)
	release, err := d.request(ctx)
	if err != nil {
		return rec, classify(err, what)
	}
	defer release()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	body, info, err := d.src.Open(ctx, obj.Key)
	if err != nil {
		return rec, err
	}
	defer func() { _ = body.Close() }()
	if err := changedSinceListed(obj, info.Version, what); err != nil {
		return rec, err
	}
	d.noteServed(info.Version)
	size := info.Size
	if size >= 0 && obj.Size >= 0 && size != obj.Size {
		return rec, transientf(servingv1alpha1.ReasonFetchFailed, "%s: %d bytes listed but %d served; the object changed during the fetch", what, obj.Size, size)
	}
	if size > 0 && d.used.Load()+size > d.maxBytes {
		return rec, tooLarge(d.maxBytes)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return rec, pathConflict(err, what)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return rec, pathConflict(err, what)
	}
	var counted int64
	defer func() {
		if err != nil {
			_ = f.Close()
			d.used.Add(-counted)
			d.prog.bytes.Add(-counted)
		}
	}()
	known := obj.Size
	if known < 0 {
		known = size
	}
	sum := newContentHash(known, d.pin != "")
	if err := d.writeBody(ctx, cancel, body, f, capWriter{d: d, name: target, hash: sum, counted: &counted}, what); err != nil {
		return rec, err
	}
	if obj.Size >= 0 && counted != obj.Size {
		return rec, transientf(servingv1alpha1.ReasonFetchFailed, "%s: %d bytes listed but %d received", what, obj.Size, counted)
	}
	if size >= 0 && counted != size {
		return rec, transientf(servingv1alpha1.ReasonFetchFailed, "%s: %d bytes announced but %d received", what, size, counted)
	}
	// Not synced here: publish flushes the whole model at once, which for
	// many small files is far faster than a sync each. Writing starts now.
	startWriteBack(f, 0, 0)
	if err := f.Close(); err != nil {
		return rec, classify(err, target)
	}
	if d.pin != "" && sum.pinnedSHA256() != d.pin {
		return rec, checksumMismatch(what, d.pin, sum.pinnedSHA256())
	}
	return sum.record(counted), nil
}

// writeBody copies body to dst through w, which counts, caps and hashes.
// It fills a pooled 1 MiB buffer from the body before each write to w:
// eight system calls per MiB (fileWriteSize) rather than one per network
// read, and no second copy of the bytes. An attempt on which nothing
// arrives for d.stall is cancelled (through cancel) and fails as worth a
// retry.
func (d *downloader) writeBody(ctx context.Context, cancel context.CancelCauseFunc, body io.Reader, dst io.Writer, w capWriter, what string) error {
	w.w = dst
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	stall := d.stall
	if stall <= 0 {
		stall = 2 * time.Minute
	}
	watchdog := time.AfterFunc(stall, func() { cancel(errStalled) })
	defer watchdog.Stop()
	filled := 0
	for {
		n, rerr := body.Read(buf[filled:])
		if n > 0 {
			watchdog.Reset(stall)
			filled += n
		}
		if filled == len(buf) || (rerr == io.EOF && filled > 0) {
			if _, err := w.Write(buf[:filled]); err != nil {
				return err
			}
			filled = 0
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return d.failed(ctx, rerr, what, stall)
		}
		if err := ctx.Err(); err != nil {
			return d.failed(ctx, err, what, stall)
		}
	}
}

// failed is the error of an attempt whose read failed with err: a stall
// is worth a retry.
func (d *downloader) failed(ctx context.Context, err error, what string, stall time.Duration) error {
	if errors.Is(context.Cause(ctx), errStalled) {
		return transientf(servingv1alpha1.ReasonFetchFailed, "%s: no data received for %s", what, stall)
	}
	return classify(err, what)
}

// capWriter writes to a file, hashing (unless hash is nil), counting
// progress and holding the total to the downloader's cap.
type capWriter struct {
	d       *downloader
	w       io.Writer
	name    string
	hash    *contentHash
	counted *int64
}

func (w *capWriter) Write(p []byte) (int, error) {
	n := int64(len(p))
	*w.counted += n
	w.d.prog.bytes.Add(n)
	if w.d.used.Add(n) > w.d.maxBytes {
		return 0, tooLarge(w.d.maxBytes)
	}
	if w.hash != nil {
		_, _ = w.hash.Write(p) // a hash's Write never fails
	}
	for rest := p; len(rest) > 0; {
		n := min(len(rest), fileWriteSize)
		if _, err := w.w.Write(rest[:n]); err != nil {
			return 0, classify(err, w.name)
		}
		rest = rest[n:]
	}
	return len(p), nil
}

func tooLarge(limit int64) *Error {
	return permanentf(servingv1alpha1.ReasonTooLarge, "the model is larger than the limit of %s (spec.model.maxSizeBytes)", FormatBytes(limit))
}

// pathConflict maps a failure to create a file or its directories: a
// file of the model where another needs a directory is a layout error.
func pathConflict(err error, what string) error {
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EEXIST) {
		return permanentf(servingv1alpha1.ReasonInvalidLayout, "%s: a file and a directory of the model have the same path", what)
	}
	return classify(err, what)
}

// FormatBytes shows a size in the largest binary unit that keeps it at
// least 1 ("512 B", "1.5 MiB"), in the fetcher's messages and in the
// operator's Events about a fetched model alike.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
