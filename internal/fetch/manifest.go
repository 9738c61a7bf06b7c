package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
)

// ManifestName is the file, in a fetched model's base directory, that
// records what was fetched: the URI and each file's size and digest. A
// later fetch of the same URI into the same directory finds it and, when
// every file still matches, downloads nothing.
const ManifestName = fetchcontract.ManifestName

// Summary is what a successful fetch reports, as the one line of JSON of
// its termination message (the operator's fetchSummary reads it).
type Summary struct {
	Versions []int64 `json:"versions"`
	Files    int64   `json:"files"`
	Bytes    int64   `json:"bytes"`
	// Digest is "sha256:<hex>" over the sorted list of the model's files,
	// each as its path, size and content digest: the same model always has
	// the same digest, wherever and however it was fetched from.
	Digest string `json:"digest"`
	// Image is the image an oci:// model was pulled from, by digest
	// (registry/repository@sha256:...): what its tag named then.
	Image string `json:"image,omitempty"`
	// SignedBy is the key whose cosign signature of Image verified it
	// (imagesig.Key.ID), where one was required.
	SignedBy string `json:"signedBy,omitempty"`
	// Received is how many bytes the fetch received from the store, TLS
	// and HTTP framing included: what a store's egress is billed for.
	// Files a copy on the volume gave are not in it: a refresh round that
	// finds the model unchanged receives a few kilobytes. -1 in a summary
	// parsed from a fetcher that did not report it.
	Received int64 `json:"received"`
}

type manifest struct {
	// Format is how files are recorded (digest.go); 0 is format 1, whose
	// manifests have no such field.
	Format   int     `json:"format,omitempty"`
	URI      string  `json:"uri"`
	Versions []int64 `json:"versions"`
	Bytes    int64   `json:"bytes"`
	Digest   string  `json:"digest"`
	Image    string  `json:"image,omitempty"`
	SignedBy string  `json:"signedBy,omitempty"`
	// ArchiveVersion is what the store named the archive (the one file
	// the URI names) by when it was downloaded: S3's or Azure's ETag,
	// GCS's generation, an http(s):// server's strong ETag. A later fetch
	// of the URI that the store names by the same takes this copy
	// (fetcher.takeUnchangedArchive).
	ArchiveVersion string `json:"archiveVersion,omitempty"`
	// VersionDir is the directory the listed files were put in: "1" for a
	// SavedModel listed without a version directory (normalize). A
	// refetch looks them up by the paths the store lists (findEarlier).
	VersionDir string       `json:"versionDir,omitempty"`
	Files      []fileRecord `json:"files"`
}

func (m manifest) summary() Summary {
	return Summary{Versions: m.Versions, Files: int64(len(m.Files)), Bytes: m.Bytes, Digest: m.Digest, Image: m.Image, SignedBy: m.SignedBy}
}

func newManifest(uri string, versions []int64, files []fileRecord) manifest {
	files = sortedRecords(files)
	var total int64
	for _, f := range files {
		total += f.Size
	}
	return manifest{Format: manifestFormat, URI: uri, Versions: versions, Bytes: total, Digest: digestOf(files), Files: files}
}

func (m manifest) format() int { return max(m.Format, 1) }

func sortedRecords(files []fileRecord) []fileRecord {
	out := append([]fileRecord(nil), files...)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// digestOf hashes the sorted list of files: for each, its path, size and
// content digest, each line "path\x00size\x00digest\n", where digest is as
// the record holds it: "<sha256>", "chunked:<sha256>" (format 2),
// "blake3:<blake3>" or "chunked-blake3:<blake3>" (format 3). So a model
// keeps the digest it was given in the format it was fetched in.
func digestOf(files []fileRecord) string {
	h := sha256.New()
	for _, f := range sortedRecords(files) {
		// A hash's Write never fails.
		switch {
		case f.ChunkedBLAKE3 != "":
			_, _ = fmt.Fprintf(h, "%s\x00%d\x00chunked-blake3:%s\n", f.Path, f.Size, f.ChunkedBLAKE3)
		case f.BLAKE3 != "":
			_, _ = fmt.Fprintf(h, "%s\x00%d\x00blake3:%s\n", f.Path, f.Size, f.BLAKE3)
		case f.ChunkedSHA256 != "":
			_, _ = fmt.Fprintf(h, "%s\x00%d\x00chunked:%s\n", f.Path, f.Size, f.ChunkedSHA256)
		default:
			_, _ = fmt.Fprintf(h, "%s\x00%d\x00%s\n", f.Path, f.Size, f.SHA256)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func writeManifest(dir string, m manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(dir, ManifestName)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return classify(err, p)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close()
		return classify(err, p)
	}
	// publish flushes it with the model.
	if err := f.Close(); err != nil {
		return classify(err, p)
	}
	return nil
}

func readManifest(dir string) (manifest, error) {
	var m manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(b, &m)
}

// hashTree lists every file below dir (following symbolic links to files,
// leaving out the manifest at the top) with its size and digest as format
// records them, reading up to concurrency files, or chunks of a large
// file, at once.
func hashTree(ctx context.Context, dir string, format, concurrency int, prog *progress) ([]fileRecord, error) {
	paths, err := listFiles(dir)
	if err != nil {
		return nil, err
	}
	return hashFiles(ctx, dir, paths, format, concurrency, prog)
}

// hashFiles records the files at paths (relative to dir) as format
// records them, hashing up to concurrency files, or chunks of a large
// file, at once.
func hashFiles(ctx context.Context, dir string, paths []string, format, concurrency int, prog *progress) ([]fileRecord, error) {
	records := make([]fileRecord, len(paths))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(concurrency, 1))
	for i := range paths {
		if gctx.Err() != nil {
			break
		}
		p := filepath.Join(dir, paths[i])
		st, err := os.Stat(p)
		if err != nil {
			return nil, classify(err, p)
		}
		if !st.Mode().IsRegular() {
			return nil, permanentf(servingv1alpha1.ReasonInvalidLayout, "%s is not a regular file", p)
		}
		records[i].Path = filepath.ToSlash(paths[i])
		if format < 2 || st.Size() < chunkedMinSize {
			g.Go(func() error {
				sum, size, err := hashFile(p, 0, -1, format, prog)
				if err != nil {
					return err
				}
				records[i] = withPath(sum.record(size), records[i].Path)
				return nil
			})
			continue
		}
		hashChunks(g, p, st.Size(), format, &records[i], prog)
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return nil, classify(ctx.Err(), dir)
		}
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, classify(err, dir)
	}
	return records, nil
}

// listFiles lists the paths, relative to dir, of the files below it but
// the manifest at the top.
func listFiles(dir string) ([]string, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if rel != ManifestName {
			paths = append(paths, rel)
		}
		return nil
	})
	if err != nil {
		return nil, classify(err, dir)
	}
	return paths, nil
}

// withPath is rec with its path set.
func withPath(rec fileRecord, path string) fileRecord {
	rec.Path = path
	return rec
}

// hashChunks hashes each chunk of the large file p on its own, in g, and
// fills rec (whose Path is set) as format records it once the last one is
// hashed.
func hashChunks(g *errgroup.Group, p string, size int64, format int, rec *fileRecord, prog *progress) {
	sums := newChunkTable(size)
	var left atomic.Int64
	left.Store(int64(len(sums) / digestSize))
	for off := int64(0); off < size; off += digestChunkSize {
		g.Go(func() error {
			sum, _, err := hashFile(p, off, min(digestChunkSize, size-off), format, prog)
			if err != nil {
				return err
			}
			sums.put(off, sum.chunkSums())
			if left.Add(-1) == 0 {
				*rec = withPath(recordOf(format, size, "", sums), rec.Path)
				if prog != nil {
					prog.files.Add(1)
				}
			}
			return nil
		})
	}
}

// hashFile hashes, as format records them, the n bytes of the file p at
// off, a chunk of a large file, or, when n < 0, the whole file. It returns
// the bytes hashed.
func hashFile(p string, off, n int64, format int, prog *progress) (*contentHash, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, 0, classify(err, p)
	}
	defer func() { _ = f.Close() }()
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	if n < 0 {
		h := newWholeHash(format)
		got, err := io.CopyBuffer(h, f, *bp)
		if err != nil {
			return nil, 0, classify(err, p)
		}
		if prog != nil {
			prog.bytes.Add(got)
			prog.files.Add(1)
		}
		return h, got, nil
	}
	h := newChunksHash(format)
	if err := readFileRange(h, f, off, n, *bp); err != nil {
		return nil, 0, classify(err, p)
	}
	if prog != nil {
		prog.bytes.Add(n)
	}
	return h, n, nil
}

// matches tells whether dir holds exactly the files of m, same sizes and
// same content.
func (m manifest) matches(ctx context.Context, dir string, concurrency int) (bool, string) {
	if m.format() > manifestFormat {
		return false, fmt.Sprintf("the manifest has format %d, newer than this fetcher's %d", m.format(), manifestFormat)
	}
	have, err := hashTree(ctx, dir, m.format(), concurrency, nil)
	if err != nil {
		return false, err.Error()
	}
	if len(have) != len(m.Files) {
		return false, fmt.Sprintf("%d files, the manifest lists %d", len(have), len(m.Files))
	}
	want := map[string]fileRecord{}
	for _, f := range m.Files {
		want[f.Path] = f
	}
	for _, f := range have {
		w, ok := want[f.Path]
		if !ok || w.content() != f.content() {
			return false, fmt.Sprintf("%s differs from the manifest", f.Path)
		}
	}
	return true, ""
}
