package fetch

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/pbtext"
)

// Each fetch generation has a directory of its own on the model volume,
// so that the pods keep serving the old model while the new one comes.
// Without pruning every model ever fetched would stay there, and a
// ModelServer whose model changes daily would fill its volume and fail
// its next fetch with TooLarge.
//
// A fetch therefore first removes the models the serving pods have been
// moved off: those the model config (as mounted into the fetch's pod)
// does not name, and that were published before every model it names.
// The second rule keeps what the config may not show yet: a model
// fetched by another Job a moment ago, whose config the operator has yet
// to write, or has not written since it stopped; but not for longer than
// abandonedAfter, past which the operator that made this fetch's Job has
// read how every other fetch ended. Without that bound, the copies of
// refresh rounds that found the model unchanged, published after the
// copy served and never served themselves, would all stay. A model served again
// (a rollback to a URI fetched before) is touched when it is found
// intact, so that it counts as just published.
//
// A model is renamed away before it is deleted: a pod that still reads
// its directory (one whose config the kubelet has not yet updated) finds
// no base path, which TF Serving takes as an error to retry, and keeps
// serving the versions it has loaded, rather than an empty directory,
// which would make it unload them.

const (
	prunedInfix = ".pruned-"
	// abandonedAfter is past the longest a fetch Job lives (its
	// activeDeadlineSeconds, an hour): another generation's staging or
	// stale directory this old has no fetch left to finish or remove it.
	abandonedAfter = 2 * time.Hour
)

// pruneSuperseded removes the models in dest's parent that servedConfig,
// the serving pods' model config, has moved the pods off, and what
// abandoned fetches of other generations left there. It never fails the
// fetch: what it cannot remove, it names in the log.
func pruneSuperseded(dest, servedConfig string, now time.Time, log *slog.Logger) {
	dir, own := filepath.Dir(dest), filepath.Base(dest)
	if !isGeneration(own, own) {
		log.Info("the destination is not named by a fetch generation; no other model removed", "dest", dest)
		return
	}
	text, err := os.ReadFile(servedConfig)
	if err != nil {
		log.Info("no model config to tell which models are served; no other model removed", "error", err.Error())
		return
	}
	served := map[string]bool{}
	var oldestServed time.Time
	for _, p := range pbtext.StringFields(string(text), "base_path") {
		p = filepath.Clean(p)
		if filepath.Dir(p) != dir {
			continue
		}
		served[filepath.Base(p)] = true
		if at, ok := publishedAt(p); ok && (oldestServed.IsZero() || at.Before(oldestServed)) {
			oldestServed = at
		}
	}
	if oldestServed.IsZero() {
		log.Info("the model config names no published model; no other model removed")
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		log.Warn("could not list the model volume; no other model removed", "error", err.Error())
		return
	}
	for _, e := range entries {
		n, p := e.Name(), filepath.Join(dir, e.Name())
		switch {
		case strings.Contains(n, prunedInfix):
			// What a killed fetch was removing.
			removeLogged(p, "removed what an interrupted removal left", log)
		case abandoned(n, own, p, now):
			removeLogged(p, "removed what an abandoned fetch left", log)
		case e.IsDir() && n != own && !served[n] && isGeneration(n, own):
			at, ok := publishedAt(p)
			if !ok || (!at.Before(oldestServed) && now.Sub(at) <= abandonedAfter) {
				continue
			}
			var bytes int64
			if m, err := readManifest(p); err == nil {
				bytes = m.Bytes
			}
			aside := p + prunedInfix + randomSuffix()
			if err := os.Rename(p, aside); err != nil {
				log.Warn("could not remove a model no pod serves", "path", p, "error", err.Error())
				continue
			}
			removeLogged(aside, "removed a model no pod serves", log, "model", p, "published", at.UTC().Format(time.RFC3339),
				"bytes", bytes)
		}
	}
}

// isGeneration says that name has the form of own, a fetch generation:
// lowercase hex digits, as many.
func isGeneration(name, own string) bool {
	if len(name) != len(own) || name == "" {
		return false
	}
	for _, c := range name {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// abandoned says that p is another generation's staging or stale
// directory, untouched for longer than any fetch lives.
func abandoned(name, own, p string, now time.Time) bool {
	gen, _, ok := strings.Cut(name, ".")
	leftover := strings.HasPrefix(name, stagingPrefix(gen)) || strings.HasPrefix(name, asidePrefix(gen))
	if !ok || !leftover || gen == own || !isGeneration(gen, own) {
		return false
	}
	st, err := os.Lstat(p)
	return err == nil && now.Sub(st.ModTime()) > abandonedAfter
}

// publishedAt is when the model in dir was published: its manifest, the
// last thing written before, is touched again when a fetch finds it
// intact.
func publishedAt(dir string) (time.Time, bool) {
	st, err := os.Lstat(filepath.Join(dir, ManifestName))
	if err != nil || !st.Mode().IsRegular() {
		return time.Time{}, false
	}
	return st.ModTime(), true
}

// markPublished makes the model in dir count as just published.
func markPublished(dir string, now time.Time, log *slog.Logger) {
	if err := os.Chtimes(filepath.Join(dir, ManifestName), now, now); err != nil {
		log.Warn("could not mark the model as served again", "dest", dir, "error", err.Error())
	}
}

func removeLogged(p, msg string, log *slog.Logger, attrs ...any) {
	if err := os.RemoveAll(p); err != nil {
		log.Warn("could not remove "+filepath.Base(p), "path", p, "error", err.Error())
		return
	}
	log.Info(msg, append([]any{"path", p}, attrs...)...)
}
