package fetch

import (
	"archive/tar"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BenchmarkFetchOCI pulls the 256 MiB model of BenchmarkFetchS3 (64 files
// of random bytes, as weights are) from an in-process registry over
// loopback, as a model image of one layer: gzip, as image builders
// compress by default, and plain tar. The baseline pulls the gzip layer
// and unpacks it with no hashing, checks or sync, as `crane export | tar
// x` would. Then the gzip layer from a registry that caps each download
// at 50 MB/s, as one behind a CDN caps a connection: as one download
// (Concurrency 1) and as the fetch does, in ranges ociLayersAtOnce at a
// time.
func BenchmarkFetchOCI(b *testing.B) {
	reg := newTestRegistry(b, "")
	es := entries(prefixed("models/", benchModelFiles()))
	layers := map[string]v1.Layer{
		"gzip": static.NewLayer(tarball(b, true, es), types.OCILayer),
		"tar":  static.NewLayer(tarball(b, false, es), types.OCIUncompressedLayer),
	}
	total := int64(benchFiles * benchFileSize)
	rates, uri := map[string]float64{}, map[string]string{}
	for _, kind := range []string{"gzip", "tar"} {
		img, err := mutate.AppendLayers(empty.Image, layers[kind])
		if err != nil {
			b.Fatal(err)
		}
		uri[kind] = reg.push(b, "bench:"+kind, img)
		b.Run(kind, func(b *testing.B) {
			rates[kind] = fetchRate(b, uri[kind], "", DefaultConcurrency, total)
		})
	}
	b.Run("baseline", func(b *testing.B) {
		rates["baseline"] = float64(total) / 1e6 / timeEachRun(b, total, func(dest string) error {
			return pullAndUntar(reg.host+"/bench:gzip", dest)
		}).Seconds()
	})
	reg.streamRate.Store(50e6)
	defer reg.streamRate.Store(0)
	for _, conc := range []int{1, DefaultConcurrency} {
		kind := fmt.Sprintf("50MBps-a-stream/streams=%d", min(conc, ociLayersAtOnce))
		b.Run(kind, func(b *testing.B) {
			rates[kind] = fetchRate(b, uri["gzip"], "", conc, total)
		})
	}
	b.Logf("256 MiB in one layer over loopback: gzip %.0f MB/s, plain tar %.0f MB/s; the baseline (pull and unpack the gzip layer, nothing checked) %.0f MB/s; at 50 MB/s a stream, gzip %.0f MB/s as one download, %.0f MB/s in ranges %d at once",
		rates["gzip"], rates["tar"], rates["baseline"], rates["50MBps-a-stream/streams=1"], rates[fmt.Sprintf("50MBps-a-stream/streams=%d", ociLayersAtOnce)], ociLayersAtOnce)
}

// BenchmarkFetchOCIArtifact pulls the same model as an oras artifact, a
// layer per file, one file at a time (Concurrency 1) and as the fetch
// does (ociLayersAtOnce at a time): over loopback, and from a registry
// that caps each download at 50 MB/s, as one behind a CDN caps a
// connection.
func BenchmarkFetchOCIArtifact(b *testing.B) {
	reg := newTestRegistry(b, "")
	uri := reg.push(b, "bench:artifact", filesArtifact(b, benchModelFiles()))
	total := int64(benchFiles * benchFileSize)
	rates := map[string]float64{}
	for _, capped := range []bool{false, true} {
		for _, conc := range []int{1, DefaultConcurrency} {
			kind := fmt.Sprintf("loopback/files-at-once=%d", min(conc, ociLayersAtOnce))
			if capped {
				kind = fmt.Sprintf("50MBps-a-stream/files-at-once=%d", min(conc, ociLayersAtOnce))
				reg.streamRate.Store(50e6)
			}
			b.Run(kind, func(b *testing.B) {
				rates[kind] = fetchRate(b, uri, "", conc, total)
			})
		}
	}
	b.Logf("256 MiB as an artifact of %d files: over loopback %.0f MB/s one at a time, %.0f MB/s %d at once; at 50 MB/s a stream %.0f MB/s one at a time, %.0f MB/s %d at once",
		benchFiles, rates["loopback/files-at-once=1"], rates[fmt.Sprintf("loopback/files-at-once=%d", ociLayersAtOnce)], ociLayersAtOnce,
		rates["50MBps-a-stream/files-at-once=1"], rates[fmt.Sprintf("50MBps-a-stream/files-at-once=%d", ociLayersAtOnce)], ociLayersAtOnce)
}

// pullAndUntar pulls an image's layers and unpacks them into dest, with no
// digest of the files, no checks and no sync.
func pullAndUntar(ref, dest string) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	img, err := remote.Image(r)
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return err
		}
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if err := writePlainly(filepath.Join(dest, filepath.FromSlash(hdr.Name)), tr); err != nil {
				return err
			}
		}
		_ = rc.Close()
	}
	return nil
}
