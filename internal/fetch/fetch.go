// Package fetch copies a model from where its storage URI points into the
// model volume, as TF Serving's base directory, and verifies it: the work
// of the model-fetch Job (`manager fetch`).
//
// A fetch lists the source, downloads its files in parallel (retrying
// what a retry can fix) into a temporary sibling of the destination,
// checks the layout there (numbered version directories, each with a
// SavedModel), records every file's size and sha256 in a manifest, and
// renames the whole into place. A pvc:// model is only verified where it
// is. Failures are *Error values whose Reason becomes the ModelServer's
// condition reason.
package fetch

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
	"github.com/modelserver-dev/modelserver-operator/internal/imagesig"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// Defaults of Options.
const (
	DefaultMaxBytes         int64 = 1 << 40 // 1 TiB
	DefaultMaxFiles               = 100_000
	DefaultConcurrency            = 16
	DefaultProgressInterval       = 5 * time.Second
	DefaultStallTimeout           = 2 * time.Minute
)

// Options of a fetch.
type Options struct {
	// URI is the model's storage URI (see storageuri.Parse).
	URI string
	// Dest is the model's base directory, as TF Serving sees it.
	Dest string
	// CredentialsDir is a mounted Secret, one file per key; "" for none.
	CredentialsDir string
	// WebIdentity reads the model as an identity a service account token
	// is exchanged for (an IAM role, a federated Google identity, an
	// Entra application, the role of an EKS Pod Identity association)
	// instead of the Secret's keys (zero: none).
	WebIdentity WebIdentity
	// PullSecrets are the serving pods' image pull secrets, read for an
	// oci:// model's registry credentials after the credentials Secret's.
	PullSecrets []PullSecret
	// SignatureKeys, PEM public keys, require an oci:// model's image to
	// carry a cosign signature by one of them (imagesig).
	SignatureKeys []string
	// SignatureRepository, registry/repository, is where the signatures
	// are when cosign was told to store them elsewhere than beside the
	// image (COSIGN_REPOSITORY); "" for beside it.
	SignatureRepository string
	// Versions are the version directories a listed model is fetched
	// with (versions.go); zero: all of them.
	Versions fetchcontract.Versions
	// ServedConfig is the serving pods' model config, as mounted into the
	// fetch's pod: the models of earlier fetches beside Dest that it has
	// moved the pods off are removed before the download (prune.go). ""
	// removes none.
	ServedConfig string
	// Pin is what the model-fetch Job found at this URI, which a serving
	// pod's own copy must match (zero: nothing pinned yet).
	Pin Pin
	// VolumeSize is the model volume's size where its file system does not
	// tell it (an emptyDir's size limit, storage mode PerPod); 0 where it
	// does.
	VolumeSize int64
	// MaxBytes caps the model's size (0: DefaultMaxBytes).
	MaxBytes int64
	// MaxFiles caps its number of files (0: DefaultMaxFiles).
	MaxFiles int
	// Concurrency is how many files are downloaded at once (0: 16), and
	// how many requests are in flight: a large file is downloaded as
	// ranges, several at once, within the same number.
	Concurrency int
	// Timeout bounds the whole fetch (0: none).
	Timeout time.Duration
	// TimeoutFrom names what set Timeout in the message of a fetch out
	// of time: the flag (the default) or the spec field behind it.
	TimeoutFrom string
	// Retry is the retry policy (zero: DefaultRetryPolicy).
	Retry RetryPolicy
	// ProgressInterval is how often progress is logged (0: 5s).
	ProgressInterval time.Duration
	// StallTimeout ends a download attempt on which nothing arrived for
	// that long, to be retried (0: 2m).
	StallTimeout time.Duration
	// Logger receives structured logs (nil: none). Secret values are
	// redacted from everything logged through it.
	Logger *slog.Logger

	// partSize is the part size of ranged downloads (0: DefaultPartSize);
	// tests make it small.
	partSize int64
}

func (o *Options) setDefaults() {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Retry == (RetryPolicy{}) {
		o.Retry = DefaultRetryPolicy
	}
	if o.ProgressInterval == 0 {
		o.ProgressInterval = DefaultProgressInterval
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.partSize <= 0 {
		o.partSize = DefaultPartSize
	}
}

// Run fetches (or, for pvc://, verifies) a model and returns its summary.
// Its error is always an *Error, its message free of secret values.
func Run(ctx context.Context, o Options) (Summary, error) {
	o.setDefaults()
	loc, err := storageuri.Parse(o.URI)
	if err == nil {
		loc, err = o.Pin.location(loc)
	}
	if err != nil {
		// The same URI fails the same way on every try.
		return Summary{}, &Error{Reason: servingv1alpha1.ReasonInvalidURI, Message: err.Error(), Permanent: true, Err: err}
	}
	if o.Dest == "" || !filepath.IsAbs(o.Dest) {
		return Summary{}, permanentf(servingv1alpha1.ReasonFetchFailed, "--dest must be an absolute path, not %q", o.Dest)
	}
	creds, err := LoadCredentials(o.CredentialsDir)
	if err != nil {
		return Summary{}, err
	}
	pulls, err := loadPullSecrets(o.PullSecrets)
	if err != nil {
		return Summary{}, err
	}
	creds.hidePullSecrets(pulls)
	keys, err := imagesig.ParseKeys(o.SignatureKeys)
	if err != nil {
		return Summary{}, permanentf(servingv1alpha1.ReasonFetchFailed, "--signature-key: %v", err)
	}
	if len(keys) > 0 && loc.Scheme != storageuri.SchemeOCI {
		return Summary{}, permanentf(servingv1alpha1.ReasonFetchFailed, "--signature-key applies to oci:// models only")
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	f := &fetcher{
		o:     o,
		loc:   loc,
		dest:  filepath.Clean(o.Dest),
		creds: creds,
		pulls: pulls,
		keys:  keys,
		log:   slog.New(redactingHandler{inner: o.Logger.Handler(), redact: creds.Redact}),
	}
	f.retry = newRetrier(o.Retry, f.log)
	sum, err := f.run(ctx)
	sum.Received = f.received.Load()
	if err == nil {
		err = o.Pin.check(sum, loc)
	}
	if err != nil {
		fe := *AsError(err)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && o.Timeout > 0 {
			fe = Error{Reason: servingv1alpha1.ReasonTimeout, Message: "the fetch did not finish within " + o.Timeout.String() + " (" + cmp.Or(o.TimeoutFrom, "--timeout") + ")", Err: err}
		}
		fe.Message = creds.Redact(fe.Message)
		return Summary{}, &fe
	}
	return sum, nil
}

type fetcher struct {
	o     Options
	loc   storageuri.Location
	dest  string
	creds Credentials
	pulls []loadedPullSecret
	// keys are the keys an oci:// model's signature must be made with,
	// and signedBy the one that made it, once verified.
	keys     []imagesig.Key
	signedBy string
	log      *slog.Logger
	retry    *retrier
	// origin is what the manifest records the model came from, and what
	// a later fetch must find there to download nothing: the URI, and for
	// an oci:// tag the digest it named when pulled, so that a moved tag
	// is pulled again.
	origin string
	// archiveVersion is what the store names the archive by, once known
	// (manifest.ArchiveVersion).
	archiveVersion string
	// received counts the bytes the fetch's connections to the store
	// received (Summary.Received).
	received atomic.Int64
	// oci is an oci:// model, once resolved.
	oci *ociModel
	// stopped is what a stopped fetch into dest left (resume.go), nil if
	// nothing; journal notes the files of this fetch's staging.
	stopped *earlier
	journal *journal
	// partial are the parts the stopped fetch completed of the files it
	// had begun, linked into this fetch's staging (linkCopies).
	partial map[string][]partRecord
}

func (f *fetcher) run(ctx context.Context) (_ Summary, err error) {
	f.log.Info("fetch starting", "uri", f.loc.String(), "dest", f.dest, "concurrency", f.o.Concurrency, "maxBytes", f.o.MaxBytes)
	if f.loc.Scheme == storageuri.SchemePVC {
		return f.verifyInPlace(ctx)
	}
	if f.loc.Scheme == storageuri.SchemeLocal && overlaps(f.loc.Path, f.dest) {
		return Summary{}, permanentf(servingv1alpha1.ReasonInvalidURI, "the source %s and the destination %s overlap", f.loc.Path, f.dest)
	}
	f.clearBeside()
	defer func() {
		if err == nil {
			// Kept for the next attempt if this one failed before
			// taking from it.
			f.dropStopped()
		}
	}()
	f.origin = f.loc.String()
	if f.loc.Scheme == storageuri.SchemeOCI {
		if sum, ok, err := f.resolveOCI(ctx); ok || err != nil {
			return sum, err
		}
	} else if sum, ok := f.alreadyFetched(ctx); ok {
		return sum, nil
	}
	staging, err := newStaging(f.dest)
	if err != nil {
		return Summary{}, err
	}
	published := false
	defer func() {
		if !published {
			f.leaveStaging(staging, err)
		}
	}()
	// Opened before anything is written into it, so that the flush before
	// publishing reports a write-back error of any file (syncFileSystem).
	stagingDir, err := os.Open(staging)
	if err != nil {
		return Summary{}, classify(err, staging)
	}
	defer func() { _ = stagingDir.Close() }()
	pendingBefore := pendingWrites()

	var (
		records         []fileRecord
		archive, linked bool
	)
	if f.contentAddressed() {
		records, linked = f.linkEarlierCopy(ctx, staging)
	}
	if !linked {
		if records, archive, err = f.fetchInto(ctx, staging); err != nil {
			return Summary{}, err
		}
	}

	move, notes, err := normalize(staging, archive)
	if err != nil {
		return Summary{}, err
	}
	for _, n := range notes {
		f.log.Info(n)
	}
	for i := range records {
		records[i].Path = move(records[i].Path)
	}
	versions, err := verifyLayout(staging, f.loc.String(), archive)
	if err != nil {
		return Summary{}, err
	}
	if err := stampModTimes(staging, records); err != nil {
		return Summary{}, err
	}
	m := newManifest(f.origin, versions, records)
	m.ArchiveVersion, m.VersionDir = f.archiveVersion, strings.TrimSuffix(move(""), "/")
	if f.oci != nil {
		m.Image, m.SignedBy = f.oci.pinned.String(), f.signedBy
	}
	if err := writeManifest(staging, m); err != nil {
		return Summary{}, err
	}
	pendingNow := pendingWrites()
	how := chooseFlush(pendingBefore, pendingNow, m.Bytes)
	if how == flushEachFile && pendingBefore >= 0 && pendingNow >= 0 {
		f.log.Info("the node has other writes pending: syncing the model's files one by one, not its whole file system",
			"pendingBytesAtStart", pendingBefore, "pendingBytesNow", pendingNow, "modelBytes", m.Bytes)
	}
	if err := publish(stagingDir, f.dest, how, f.log); err != nil {
		return Summary{}, err
	}
	published = true
	f.log.Info("model published", "dest", f.dest, "versions", versions, "files", len(m.Files), "bytes", m.Bytes, "digest", m.Digest)
	return m.summary(), nil
}

// contentAddressed says that the origin names the model's content: an
// oci:// image by digest (a tag is resolved to one first), a download
// pinned by #sha256.
func (f *fetcher) contentAddressed() bool {
	return f.oci != nil || f.loc.SHA256 != ""
}

// resolveOCI reads which manifest an oci:// reference names. A model
// pinned by digest that dest already holds is not asked of the registry;
// a tag is, since it may have moved.
func (f *fetcher) resolveOCI(ctx context.Context) (Summary, bool, error) {
	m, err := f.openOCI(ctx)
	if err != nil {
		return Summary{}, false, err
	}
	_, byDigest := m.ref.(name.Digest)
	if byDigest {
		if sum, ok := f.alreadyFetched(ctx); ok {
			return sum, true, nil
		}
	}
	if err := f.retry.do(ctx, m.shown, m.resolve); err != nil {
		return Summary{}, false, err
	}
	f.oci = m
	if !byDigest {
		f.origin += "@" + m.pinned.DigestStr()
		f.log.Info("the tag names a manifest", "reference", m.ref.String(), "digest", m.pinned.DigestStr())
		if sum, ok := f.alreadyFetched(ctx); ok {
			return sum, true, nil
		}
	}
	if len(f.keys) > 0 {
		err := f.retry.do(ctx, m.shown+" signature", func(ctx context.Context) error {
			k, err := m.verifySignature(ctx, f.keys)
			f.signedBy = k.ID
			return err
		})
		if err != nil {
			return Summary{}, false, err
		}
		f.log.Info("the image's cosign signature verifies", "digest", m.pinned.DigestStr(), "key", f.signedBy)
	}
	return Summary{}, false, nil
}

// fetchInto copies the model into staging. archive tells that what came
// was unpacked (an archive, an image's layers), so that a single top
// directory is taken as the model's base.
func (f *fetcher) fetchInto(ctx context.Context, staging string) ([]fileRecord, bool, error) {
	if f.oci != nil {
		records, err := f.fetchOCI(ctx, staging)
		return records, true, err
	}
	src, err := f.openSource(ctx)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = src.Close() }()
	var listing Listing
	err = f.retry.do(ctx, src.Describe(""), func(ctx context.Context) error {
		var err error
		listing, err = src.List(ctx)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if listing.Single {
		if records, ok, err := f.takeUnchangedArchive(ctx, src, listing, staging); ok || err != nil {
			return records, false, err
		}
	} else if listing, err = f.keepServedVersions(listing, src.Describe("")); err != nil {
		return nil, false, err
	}
	return f.download(ctx, src, listing, staging)
}

func (f *fetcher) openSource(ctx context.Context) (Source, error) {
	transport, err := newTransport(transportOptions{
		CABundle:           []byte(f.creds.values[caBundleKey(f.loc.Scheme)]),
		InsecureSkipVerify: strings.EqualFold(f.creds.Get(KeyAWSInsecureSkipTLS), "true"),
		Conns:              f.o.Concurrency,
		Received:           &f.received,
	})
	if err != nil {
		return nil, err
	}
	switch f.loc.Scheme {
	case storageuri.SchemeS3:
		return newS3Source(ctx, f.loc, f.creds, f.o.WebIdentity, transport, f.o.MaxFiles)
	case storageuri.SchemeGCS:
		return newGCSSource(ctx, f.loc, f.creds, f.o.WebIdentity, transport, f.o.MaxFiles)
	case storageuri.SchemeAzure:
		return newAzureSource(f.loc, f.creds, f.o.WebIdentity, transport, f.o.MaxFiles)
	case storageuri.SchemeHTTP, storageuri.SchemeHTTPS:
		var part int64
		if f.o.Concurrency > 1 {
			part = min(inOrderPartSize, f.o.partSize)
		}
		return newHTTPSource(f.loc, f.creds, transport, part, f.retry)
	case storageuri.SchemeHF:
		return newHFSource(f.loc, f.creds, transport, f.o.MaxFiles)
	case storageuri.SchemeLocal:
		return newLocalSource(f.loc, f.o.MaxFiles), nil
	}
	return nil, permanentf(servingv1alpha1.ReasonInvalidURI, "%s: no source for scheme %q", f.loc, f.loc.Scheme)
}

// caBundleKey is the credentials Secret's key for the PEM of the CA a
// store's endpoint is signed by: named as its cloud's tools name it.
func caBundleKey(scheme storageuri.Scheme) string {
	if scheme == storageuri.SchemeAzure {
		return KeyAzureCABundle
	}
	return KeyAWSCABundle
}

// download copies the listed files into staging. archive tells that the
// source was one archive, extracted there.
func (f *fetcher) download(ctx context.Context, src Source, l Listing, staging string) ([]fileRecord, bool, error) {
	totalBytes := totalOf(l.Objects)
	if totalBytes > f.o.MaxBytes {
		return nil, false, permanentf(servingv1alpha1.ReasonTooLarge, "%s holds %s, over the limit of %s (spec.model.maxSizeBytes)", src.Describe(""), FormatBytes(totalBytes), FormatBytes(f.o.MaxBytes))
	}
	if len(l.Objects) > f.o.MaxFiles {
		return nil, false, permanentf(servingv1alpha1.ReasonTooLarge, "%s holds %d files, over the limit of %d", src.Describe(""), len(l.Objects), f.o.MaxFiles)
	}
	objs := l.Objects // what is left to download
	var linked []fileRecord
	if !l.Single {
		if f.loc.SHA256 != "" {
			return nil, false, permanentf(servingv1alpha1.ReasonInvalidURI, "#sha256 pins a single file or archive, and %s holds %d files", src.Describe(""), len(l.Objects))
		}
		if err := pathConflicts(l.Objects); err != nil {
			return nil, false, err
		}
		for _, dir := range l.Dirs {
			if err := os.MkdirAll(filepath.Join(staging, filepath.FromSlash(dir)), 0o755); err != nil {
				return nil, false, pathConflict(err, src.Describe(dir+"/"))
			}
		}
		f.journal = openJournal(staging, f.origin, f.log)
		var err error
		if linked, objs, err = f.linkCopies(ctx, staging, l.Objects); err != nil {
			return nil, false, err
		}
	}
	if err := checkSpace(staging, f.unbegun(objs), f.o.VolumeSize, filepath.Dir(f.dest)); err != nil {
		return nil, false, err
	}
	totalFiles := int64(len(objs))
	if l.Single && archiveKindOf(objs[0].Key) != archiveNone {
		totalFiles = -1 // known once extracted
	}
	prog := newProgress(totalFiles, totalOf(objs))
	d := &downloader{src: src, dir: staging, retry: f.retry, concurrency: f.o.Concurrency, maxBytes: f.o.MaxBytes, stall: f.o.StallTimeout, prog: prog, partSize: f.o.partSize, pin: f.loc.SHA256, journal: f.journal, partial: f.partial, single: l.Single}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go prog.report(pctx, f.log, f.o.ProgressInterval)

	if l.Single {
		obj := l.Objects[0]
		if !storageuri.SafeRelPath(obj.Key) || strings.Contains(obj.Key, "/") {
			return nil, false, permanentf(servingv1alpha1.ReasonInvalidURI, "%s does not name a file", src.Describe(""))
		}
		if kind := archiveKindOf(obj.Key); kind != archiveNone {
			f.log.Info("downloading and extracting an archive", "archive", src.Describe(obj.Key), "format", string(kind))
			records, err := d.fetchArchive(ctx, obj, kind, f.o.MaxFiles)
			if err != nil {
				return nil, true, err
			}
			prog.done(f.log, "archive extracted")
			f.archiveVersion = d.servedVersion()
			return records, true, nil
		}
		rec, err := d.fetchFile(ctx, obj, obj.Key) // checks d.pin
		if err != nil {
			return nil, false, err
		}
		prog.done(f.log, "download complete")
		f.archiveVersion = d.servedVersion()
		return []fileRecord{rec}, false, nil
	}

	f.log.Info("downloading", "source", src.Describe(""), "files", len(objs), "bytes", prog.totalBytes)
	records, err := d.downloadAll(ctx, objs)
	if err != nil {
		return nil, false, err
	}
	prog.done(f.log, "download complete")
	if err := f.journal.remove(staging); err != nil {
		return nil, false, err
	}
	return append(linked, records...), false, nil
}

// totalOf is the objects' total size, -1 when one's is not known.
func totalOf(objs []Object) int64 {
	var total int64
	for _, o := range objs {
		if o.Size < 0 {
			return -1
		}
		total += o.Size
	}
	return total
}

// pathConflicts finds a file whose path is another's directory.
func pathConflicts(objs []Object) error {
	files := make(map[string]bool, len(objs))
	for _, o := range objs {
		files[o.Key] = true
	}
	for _, o := range objs {
		for dir := o.Key; ; {
			i := strings.LastIndexByte(dir, '/')
			if i < 0 {
				break
			}
			dir = dir[:i]
			if files[dir] {
				return permanentf(servingv1alpha1.ReasonInvalidLayout, "%q is both a file and the directory of %q", dir, o.Key)
			}
		}
	}
	return nil
}

// alreadyFetched tells whether dest holds the model of this URI, every
// file as the manifest recorded it; a re-run then downloads nothing.
func (f *fetcher) alreadyFetched(ctx context.Context) (Summary, bool) {
	if _, err := os.Stat(f.dest); err != nil {
		return Summary{}, false
	}
	m, err := readManifest(f.dest)
	switch {
	case err != nil:
		f.log.Info("the destination holds no complete fetch; fetching again", "dest", f.dest)
		return Summary{}, false
	case m.URI != f.origin:
		f.log.Info("the destination holds a model fetched from another URI; fetching again", "dest", f.dest)
		return Summary{}, false
	}
	if ok, why := m.matches(ctx, f.dest, f.o.Concurrency); !ok {
		f.log.Info("the destination's files differ from its manifest; fetching again", "dest", f.dest, "difference", why)
		return Summary{}, false
	}
	if _, err := verifyLayout(f.dest, f.dest, false); err != nil {
		f.log.Info("the destination's layout is not valid; fetching again", "dest", f.dest, "error", err.Error())
		return Summary{}, false
	}
	f.log.Info("the model is already fetched and intact; nothing to download", "dest", f.dest, "files", len(m.Files), "digest", m.Digest)
	if f.o.ServedConfig != "" {
		markPublished(f.dest, time.Now(), f.log)
	}
	return m.summary(), true
}

// verifyInPlace checks a model on the user's claim (mounted read-only)
// without writing anything, and summarizes it.
func (f *fetcher) verifyInPlace(ctx context.Context) (Summary, error) {
	versions, err := verifyLayout(f.dest, f.loc.String(), false)
	if err != nil {
		return Summary{}, err
	}
	prog := newProgress(-1, -1)
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go prog.report(pctx, f.log, f.o.ProgressInterval)
	records, err := hashTree(ctx, f.dest, manifestFormat, f.o.Concurrency, prog)
	if err != nil {
		return Summary{}, err
	}
	prog.done(f.log, "model verified in place")
	m := newManifest(f.loc.String(), versions, records)
	return m.summary(), nil
}

// overlaps tells whether one of two directories is the other or inside it.
func overlaps(a, b string) bool {
	within := func(p, dir string) bool {
		rel, err := filepath.Rel(dir, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	return within(a, b) || within(b, a)
}
