package fetch

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// Keys of the credentials Secret that an oci:// fetch reads.
const (
	// KeyDockerConfigJSON is a kubernetes.io/dockerconfigjson Secret's
	// key: the Secret that pulls images from the registry pulls the
	// model too.
	KeyDockerConfigJSON = ".dockerconfigjson"
	// KeyCACert is the PEM of the CA that signed the registry's
	// certificate.
	KeyCACert = "ca.crt"
	// KeyPlainHTTP "true" lets the registry be reached over plain HTTP
	// when it does not answer HTTPS: a registry inside the cluster, behind
	// its Service, often serves no TLS.
	KeyPlainHTTP = "plain-http"
)

// modelcarRoot is where a model image holds its model: KServe's modelcars
// put it in /models, so an image built for them serves here unchanged.
const modelcarRoot = "models"

// The annotations of an artifact pushed by oras: each layer is a file
// named by its title, or a directory packed as a tar.gz.
const (
	annotationTitle  = "org.opencontainers.image.title"
	annotationUnpack = "io.deis.oras.content.unpack"
)

// ociModel is a model in an OCI registry.
type ociModel struct {
	ref   name.Reference
	opts  []remote.Option
	keys  registryKeychain
	shown string
	// pinned is the manifest ref named when resolved, by its digest, and
	// manifest that manifest; named is what ref named, by its digest: the
	// same, or an index holding it.
	pinned, named name.Digest
	manifest      *v1.Manifest
	// signatures is the repository its signatures are in, when not its
	// own (SignatureRepository).
	signatures *name.Repository

	// What its layers are downloaded with (ocirange.go): the fetch's
	// streams, and a client for ranges of its blobs, made once.
	streams    *ociStreams
	transport  http.RoundTripper
	clientOnce sync.Once
	client     *http.Client
	clientErr  error
}

func (f *fetcher) openOCI(ctx context.Context) (*ociModel, error) {
	var nameOpts []name.Option
	if strings.EqualFold(f.creds.Get(KeyPlainHTTP), "true") {
		nameOpts = append(nameOpts, name.Insecure)
	}
	ref, err := name.ParseReference(f.loc.Reference, nameOpts...)
	if err != nil {
		return nil, permanentf(servingv1alpha1.ReasonInvalidURI, "%s: %v", f.loc, err)
	}
	var signatures *name.Repository
	if f.o.SignatureRepository != "" {
		r, err := name.NewRepository(f.o.SignatureRepository, nameOpts...)
		if err != nil {
			return nil, permanentf(servingv1alpha1.ReasonFetchFailed, "--signature-repository: %v", err)
		}
		signatures = &r
	}
	t, err := newTransport(transportOptions{CABundle: []byte(f.creds.values[KeyCACert]), CAKey: KeyCACert, Conns: 2, Received: &f.received})
	if err != nil {
		return nil, err
	}
	keys, err := loadKeychain(f.creds, f.pulls)
	if err != nil {
		return nil, err
	}
	if f.o.WebIdentity.GKEWorkloadIdentity {
		keys.google = gkeTokens(ctx, f.o.WebIdentity, f.creds.Get(KeyGCEMetadataHost))
	}
	for _, name := range keys.missing {
		f.log.Warn("an image pull secret has no registry credentials here: not found, or without either key", "secret", name, "keys", KeyDockerConfigJSON+", "+KeyDockerCfg)
	}
	streams := newOCIStreams(min(ociLayersAtOnce, f.o.Concurrency))
	return &ociModel{ref: ref, shown: f.loc.String(), keys: keys, signatures: signatures, streams: streams, transport: t, opts: []remote.Option{
		remote.WithTransport(t),
		remote.WithAuthFromKeychain(keys),
		// An index (a model image built for several platforms) gives this
		// node's; a model is the same on all, but each needs one.
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}),
		// The fetch's own retries, with their backoff and messages, are
		// the only ones.
		remote.WithRetryPredicate(func(error) bool { return false }),
		remote.WithUserAgent("modelserver-fetch"),
	}}, nil
}

// resolve reads the manifest that the reference names now: its digest
// pins the layers of every later attempt, even if the tag moves.
func (m *ociModel) resolve(ctx context.Context) error {
	desc, err := remote.Get(m.ref, append(m.opts, remote.WithContext(ctx))...)
	if err != nil {
		return m.classify(err, m.shown)
	}
	img, err := desc.Image() // an index gives the node's platform's image
	if err != nil {
		return m.classify(err, m.shown)
	}
	m.named = m.ref.Context().Digest(desc.Digest.String())
	digest, err := img.Digest()
	if err != nil {
		return m.classify(err, m.shown)
	}
	manifest, err := img.Manifest()
	if err != nil {
		return m.classify(err, m.shown)
	}
	m.pinned, m.manifest = m.ref.Context().Digest(digest.String()), manifest
	return nil
}

// classify words a registry's answer: its status first (404 is a missing
// tag or repository, 401 and 403 credentials), and a certificate it does
// not trust names the key that would make it trusted.
func (m *ociModel) classify(err error, what string) *Error {
	var te *transport.Error
	if errors.As(err, &te) {
		detail := fmt.Sprintf("HTTP %d", te.StatusCode)
		if len(te.Errors) > 0 {
			detail += " " + te.Errors[0].String()
		}
		fe := byStatus(te.StatusCode, err, what+": ", firstLineOf(detail))
		if fe.Reason == servingv1alpha1.ReasonAccessDenied {
			fe.Message = fmt.Sprintf("%s: access denied (%s); %s", what, firstLineOf(detail), m.keys.refused(m.ref.Context().RegistryStr()))
		}
		return fe
	}
	if untrustedCertificate(err) {
		return &Error{Reason: servingv1alpha1.ReasonFetchFailed, Permanent: true, Err: err,
			Message: fmt.Sprintf("%s: the registry's TLS certificate is not trusted (%s); put its CA in the credentials Secret's %s", what, firstLineOf(err.Error()), KeyCACert)}
	}
	// An index without the node's platform: pulling again will not add it.
	if strings.Contains(err.Error(), "no child with platform") {
		return permanentf(servingv1alpha1.ReasonInvalidLayout, "%s is an image index without an image for linux/%s, this node's platform; add one (a model image's files are the same on every platform)", what, runtime.GOARCH)
	}
	// Go's client says this when a registry answers HTTPS in plain text.
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return &Error{Reason: servingv1alpha1.ReasonFetchFailed, Permanent: true, Err: err,
			Message: fmt.Sprintf("%s: the registry answers in plain HTTP, not HTTPS; if it is meant to, set %s: \"true\" in the credentials Secret", what, KeyPlainHTTP)}
	}
	return classify(err, what)
}

// fetchOCI pulls the model of an oci:// URI into staging: the /models of
// an image, its layers applied in order with their whiteouts, or the
// files and directories of an artifact.
func (f *fetcher) fetchOCI(ctx context.Context, staging string) ([]fileRecord, error) {
	m := f.oci
	layers := m.manifest.Layers
	artifact := len(layers) > 0
	var total int64
	for _, l := range layers {
		total += l.Size
		artifact = artifact && l.Annotations[annotationTitle] != ""
	}
	if total > f.o.MaxBytes {
		return nil, permanentf(servingv1alpha1.ReasonTooLarge, "%s holds %s, over the limit of %s (spec.model.maxSizeBytes)", m.shown, FormatBytes(total), FormatBytes(f.o.MaxBytes))
	}
	if err := checkSpace(staging, []Object{{Key: "layers", Size: total}}, f.o.VolumeSize, filepath.Dir(f.dest)); err != nil {
		return nil, err
	}
	kind := "an image, whose /" + modelcarRoot + " is the model"
	if artifact {
		kind = "an artifact, whose layers are the model's files"
	}
	f.log.Info("pulling", "reference", m.pinned.String(), "kind", kind, "layers", len(layers), "bytes", total)
	prog := newProgress(-1, total)
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go prog.report(pctx, f.log, f.o.ProgressInterval)

	var records []fileRecord
	err := f.retry.do(ctx, m.shown, func(ctx context.Context) error {
		if err := emptyDir(staging); err != nil {
			return classify(err, staging)
		}
		prog.bytes.Store(0)
		prog.files.Store(0)
		x := newExtractor(staging, f.o.MaxBytes, f.o.MaxFiles, prog)
		defer func() { records = x.list() }()
		if artifact && filesApart(layers) {
			return f.pullFilesAtOnce(ctx, layers, x)
		}
		o := &overlay{x: x, origin: map[string]int{}}
		filter := o.modelcarEntry
		if artifact {
			filter = nil // a directory oras packed: its entries are the model's
		}
		for i, desc := range layers {
			o.layer = i
			if err := f.pullLayer(ctx, i, desc, artifact, x, filter); err != nil {
				return err
			}
		}
		if !artifact && !o.sawRoot {
			return permanentf(servingv1alpha1.ReasonInvalidLayout,
				"%s is an image without a /%s directory: a model image holds its model there (COPY resnet/ /%s/), as KServe's modelcars do", m.shown, modelcarRoot, modelcarRoot)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	prog.done(f.log, "model pulled")
	return records, nil
}

// ociLayersAtOnce is how many of an artifact's files are pulled at once:
// a registry, or the CDN behind it, gives each stream its share, and a
// model's files are many (a SavedModel's variables shards).
const ociLayersAtOnce = 4

// filesApart tells whether an artifact's layers are all files (none a
// directory to unpack), each at a path of its own, none inside another's:
// no two write the same path, so the order they are written in does not
// matter and they may be pulled at once.
func filesApart(layers []v1.Descriptor) bool {
	paths := make(map[string]bool, len(layers))
	for _, l := range layers {
		if l.Annotations[annotationUnpack] == "true" {
			return false
		}
		p, err := entryPath(l.Annotations[annotationTitle])
		if err != nil || p == "" || paths[p] {
			return false // pulled one by one, the failure is named there
		}
		paths[p] = true
	}
	for p := range paths {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if paths[d] {
				return false
			}
		}
	}
	return true
}

// pullFilesAtOnce pulls an artifact's files ociLayersAtOnce at a time,
// each into an extractor of its own, and gathers what they wrote into x.
// The first failure ends the others.
func (f *fetcher) pullFilesAtOnce(ctx context.Context, layers []v1.Descriptor, x *extractor) error {
	if len(layers) > x.maxFiles {
		return permanentf(servingv1alpha1.ReasonTooLarge, "the artifact holds more than %d files", x.maxFiles)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(min(ociLayersAtOnce, f.o.Concurrency))
	for i, desc := range layers {
		g.Go(func() error {
			one := newExtractor(x.dir, x.maxBytes, x.maxFiles, x.prog)
			if err := f.pullLayer(gctx, i, desc, true, one, nil); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			maps.Copy(x.records, one.records)
			x.bytes += one.bytes
			return nil
		})
	}
	return g.Wait()
}

// pullLayer downloads layer index, its digest verified as it arrives, and
// writes what it holds into x: an artifact's file under its title, or the
// entries of a tar as filter says.
func (f *fetcher) pullLayer(ctx context.Context, index int, desc v1.Descriptor, artifact bool, x *extractor, filter entryFilter) error {
	m := f.oci
	what := fmt.Sprintf("%s layer %d (%s)", m.shown, index+1, desc.Digest)
	if err := m.streams.sem.Acquire(ctx, 1); err != nil {
		return classify(err, what)
	}
	defer m.streams.sem.Release(1)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	body, err := f.openLayer(ctx, desc, what)
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	stall := f.o.StallTimeout
	// No sha256 of ours: the layer's reader checks its digest at the end.
	br := &bodyReader{r: body, prog: x.prog, limit: f.o.MaxBytes, stall: stall,
		watchdog: time.AfterFunc(stall, func() { cancel(errStalled) })}
	defer br.watchdog.Stop()
	ahead := newAheadReader(br, 4, 1<<20)
	// Ending the request first, so that a read in flight returns at once.
	stop := func() { cancel(errLayerAbandoned); ahead.Close() }
	defer stop()
	// failed tells a broken download (worth a retry) from a broken layer.
	failed := func(err error) error {
		if err == nil {
			return nil
		}
		var fe *Error
		if !errors.As(err, &fe) && ahead.sourceError() == nil {
			// A layer that does not unpack may have been damaged on its
			// way: its digest, checked at its end, tells.
			_ = drain(ahead)
		}
		stop()
		switch {
		case fe != nil:
			return fe
		case errors.Is(context.Cause(ctx), errStalled):
			return transientf(servingv1alpha1.ReasonFetchFailed, "%s: no data received for %s", what, stall)
		case ahead.sourceError() != nil:
			return m.classify(ahead.sourceError(), what)
		}
		return permanentf(servingv1alpha1.ReasonInvalidLayout, "%s: %v", what, err)
	}

	title := desc.Annotations[annotationTitle]
	if artifact && desc.Annotations[annotationUnpack] != "true" {
		if err := x.fileEntry(title, desc.Size, ahead); err != nil {
			return failed(err)
		}
		return failed(drain(ahead))
	}
	r, closeReader, err := decompress(desc.MediaType, ahead, artifact)
	if err != nil {
		return failed(err)
	}
	defer closeReader()
	if err := x.untarFiltered(r, filter); err != nil {
		return failed(err)
	}
	// The digest covers every byte: read what follows the tar's end.
	return failed(drain(ahead))
}

// openLayer opens a layer's blob: as ranges when it is large and the
// registry serves them, else as one download, whose digest its reader
// checks at the end.
func (f *fetcher) openLayer(ctx context.Context, desc v1.Descriptor, what string) (io.ReadCloser, error) {
	if r := f.openRanged(ctx, desc, what); r != nil {
		return r, nil
	}
	m := f.oci
	layer, err := remote.Layer(m.ref.Context().Digest(desc.Digest.String()), append(m.opts, remote.WithContext(ctx))...)
	if err != nil {
		return nil, m.classify(err, what)
	}
	body, err := layer.Compressed()
	if err != nil {
		return nil, m.classify(err, what)
	}
	return body, nil
}

// errLayerAbandoned ends the download of a layer that is not read to its
// end: its unpacking failed, or the pull is over.
var errLayerAbandoned = errors.New("layer abandoned")

// drain reads a body to its end, where its digest is verified.
func drain(r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	return err
}

// decompress opens a layer by its media type. An artifact's directory is
// a tar.gz whatever its type says.
func decompress(mt types.MediaType, r io.Reader, artifact bool) (io.Reader, func(), error) {
	switch {
	case artifact, mt == types.OCILayer, mt == types.OCIRestrictedLayer, mt == types.DockerLayer, mt == types.DockerForeignLayer:
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return gz, func() { _ = gz.Close() }, nil
	case mt == types.OCILayerZStd:
		// One stream, in the fetch pod's memory: no decoding ahead, and a
		// window far above what image builders use (8 MiB) but bounded.
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	case mt == types.OCIUncompressedLayer, mt == types.OCIUncompressedRestrictedLayer, mt == types.DockerUncompressedLayer:
		return r, func() {}, nil
	}
	return nil, nil, permanentf(servingv1alpha1.ReasonInvalidLayout, "media type %q is not a file system layer", mt)
}

// overlay applies an image's layers as a container runtime would, but
// only what lies below /models: a later layer's file replaces an earlier
// one's, and a whiteout (.wh.name, or .wh..wh..opq for a directory's
// whole content) removes what the layers below wrote.
type overlay struct {
	x     *extractor
	layer int
	// origin is the layer that wrote each file and directory, by its
	// path below /models.
	origin  map[string]int
	sawRoot bool
}

// modelcarEntry is the entryFilter of an image's layer.
func (o *overlay) modelcarEntry(hdr *tar.Header) (string, bool, error) {
	p := path.Clean("/" + hdr.Name)[1:] // "" is the image's root
	dir, base := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	if target, ok := strings.CutPrefix(base, ".wh."); ok {
		if target == ".wh..opq" {
			o.remove(dir, true)
		} else {
			o.remove(path.Join(dir, target), false)
		}
		return "", false, nil
	}
	rel, ok := belowModelcarRoot(p)
	if !ok {
		return "", false, nil // the rest of the image: a base image's files
	}
	o.sawRoot = true
	if rel == "" {
		return "", false, nil
	}
	o.origin[rel] = o.layer
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if _, seen := o.origin[d]; !seen {
			o.origin[d] = o.layer
		}
	}
	return rel, true, nil
}

// belowModelcarRoot gives an image path's place below /models ("" for
// /models itself), or false when it is elsewhere.
func belowModelcarRoot(p string) (string, bool) {
	if p == modelcarRoot {
		return "", true
	}
	rel, ok := strings.CutPrefix(p, modelcarRoot+"/")
	return rel, ok
}

// remove takes away what lower layers wrote at p, an image path: all of
// it, or with opaque what is inside it. A whiteout of /models or of the
// root takes the whole model.
func (o *overlay) remove(p string, opaque bool) {
	rel, ok := belowModelcarRoot(p)
	switch {
	case p == "" || (p == modelcarRoot && !opaque):
		rel, opaque = "", true
	case !ok:
		return
	}
	for q, l := range o.origin {
		inside := rel == "" || strings.HasPrefix(q, rel+"/")
		whole := q == rel && !opaque
		if l >= o.layer || (!inside && !whole) {
			continue
		}
		delete(o.origin, q)
		if _, ok := o.x.records[q]; ok {
			delete(o.x.records, q)
			o.x.prog.files.Add(-1)
		}
		_ = os.RemoveAll(filepath.Join(o.x.dir, filepath.FromSlash(q)))
	}
}

// dockerConfig is a .dockerconfigjson: credentials by registry.
type dockerConfig struct {
	Auths map[string]authn.AuthConfig `json:"auths"`
}

// registryOfConfigKey reads the registry out of a config.json key, which
// may be a URL (https://index.docker.io/v1/) or a bare host[:port].
func registryOfConfigKey(k string) string {
	k = strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://")
	host, _, _ := strings.Cut(k, "/")
	if host == "docker.io" {
		return name.DefaultRegistry
	}
	return host
}
