package fetch

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// archiveKind is the format of a model archive, told by its name.
type archiveKind string

const (
	archiveNone  archiveKind = ""
	archiveTar   archiveKind = "tar"
	archiveTarGz archiveKind = "tar.gz"
	archiveZip   archiveKind = "zip"
)

func archiveKindOf(name string) archiveKind {
	n := strings.ToLower(name)
	switch {
	case strings.HasSuffix(n, ".tar.gz"), strings.HasSuffix(n, ".tgz"):
		return archiveTarGz
	case strings.HasSuffix(n, ".tar"):
		return archiveTar
	case strings.HasSuffix(n, ".zip"):
		return archiveZip
	}
	return archiveNone
}

// extractor writes the entries of an archive below dir, refusing any that
// could land outside it or are not plain files and directories: absolute
// paths, ".." segments, symbolic and hard links (all of them, wherever
// they point), devices and FIFOs. It holds the extracted bytes and the
// number of files to their caps as it goes.
type extractor struct {
	dir      string
	maxBytes int64
	maxFiles int
	bytes    int64
	records  map[string]fileRecord
	prog     *progress
}

func newExtractor(dir string, maxBytes int64, maxFiles int, prog *progress) *extractor {
	return &extractor{dir: dir, maxBytes: maxBytes, maxFiles: maxFiles, records: map[string]fileRecord{}, prog: prog}
}

// entryPath checks an archive entry's name and returns it as a path below
// the extraction directory; "" is the directory itself.
func entryPath(name string) (string, error) {
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) {
		return "", permanentf(servingv1alpha1.ReasonInvalidLayout, "archive entry %q has an absolute path", name)
	}
	if strings.ContainsRune(name, '\\') || strings.ContainsRune(name, 0) {
		return "", permanentf(servingv1alpha1.ReasonInvalidLayout, "archive entry %q has a backslash or NUL in its name", name)
	}
	var segs []string
	for _, s := range strings.Split(name, "/") {
		switch s {
		case "", ".":
		case "..":
			return "", permanentf(servingv1alpha1.ReasonInvalidLayout, "archive entry %q has a \"..\" path segment", name)
		default:
			segs = append(segs, s)
		}
	}
	return strings.Join(segs, "/"), nil
}

func (x *extractor) dirEntry(name string) error {
	rel, err := entryPath(name)
	if err != nil || rel == "" {
		return err
	}
	if err := os.MkdirAll(filepath.Join(x.dir, filepath.FromSlash(rel)), 0o755); err != nil {
		return pathConflict(err, "archive entry "+name)
	}
	return nil
}

// fileEntry writes a regular file of size bytes (-1: unknown) from r.
func (x *extractor) fileEntry(name string, size int64, r io.Reader) error {
	rel, err := entryPath(name)
	if err != nil {
		return err
	}
	if rel == "" {
		return permanentf(servingv1alpha1.ReasonInvalidLayout, "archive entry %q is a file without a name", name)
	}
	if _, seen := x.records[rel]; !seen && len(x.records) >= x.maxFiles {
		return permanentf(servingv1alpha1.ReasonTooLarge, "the archive holds more than %d files", x.maxFiles)
	}
	if size > 0 && x.bytes+size > x.maxBytes {
		return tooLarge(x.maxBytes)
	}
	target := filepath.Join(x.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return pathConflict(err, "archive entry "+name)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return pathConflict(err, "archive entry "+name)
	}
	defer func() { _ = f.Close() }()
	h := newContentHash(size, false)
	// One byte past the cap tells that the entry is over it.
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, x.maxBytes-x.bytes+1))
	x.bytes += n
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			return fe
		}
		if isWriteError(err) {
			return classify(err, target)
		}
		return err // the archive's reader: the caller tells corruption from the network
	}
	if x.bytes > x.maxBytes {
		return tooLarge(x.maxBytes)
	}
	if size >= 0 && n != size {
		return permanentf(servingv1alpha1.ReasonInvalidLayout, "archive entry %q holds %d bytes, not the %d its header says", name, n, size)
	}
	// Not synced here: publish flushes the whole model at once.
	if err := f.Close(); err != nil {
		return classify(err, target)
	}
	rec := h.record(n)
	rec.Path = rel
	if _, seen := x.records[rel]; !seen {
		// Added, not set: extractors pulling at once share the count.
		x.prog.files.Add(1)
	}
	x.records[rel] = rec
	return nil
}

// isWriteError tells a failure to write the extracted file (a full disk)
// from a failure to read the archive.
func isWriteError(err error) bool {
	var pe *os.PathError
	return errors.As(err, &pe) && (pe.Op == "write" || pe.Op == "sync" || pe.Op == "close")
}

func (x *extractor) list() []fileRecord {
	out := make([]fileRecord, 0, len(x.records))
	for _, r := range x.records {
		out = append(out, r)
	}
	return out
}

// untar extracts a tar stream.
func (x *extractor) untar(r io.Reader) error { return x.untarFiltered(r, nil) }

// entryFilter decides what becomes of a tar entry: the name it is written
// under, or keep false to skip it. It may act on the entry itself: an
// image layer's whiteout removes what lower layers wrote.
type entryFilter func(hdr *tar.Header) (name string, keep bool, err error)

// untarFiltered extracts a tar stream, each entry as filter says (nil:
// every entry under its own name).
func (x *extractor) untarFiltered(r io.Reader, filter entryFilter) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if filter != nil {
			name, keep, err := filter(hdr)
			if err != nil {
				return err
			}
			if !keep {
				continue
			}
			hdr.Name = name
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = x.dirEntry(hdr.Name)
		case tar.TypeReg: // the reader reports an old archive's TypeRegA files as TypeReg
			err = x.fileEntry(hdr.Name, hdr.Size, tr)
		case tar.TypeSymlink, tar.TypeLink:
			err = permanentf(servingv1alpha1.ReasonInvalidLayout, "archive entry %q is a link; links are not supported in model archives", hdr.Name)
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			err = permanentf(servingv1alpha1.ReasonInvalidLayout, "archive entry %q is a device or FIFO", hdr.Name)
		case tar.TypeXGlobalHeader:
		default:
			err = permanentf(servingv1alpha1.ReasonInvalidLayout, "archive entry %q has an unsupported type %q", hdr.Name, string(hdr.Typeflag))
		}
		if err != nil {
			return err
		}
	}
}

// unzip extracts a zip file.
func (x *extractor) unzip(ra io.ReaderAt, size int64) error {
	zr, err := zip.NewReader(ra, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return err
	}
	if len(zr.File) > x.maxFiles {
		return permanentf(servingv1alpha1.ReasonTooLarge, "the archive holds more than %d files", x.maxFiles)
	}
	for _, f := range zr.File {
		mode := f.Mode()
		switch {
		case mode&os.ModeSymlink != 0:
			return permanentf(servingv1alpha1.ReasonInvalidLayout, "archive entry %q is a link; links are not supported in model archives", f.Name)
		case mode.IsDir() || strings.HasSuffix(f.Name, "/"):
			if err := x.dirEntry(f.Name); err != nil {
				return err
			}
		case mode.IsRegular():
			if f.UncompressedSize64 > uint64(x.maxBytes) {
				return tooLarge(x.maxBytes)
			}
			rc, err := f.Open()
			if err != nil {
				return err
			}
			err = x.fileEntry(f.Name, int64(f.UncompressedSize64), rc)
			_ = rc.Close()
			if err != nil {
				return err
			}
		default:
			return permanentf(servingv1alpha1.ReasonInvalidLayout, "archive entry %q is a device, FIFO or socket", f.Name)
		}
	}
	return nil
}

// bodyReader reads a download, hashing (when sha is not nil) and counting
// it, remembering the first error of the transport (as opposed to the
// archive's format), and cancelling the attempt (through cancel) when
// nothing arrives for stall.
type bodyReader struct {
	r        io.Reader
	sha      hash.Hash
	n        int64
	err      error
	prog     *progress
	limit    int64
	watchdog *time.Timer
	stall    time.Duration
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.watchdog.Reset(b.stall)
		if b.sha != nil {
			b.sha.Write(p[:n])
		}
		b.n += int64(n)
		b.prog.bytes.Add(int64(n))
		if b.n > b.limit {
			return n, tooLarge(b.limit)
		}
	}
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

// fetchArchive downloads an archive and extracts it into d.dir, retrying
// the whole on a transient failure. A tar stream is extracted as it
// arrives; a zip file, which is read from its end, is first downloaded
// beside d.dir. d.pin, when not empty, pins the archive's sha256.
func (d *downloader) fetchArchive(ctx context.Context, obj Object, kind archiveKind, maxFiles int) ([]fileRecord, error) {
	var records []fileRecord
	err := d.retry.do(ctx, d.src.Describe(obj.Key), func(ctx context.Context) error {
		if err := emptyDir(d.dir); err != nil {
			return classify(err, d.dir)
		}
		d.prog.bytes.Store(0)
		d.prog.files.Store(0)
		x := newExtractor(d.dir, d.maxBytes, maxFiles, d.prog)
		var err error
		if kind == archiveZip {
			err = d.unzipOnce(ctx, obj, x)
		} else {
			err = d.untarOnce(ctx, obj, kind, x)
		}
		records = x.list()
		return err
	})
	return records, err
}

func (d *downloader) untarOnce(ctx context.Context, obj Object, kind archiveKind, x *extractor) error {
	what := d.src.Describe(obj.Key)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	body, size, err := d.openArchive(ctx, obj)
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	if size > d.maxBytes {
		return tooLarge(d.maxBytes)
	}
	stall := d.stallTimeout()
	br := &bodyReader{r: body, sha: sha256.New(), prog: d.prog, limit: d.maxBytes, stall: stall,
		watchdog: time.AfterFunc(stall, func() { cancel(errStalled) })}
	defer br.watchdog.Stop()

	// failed tells a broken download (worth a retry) from a broken archive.
	failed := func(err error) error {
		var fe *Error
		switch {
		case errors.As(err, &fe):
			return fe
		case errors.Is(context.Cause(ctx), errStalled):
			return transientf(servingv1alpha1.ReasonFetchFailed, "%s: no data received for %s", what, stall)
		case br.err != nil:
			return classify(br.err, what)
		}
		return permanentf(servingv1alpha1.ReasonInvalidLayout, "%s is not a valid %s archive: %v", what, kind, err)
	}
	var r io.Reader = br
	if kind == archiveTarGz {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return failed(err)
		}
		defer func() { _ = gz.Close() }()
		r = gz
	}
	if err := x.untar(r); err != nil {
		return failed(err)
	}
	// The checksum covers every byte: read what follows the tar's end.
	if _, err := io.Copy(io.Discard, br); err != nil {
		return failed(err)
	}
	if size >= 0 && br.n != size {
		return transientf(servingv1alpha1.ReasonFetchFailed, "%s: %d bytes announced but %d received", what, size, br.n)
	}
	return checkPinned(what, d.pin, br.sha)
}

func (d *downloader) unzipOnce(ctx context.Context, obj Object, x *extractor) error {
	what := d.src.Describe(obj.Key)
	tmp := d.dir + ".download"
	defer func() { _ = os.Remove(tmp) }()
	d.used.Store(0)
	var rec fileRecord
	var err error
	if rs, ok := d.ranged(obj); ok {
		rec, err = d.fetchRanged(ctx, rs, obj, tmp) // checks d.pin
	} else {
		rec, err = d.copyOnce(ctx, obj, tmp) // checks d.pin
	}
	if err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err != nil {
		return classify(err, tmp)
	}
	defer func() { _ = f.Close() }()
	if err := x.unzip(f, rec.Size); err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			return fe
		}
		return permanentf(servingv1alpha1.ReasonInvalidLayout, "%s is not a valid zip archive: %v", what, err)
	}
	return nil
}

func (d *downloader) stallTimeout() time.Duration {
	if d.stall <= 0 {
		return 2 * time.Minute
	}
	return d.stall
}

func checkPinned(what, want string, h hash.Hash) error {
	if want == "" {
		return nil
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return checksumMismatch(what, want, got)
	}
	return nil
}

func checksumMismatch(what, want, got string) *Error {
	return permanentf(servingv1alpha1.ReasonChecksumMismatch, "%s: sha256 is %s, not the %s the URI pins", what, got, want)
}

// emptyDir removes everything in dir, keeping dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("clear %s: %w", dir, err)
		}
	}
	return nil
}
