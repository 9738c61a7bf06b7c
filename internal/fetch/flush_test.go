package fetch

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
)

func TestSyncfsOnlyWhenLittleElseIsPending(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name                 string
		before, now, written int64
		want                 flushMethod
	}{
		{"a quiet node", 1 * mib, 260 * mib, 256 * mib, flushFileSystem},
		{"the model's write-back done already", 0, 2 * mib, 256 * mib, flushFileSystem},
		{"at the budget", othersPendingBudget, othersPendingBudget, 0, flushFileSystem},
		{"a writer busy before the fetch", othersPendingBudget + 1, 0, 256 * mib, flushEachFile},
		{"a writer that began during the fetch", 0, 256*mib + othersPendingBudget + 1, 256 * mib, flushEachFile},
		{"unknown at the start", -1, 0, 0, flushEachFile},
		{"unknown now", 0, -1, 0, flushEachFile},
	} {
		if got := chooseFlush(c.before, c.now, c.written); got != c.want {
			t.Errorf("%s: chooseFlush(%d, %d, %d) = %v, want %v", c.name, c.before, c.now, c.written, got, c.want)
		}
	}
}

func TestPendingWritesAreDirtyPlusWriteback(t *testing.T) {
	meminfo := "MemTotal:       24683508 kB\nDirty:              1536 kB\nWriteback:           512 kB\nWritebackTmp:          0 kB\n"
	if got := parsePendingWrites([]byte(meminfo)); got != 2048<<10 {
		t.Errorf("parsePendingWrites = %d, want %d", got, 2048<<10)
	}
	for name, bad := range map[string]string{
		"no Writeback":   "Dirty: 1536 kB\n",
		"another unit":   "Dirty: 1536 MB\nWriteback: 0 kB\n",
		"not a number":   "Dirty: x kB\nWriteback: 0 kB\n",
		"nothing at all": "",
	} {
		if got := parsePendingWrites([]byte(bad)); got != -1 {
			t.Errorf("%s: parsePendingWrites = %d, want -1", name, got)
		}
	}
	if runtime.GOOS == "linux" {
		if got := pendingWrites(); got < 0 {
			t.Errorf("pendingWrites() = %d on Linux; /proc/meminfo unread", got)
		}
	}
}

// syncLog records what syncEach syncs, in order.
type syncLog struct {
	mu    sync.Mutex
	paths []string
	fail  string
}

func (l *syncLog) sync(p string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paths = append(l.paths, p)
	if p == l.fail {
		return errors.New("write-back failed")
	}
	return syncPath(p)
}

func modelTree(t *testing.T) (root string, files, dirs []string) {
	t.Helper()
	root = t.TempDir()
	dirs = []string{root, filepath.Join(root, "1"), filepath.Join(root, "1", "variables")}
	for _, d := range dirs[1:] {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"manifest.json", "1/saved_model.pb", "1/variables/variables.index", "1/variables/variables.data-00000-of-00001"} {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	return root, files, dirs
}

func TestSyncEachSyncsEveryFileThenEveryDirectory(t *testing.T) {
	root, files, dirs := modelTree(t)
	var l syncLog
	if err := syncEach(root, l.sync); err != nil {
		t.Fatal(err)
	}
	if len(l.paths) != len(files)+len(dirs) {
		t.Fatalf("synced %q; want each of %d files and %d directories once", l.paths, len(files), len(dirs))
	}
	got := slices.Clone(l.paths[:len(files)])
	slices.Sort(got)
	want := slices.Sorted(slices.Values(files))
	if !slices.Equal(got, want) {
		t.Errorf("first synced %q, want the files %q", got, want)
	}
	got = slices.Clone(l.paths[len(files):])
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(dirs)); !slices.Equal(got, want) {
		t.Errorf("then synced %q, want the directories %q", got, want)
	}
}

func TestSyncEachReturnsAFailedSync(t *testing.T) {
	root, files, _ := modelTree(t)
	l := syncLog{fail: files[2]}
	err := syncEach(root, l.sync)
	if err == nil || err.Error() != "write-back failed" {
		t.Fatalf("syncEach = %v, want the failed sync's error", err)
	}
	for _, p := range l.paths {
		if info, statErr := os.Stat(p); statErr == nil && info.IsDir() {
			t.Errorf("synced the directory %s after a file's sync failed", p)
		}
	}
}
