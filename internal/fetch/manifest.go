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

	"golang.org/x/sync/errgroup"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
)

// ManifestName is the file, in a fetched model's base directory, that
// records what was fetched: the URI and each file's size and sha256. A
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
	// each as its path, size and sha256: the same model always has the
	// same digest, wherever and however it was fetched from.
	Digest string `json:"digest"`
}

type manifest struct {
	URI      string       `json:"uri"`
	Versions []int64      `json:"versions"`
	Bytes    int64        `json:"bytes"`
	Digest   string       `json:"digest"`
	Files    []fileRecord `json:"files"`
}

func (m manifest) summary() Summary {
	return Summary{Versions: m.Versions, Files: int64(len(m.Files)), Bytes: m.Bytes, Digest: m.Digest}
}

func newManifest(uri string, versions []int64, files []fileRecord) manifest {
	files = sortedRecords(files)
	var total int64
	for _, f := range files {
		total += f.Size
	}
	return manifest{URI: uri, Versions: versions, Bytes: total, Digest: digestOf(files), Files: files}
}

func sortedRecords(files []fileRecord) []fileRecord {
	out := append([]fileRecord(nil), files...)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// digestOf hashes the sorted list of files: for each, its path, size and
// content sha256, each line "path\x00size\x00sha256\n".
func digestOf(files []fileRecord) string {
	h := sha256.New()
	for _, f := range sortedRecords(files) {
		_, _ = fmt.Fprintf(h, "%s\x00%d\x00%s\n", f.Path, f.Size, f.SHA256) // a hash's Write never fails
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
// leaving out the manifest at the top) with its size and sha256, reading
// up to concurrency files at once.
func hashTree(ctx context.Context, dir string, concurrency int, prog *progress) ([]fileRecord, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == ManifestName {
			return nil
		}
		paths = append(paths, rel)
		return nil
	})
	if err != nil {
		return nil, classify(err, dir)
	}
	records := make([]fileRecord, len(paths))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(concurrency, 1))
	for i := range paths {
		g.Go(func() error {
			if gctx.Err() != nil {
				return gctx.Err()
			}
			rec, err := hashFile(filepath.Join(dir, paths[i]), prog)
			rec.Path = filepath.ToSlash(paths[i])
			records[i] = rec
			return err
		})
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

func hashFile(p string, prog *progress) (fileRecord, error) {
	f, err := os.Open(p)
	if err != nil {
		return fileRecord{}, classify(err, p)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return fileRecord{}, classify(err, p)
	}
	if !st.Mode().IsRegular() {
		return fileRecord{}, permanentf(servingv1alpha1.ReasonInvalidLayout, "%s is not a regular file", p)
	}
	h := sha256.New()
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	n, err := io.CopyBuffer(h, f, *bp)
	if err != nil {
		return fileRecord{}, classify(err, p)
	}
	if prog != nil {
		prog.bytes.Add(n)
		prog.files.Add(1)
	}
	return fileRecord{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// matches tells whether dir holds exactly the files of m, same sizes and
// same content.
func (m manifest) matches(ctx context.Context, dir string, concurrency int) (bool, string) {
	have, err := hashTree(ctx, dir, concurrency, nil)
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
		if w, ok := want[f.Path]; !ok || w != f {
			return false, fmt.Sprintf("%s differs from the manifest", f.Path)
		}
	}
	return true, ""
}
