package fetch

import (
	"context"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// A refetch (spec.model.refetch) of a store to which one version was
// added would download every file again into the new generation's
// directory. Where the source lists each file's version (S3's ETag, GCS's
// generation), a file listed with the path, size and version it had when
// the newest model of the same URI beside the destination was fetched is
// hard-linked from there instead: the network carries only what changed.
// A linked file whose size and modification time are still those its
// manifest recorded keeps its recorded digests; any other is hashed
// again, and downloaded after all if it no longer matches them (damaged
// since). So a refresh round that finds the store unchanged reads no
// file of the model, whatever its size.

// earlier is a model fetched before from the same URI, beside dest.
type earlier struct {
	dir   string
	files map[string]fileRecord // by path: those with a source version
	// whole says that the origin names the content (an oci:// image by
	// digest, a download pinned by #sha256): every file is as it was.
	whole bool
	// parts are the parts a stopped fetch completed of the files it had
	// not, by path (resume.go).
	parts map[string][]partRecord
	// archiveVersion is what the store named the archive by.
	archiveVersion string
	// versionDir is the directory of dir the listed files are in (the
	// manifest's VersionDir): files are keyed by their paths below it.
	versionDir string
}

// findEarlier picks, among dest's siblings named as fetch generations,
// the newest model of the same origin (same) whose manifest, in the
// current format, records its files' source versions, or, for a
// content-addressed origin (whole), any files; nil if there is none.
func findEarlier(dest string, same func(manifest) bool, whole bool) *earlier {
	parent, own := filepath.Dir(dest), filepath.Base(dest)
	entries, err := os.ReadDir(parent)
	if err != nil || !isGeneration(own, own) {
		return nil
	}
	var best *earlier
	var bestAt time.Time
	for _, e := range entries {
		if !e.IsDir() || e.Name() == own || !isGeneration(e.Name(), own) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		at, ok := publishedAt(dir)
		if !ok || (best != nil && !at.After(bestAt)) {
			continue
		}
		m, err := readManifest(dir)
		if err != nil || !same(m) || m.format() != manifestFormat {
			continue
		}
		// A content-addressed copy is taken whole, as it lies; files
		// are looked up by the paths the store lists them under.
		versionDir := m.VersionDir
		if whole {
			versionDir = ""
		}
		files := map[string]fileRecord{}
		for _, r := range m.Files {
			if r.Source == "" && !whole {
				continue
			}
			if versionDir != "" {
				var below bool
				if r.Path, below = strings.CutPrefix(r.Path, versionDir+"/"); !below {
					continue
				}
			}
			files[r.Path] = r
		}
		if len(files) > 0 {
			best, bestAt = &earlier{dir: dir, files: files, whole: whole, archiveVersion: m.ArchiveVersion, versionDir: versionDir}, at
		}
	}
	return best
}

// unchanged is the record of obj's copy in the earlier model, if the
// source lists it as it was when that model was fetched.
func (e *earlier) unchanged(obj Object) (fileRecord, bool) {
	if e == nil || (obj.Version == "" && !e.whole) {
		return fileRecord{}, false
	}
	r, ok := e.files[obj.Key]
	return r, ok && r.Size == obj.Size && r.Source == obj.Version
}

// linkUnchanged links into staging the objects the earlier model holds
// unchanged, hashes them there, and returns their records and the
// objects left to download: those it does not hold, and those whose copy
// no longer hashes to its record. A file system without hard links gets
// every object downloaded.
func (e *earlier) linkUnchanged(ctx context.Context, staging string, objs []Object, concurrency int, log *slog.Logger) ([]fileRecord, []Object, error) {
	if e == nil {
		return nil, objs, nil
	}
	linked, want, rest, err := e.link(staging, objs, log)
	if err != nil || len(linked) == 0 {
		return nil, rest, err
	}
	var records []fileRecord
	var bytes int64
	linked, want, records, bytes = untouched(staging, linked, want)
	trusted := len(records)
	got, err := hashLinked(ctx, staging, linked, concurrency)
	if err != nil {
		return nil, nil, err
	}
	for i, obj := range linked {
		if got[i].content() != want[i].content() {
			// Damaged since it was fetched: download it.
			log.Warn("a file of the earlier model no longer matches its manifest; downloading it", "path", obj.Key, "model", e.dir)
			if err := os.Remove(filepath.Join(staging, filepath.FromSlash(obj.Key))); err != nil {
				return nil, nil, classify(err, staging)
			}
			rest = append(rest, obj)
			continue
		}
		records = append(records, got[i])
		bytes += obj.Size
	}
	log.Info("files unchanged since the earlier model were taken from it", "model", e.dir, "files", len(records), "bytes", bytes,
		"hashedAgain", len(records)-trusted, "toDownload", len(rest))
	return records, rest, nil
}

// untouched splits the linked objects: those whose copy in staging has
// the size and modification time their record holds keep their records,
// with the version the source lists them with now, and need no hashing;
// the others, returned first with their records, do.
func untouched(staging string, linked []Object, want []fileRecord) (toHash []Object, toHashWant []fileRecord, kept []fileRecord, keptBytes int64) {
	for i, obj := range linked {
		r := want[i]
		st, err := os.Lstat(filepath.Join(staging, filepath.FromSlash(obj.Key)))
		if err != nil || r.ModTime == 0 || !st.Mode().IsRegular() || st.Size() != r.Size || st.ModTime().UnixNano() != r.ModTime {
			toHash, toHashWant = append(toHash, obj), append(toHashWant, r)
			continue
		}
		r.Source = obj.Version
		kept, keptBytes = append(kept, r), keptBytes+r.Size
	}
	return toHash, toHashWant, kept, keptBytes
}

// stampModTimes records in each record the modification time of its file
// below dir, as the model is about to be published.
func stampModTimes(dir string, records []fileRecord) error {
	for i := range records {
		st, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(records[i].Path)))
		if err != nil {
			return classify(err, dir)
		}
		records[i].ModTime = st.ModTime().UnixNano()
	}
	return nil
}

// link links the objects the earlier model holds unchanged into staging,
// returning them with their records there, and the others. Where a link
// fails, none is kept, and every object is returned as to download.
func (e *earlier) link(staging string, objs []Object, log *slog.Logger) (linked []Object, want []fileRecord, rest []Object, err error) {
	for _, obj := range objs {
		r, ok := e.unchanged(obj)
		if !ok {
			rest = append(rest, obj)
			continue
		}
		target := filepath.Join(staging, filepath.FromSlash(obj.Key))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return nil, nil, nil, classify(err, target)
		}
		if err := os.Link(filepath.Join(e.dir, filepath.FromSlash(path.Join(e.versionDir, obj.Key))), target); err != nil {
			log.Info("could not link a file of the earlier model; downloading every file", "error", err.Error())
			for _, l := range linked {
				if err := os.Remove(filepath.Join(staging, filepath.FromSlash(l.Key))); err != nil {
					return nil, nil, nil, classify(err, staging)
				}
			}
			return nil, nil, objs, nil
		}
		linked, want = append(linked, obj), append(want, r)
	}
	return linked, want, rest, nil
}

// hashLinked records the linked objects as their copies in staging hash,
// each with the version the source listed it with.
func hashLinked(ctx context.Context, staging string, linked []Object, concurrency int) ([]fileRecord, error) {
	paths := make([]string, len(linked))
	for i, obj := range linked {
		paths[i] = filepath.FromSlash(obj.Key)
	}
	got, err := hashFiles(ctx, staging, paths, manifestFormat, concurrency, nil)
	if err != nil {
		return nil, err
	}
	for i, obj := range linked {
		got[i].Source = obj.Version
	}
	return got, nil
}

// linkEarlierCopy takes a content-addressed model (an oci:// image by
// digest, a download pinned by #sha256, an archive its store names by the
// same version) from the newest copy of the same origin beside the
// destination: its directories made, its files linked and hashed again.
// False, with staging emptied, when there is none, or some file could not
// be linked or no longer hashes to its record: the model is then
// downloaded.
func (f *fetcher) linkEarlierCopy(ctx context.Context, staging string) ([]fileRecord, bool) {
	// An origin that names the content needs no version to match.
	e := findEarlier(f.dest, func(m manifest) bool {
		return m.URI == f.origin && (f.archiveVersion == "" || sameVersion(m.ArchiveVersion, f.archiveVersion))
	}, true)
	if e == nil {
		return nil, false
	}
	err := filepath.WalkDir(e.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == e.dir {
			return err
		}
		rel, _ := filepath.Rel(e.dir, p)
		return os.MkdirAll(filepath.Join(staging, rel), 0o755)
	})
	objs := make([]Object, 0, len(e.files))
	for _, r := range e.files {
		objs = append(objs, Object{Key: r.Path, Size: r.Size})
	}
	var records []fileRecord
	var rest []Object
	if err == nil {
		records, rest, err = e.linkUnchanged(ctx, staging, objs, f.o.Concurrency, f.log)
	}
	if err == nil && len(rest) == 0 && len(records) == len(objs) {
		return records, true
	}
	_ = emptyDir(staging)
	f.log.Info("the earlier copy of the model could not all be taken; downloading it", "model", e.dir)
	return nil, false
}

// takeUnchangedArchive takes the archive the URI names from the newest
// copy of the same URI beside the destination when the store names it by
// the version it had when that copy was downloaded, as an S3 refetch takes
// each file it lists with the ETag it had: a refresh round that finds the
// archive unchanged downloads none of it. An http(s):// server is asked
// for the first kilobyte, for its ETag, only when that copy recorded one:
// a strong ETag, which changes whenever the bytes do (RFC 9110, 8.8.1).
func (f *fetcher) takeUnchangedArchive(ctx context.Context, src Source, l Listing, staging string) ([]fileRecord, bool, error) {
	if f.contentAddressed() {
		return nil, false, nil
	}
	version := l.SingleVersion
	if h, ok := src.(*httpSource); ok {
		// The ask is worth a request only where a copy may be taken.
		if e := findEarlier(f.dest, func(m manifest) bool { return m.URI == f.origin }, true); e == nil || e.archiveVersion == "" {
			return nil, false, nil
		}
		err := f.retry.do(ctx, src.Describe(""), func(ctx context.Context) error {
			first, err := h.firstKilobyte(ctx)
			if err == nil {
				version = first.etag
			}
			return err
		})
		if err != nil {
			return nil, false, err
		}
	}
	if version == "" {
		return nil, false, nil
	}
	f.archiveVersion = version
	records, ok := f.linkEarlierCopy(ctx, staging)
	if ok {
		f.log.Info("the store names the archive by the version of the copy fetched before; taking that copy", "version", version)
	}
	return records, ok, nil
}
