package fetch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// A fetch of many files that stops before it publishes (its Job's
// deadline, a failure a retry may fix, a node drained, a pod killed)
// leaves its staging directory beside the destination, with a journal of
// the files it completed (each one's path, size, digests and the version
// the source listed it with) and of the parts it completed of large files
// fetched as ranges (each one's bounds and chunks' digests). The next
// fetch of the same URI into the same destination takes the files still
// listed as they were from there, linked, and hashes each again (a stop
// may have been a crash that lost what was not yet on disk); it links a
// large file begun, checks each part noted against its digests, and
// downloads only the parts and files left. A fetch that ends for good
// (the model missing, too large, refused) leaves nothing.

// journalName is the journal's file in a staging directory; it never
// reaches a published model.
const journalName = ".modelserver-fetch.journal"

// journalHeader is a journal's first line: which fetch the staging
// directory is part of.
type journalHeader struct {
	URI    string `json:"uri"`
	Format int    `json:"format"`
}

// partRecord is a part of a large file downloaded as ranges, completed:
// which version of the object it came from, where it lies, and the
// digests of its chunks. A stopped fetch's file whose every part is not
// yet there is resumed from the parts its journal notes.
type partRecord struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Source string `json:"source"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	Chunks []byte `json:"chunks"`
}

// journalLine is a line of a journal after its header: a completed file,
// or a part of one.
type journalLine struct {
	fileRecord
	Part *partRecord `json:"part,omitempty"`
}

// journal notes the files of a staging directory as they are completed.
// Writes are not synced: what a crash loses of it, or of the files, is
// downloaded again.
type journal struct {
	mu sync.Mutex
	f  *os.File
	// noted counts the files and parts noted.
	noted int
	log   *slog.Logger
}

// openJournal starts the journal of a staging directory; nil, and a fetch
// that cannot be resumed, if it cannot be written.
func openJournal(staging, origin string, log *slog.Logger) *journal {
	f, err := os.OpenFile(filepath.Join(staging, journalName), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		log.Info("a stopped fetch could not be resumed: its journal cannot be written", "error", err.Error())
		return nil
	}
	j := &journal{f: f, log: log}
	if !j.write(journalHeader{URI: origin, Format: manifestFormat}) {
		return nil
	}
	return j
}

// add notes completed files.
func (j *journal) add(records ...fileRecord) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range records {
		if r.Source == "" || j.f == nil || !j.write(r) {
			continue
		}
		j.noted++
	}
}

// addPart notes a completed part of obj's file, as the version of the
// object it came from: its n bytes at off, and its chunks' digests.
func (j *journal) addPart(obj Object, version string, off, n int64, chunks []byte) {
	if j == nil || version == "" {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	p := partRecord{Path: obj.Key, Size: obj.Size, Source: version, Offset: off, Length: n, Chunks: chunks}
	if j.f != nil && j.write(journalLine{Part: &p}) {
		j.noted++
	}
}

func (j *journal) write(v any) bool {
	b, err := json.Marshal(v)
	if err == nil {
		_, err = j.f.Write(append(b, '\n'))
	}
	if err != nil {
		j.log.Info("a stopped fetch could not be resumed: its journal cannot be written", "error", err.Error())
		_ = j.f.Close()
		j.f = nil
	}
	return err == nil
}

// holds says that the journal notes a completed file or part, so that its
// staging directory is worth keeping for the next fetch.
func (j *journal) holds() bool {
	if j == nil {
		return false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.f != nil && j.noted > 0
}

// remove deletes the journal, once every file is in place: the published
// model has its manifest.
func (j *journal) remove(staging string) error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		_ = j.f.Close()
		j.f = nil
	}
	if err := os.Remove(filepath.Join(staging, journalName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return classify(err, staging)
	}
	return nil
}

// findStopped is the newest staging directory beside dest whose journal
// notes completed files of a fetch of origin in the current format, as an
// earlier copy whose files are hashed again before they are taken (they
// carry no modification time); nil if there is none.
func findStopped(dest, origin string) *earlier {
	parent := filepath.Dir(dest)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var best *earlier
	var bestAt int64
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), stagingPrefix(dest)) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		info, err := os.Stat(filepath.Join(dir, journalName))
		if err != nil || (best != nil && info.ModTime().UnixNano() <= bestAt) {
			continue
		}
		if files, parts := readJournal(dir, origin); len(files) > 0 || len(parts) > 0 {
			best, bestAt = &earlier{dir: dir, files: files, parts: parts}, info.ModTime().UnixNano()
		}
	}
	return best
}

// readJournal is what dir's journal notes of a fetch of origin: the files
// completed, and the parts completed of others, by path; nothing for
// another fetch. A line cut short by a stop ends it.
func readJournal(dir, origin string) (map[string]fileRecord, map[string][]partRecord) {
	f, err := os.Open(filepath.Join(dir, journalName))
	if err != nil {
		return nil, nil
	}
	defer func() { _ = f.Close() }()
	lines := bufio.NewScanner(f)
	lines.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var h journalHeader
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &h) != nil || h.URI != origin || h.Format != manifestFormat {
		return nil, nil
	}
	files, parts := map[string]fileRecord{}, map[string][]partRecord{}
	for lines.Scan() {
		var l journalLine
		if json.Unmarshal(lines.Bytes(), &l) != nil {
			break
		}
		if p := l.Part; p != nil {
			if p.Source == "" || !safeRecordPath(p.Path) {
				break
			}
			parts[p.Path] = append(parts[p.Path], *p)
			continue
		}
		r := l.fileRecord
		if r.Source == "" || !safeRecordPath(r.Path) {
			break
		}
		r.ModTime = 0 // hashed again
		files[r.Path] = r
	}
	for p := range files {
		delete(parts, p)
	}
	return files, parts
}

// safeRecordPath says a journal's path stays below its directory.
func safeRecordPath(p string) bool {
	return p != "" && filepath.IsLocal(filepath.FromSlash(p)) && p != journalName
}

// linkCopies links into staging the objects the newest earlier model of
// the same URI holds unchanged, then, of the rest, those a stopped fetch
// completed, and notes them in the journal; it returns their records and
// the objects left to download.
func (f *fetcher) linkCopies(ctx context.Context, staging string, objs []Object) ([]fileRecord, []Object, error) {
	sameURI := func(m manifest) bool { return m.URI == f.origin }
	linked, rest, err := findEarlier(f.dest, sameURI, false).linkUnchanged(ctx, staging, objs, f.o.Concurrency, f.log)
	if err != nil {
		return nil, nil, err
	}
	f.journal.add(linked...)
	if f.stopped == nil || len(rest) == 0 {
		return linked, rest, nil
	}
	resumed, rest, err := f.stopped.linkUnchanged(ctx, staging, rest, f.o.Concurrency, f.log)
	if err != nil {
		return nil, nil, err
	}
	// Noted before the stopped fetch's staging goes: a stop now loses
	// none of it.
	f.journal.add(resumed...)
	var bytes int64
	for _, r := range resumed {
		bytes += r.Size
	}
	f.partial = f.stopped.linkPartial(staging, rest, f.log)
	f.log.Info("resuming a stopped fetch: the files it completed are taken from it", "stopped", f.stopped.dir, "files", len(resumed), "bytes", bytes,
		"toDownload", len(rest), "partlyDownloaded", len(f.partial))
	// Its files are linked: what is left of it is what it had not completed.
	f.dropStopped()
	return append(linked, resumed...), rest, nil
}

// dropStopped removes what the stopped fetch left, once taken from.
func (f *fetcher) dropStopped() {
	if f.stopped == nil {
		return
	}
	if err := os.RemoveAll(f.stopped.dir); err != nil {
		f.log.Warn("could not remove a stopped fetch's leftovers", "path", f.stopped.dir, "error", err)
	}
	f.stopped = nil
}

// clearBeside removes what earlier fetches into dest left beside it, but
// a stopped fetch's staging to resume from, and the models the serving
// pods were moved off.
func (f *fetcher) clearBeside() {
	keep := ""
	if f.stopped = findStopped(f.dest, f.loc.String()); f.stopped != nil {
		keep = f.stopped.dir
	}
	removeLeftovers(f.dest, keep, f.log)
	if f.o.ServedConfig != "" {
		pruneSuperseded(f.dest, f.o.ServedConfig, time.Now(), f.log)
	}
}

// leaveStaging removes the staging of a fetch that failed with err, or
// keeps it for the next attempt: when a retry may fix the failure, and
// the journal notes files it completed.
func (f *fetcher) leaveStaging(staging string, err error) {
	if !AsError(err).Permanent && f.journal.holds() {
		f.log.Info("the fetch stopped; the files and parts it completed are kept for the next attempt", "staging", staging)
		return
	}
	_ = os.RemoveAll(staging)
}

// linkPartial links into staging the files of objs the stopped fetch had
// begun as ranges, whose parts its journal notes, and returns those
// parts by path, for the download to check and keep (fetchRanged).
func (e *earlier) linkPartial(staging string, objs []Object, log *slog.Logger) map[string][]partRecord {
	out := map[string][]partRecord{}
	for _, obj := range objs {
		var parts []partRecord
		for _, p := range e.parts[obj.Key] {
			if p.Size == obj.Size && p.Source == obj.Version && obj.Version != "" {
				parts = append(parts, p)
			}
		}
		if len(parts) == 0 {
			continue
		}
		target := filepath.Join(staging, filepath.FromSlash(obj.Key))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			continue
		}
		if err := os.Link(filepath.Join(e.dir, filepath.FromSlash(obj.Key)), target); err != nil {
			log.Info("could not link a file a stopped fetch had begun; downloading it whole", "path", obj.Key, "error", err.Error())
			continue
		}
		out[obj.Key] = parts
	}
	return out
}

// checkedParts checks the parts a stopped fetch completed of the file of obj,
// open in f, against the digests its journal noted, and returns those
// that still hash to them, by index, with their chunks' digests: parts of
// the same bounds the download makes now (partSize), of the version the
// source lists now.
func checkedParts(ctx context.Context, f *os.File, obj Object, parts []partRecord, partSize int64) map[int][]byte {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	kept := map[int][]byte{}
	for _, p := range parts {
		if ctx.Err() != nil || p.Offset%partSize != 0 || p.Length != min(partSize, obj.Size-p.Offset) || p.Source != obj.Version {
			continue
		}
		h := newChunksHash(manifestFormat)
		if err := hashFileRange(h, f, p.Offset, p.Length, *bp); err != nil || !bytes.Equal(h.chunkSums(), p.Chunks) {
			continue
		}
		kept[int(p.Offset/partSize)] = p.Chunks
	}
	return kept
}

// unbegun are the objects whose files take space yet: not those a stopped
// fetch had begun, allocated whole when it began them.
func (f *fetcher) unbegun(objs []Object) []Object {
	if len(f.partial) == 0 {
		return objs
	}
	return slices.DeleteFunc(slices.Clone(objs), func(o Object) bool {
		_, begun := f.partial[o.Key]
		return begun
	})
}
