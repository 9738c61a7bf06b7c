package fetch

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// A fetch writes into a temporary sibling of the destination, on the same
// file system, and renames it to the destination once complete and
// verified: TF Serving, which watches the destination, never sees a
// partial model.

func stagingPrefix(dest string) string { return filepath.Base(dest) + ".partial-" }
func asidePrefix(dest string) string   { return filepath.Base(dest) + ".stale-" }

// removeLeftovers removes what killed fetches into dest left beside it,
// but keep, a stopped fetch's staging to resume from.
func removeLeftovers(dest, keep string, log *slog.Logger) {
	entries, err := os.ReadDir(filepath.Dir(dest))
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, stagingPrefix(dest)) || strings.HasPrefix(n, asidePrefix(dest)) {
			p := filepath.Join(filepath.Dir(dest), n)
			if p == keep {
				continue
			}
			if err := os.RemoveAll(p); err != nil {
				log.Warn("could not remove a previous fetch's leftovers", "path", p, "error", err)
				continue
			}
			log.Info("removed a previous fetch's leftovers", "path", p)
		}
	}
}

// newStaging creates the temporary sibling of dest that a fetch writes to.
func newStaging(dest string) (string, error) {
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", classify(err, parent)
	}
	dir, err := os.MkdirTemp(parent, stagingPrefix(dest))
	if err != nil {
		return "", classify(err, parent)
	}
	// MkdirTemp makes it 0700; the serving pods must read it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", classify(err, dir)
	}
	return dir, nil
}

// publish makes staging (the open directory) the destination, once
// everything in it is on disk (flushed as how says): anything already at
// dest (a stale or incomplete model) is moved aside first, then removed.
func publish(stagingDir *os.File, dest string, how flushMethod, log *slog.Logger) error {
	staging := stagingDir.Name()
	if err := flush(stagingDir, how); err != nil {
		return classify(err, staging)
	}
	if _, err := os.Lstat(dest); err == nil {
		aside := filepath.Join(filepath.Dir(dest), asidePrefix(dest)+randomSuffix())
		if err := os.Rename(dest, aside); err != nil {
			return classify(err, dest)
		}
		log.Info("moved a stale model aside", "path", dest)
		defer func() {
			if err := os.RemoveAll(aside); err != nil {
				log.Warn("could not remove the stale model", "path", aside, "error", err)
			}
		}()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return classify(err, dest)
	}
	if err := os.Rename(staging, dest); err != nil {
		return classify(err, dest)
	}
	return syncPath(filepath.Dir(dest))
}
