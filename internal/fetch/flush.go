package fetch

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sync/errgroup"
)

// flushMethod is how a fetch puts its model on disk before publishing it.
type flushMethod int

const (
	// flushFileSystem is one syncfs(2) of the volume's file system: a
	// single journal commit for all the model's files, where a fsync each
	// costs 2,000 small files 6-9 % of their fetch. But it also writes out,
	// and waits for, whatever else is pending on that file system.
	flushFileSystem flushMethod = iota
	// flushEachFile is a fsync of each file, then of each directory: it
	// waits for the model's own writes and the journal commits they need,
	// not for other writers' pending data.
	flushEachFile
)

// othersPendingBudget is the most of other writers' pending data a fetch
// lets syncfs wait for: 0.2 s on a disk that writes 150 MiB/s, about what a
// fsync for each of 2,000 small files costs. On a volume that is a
// directory of the node's own file system (hostPath, a local-path
// provisioner's volume), a neighbour writing 100 MiB/s to that disk kept
// 0.5-2.2 GB pending, and syncfs took 9.6-22 s where a fsync per file took
// 1.6-1.7 s (docs/performance.md, "The flush beside a busy neighbour").
const othersPendingBudget = 32 << 20

// chooseFlush picks syncfs only when the node had almost nothing pending
// when the fetch began (before) and has almost nothing beyond the model's
// own written bytes now: the kernel counts pending writes for all file
// systems together, so a busy node is told apart from a quiet one, not one
// volume from another. A negative count is unknown, and picks a fsync per
// file: it costs a quiet node a little, where syncfs can cost a busy one
// seconds.
func chooseFlush(before, now, written int64) flushMethod {
	if before < 0 || now < 0 || before > othersPendingBudget || now-written > othersPendingBudget {
		return flushEachFile
	}
	return flushFileSystem
}

// parsePendingWrites reads /proc/meminfo's Dirty and Writeback: the bytes
// written to files and not yet on disk, on all the node's file systems.
// -1 when either is missing.
func parsePendingWrites(meminfo []byte) int64 {
	var total int64
	found := 0
	for line := range bytes.Lines(meminfo) {
		name, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok || (string(name) != "Dirty" && string(name) != "Writeback") {
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) != 2 || string(fields[1]) != "kB" {
			return -1
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil || kb < 0 {
			return -1
		}
		total += kb << 10
		found++
	}
	if found != 2 {
		return -1
	}
	return total
}

// flushConcurrency is how many files are synced at once: fsyncs that wait
// together share the file system's journal commits.
const flushConcurrency = 16

// flush puts the files and directories below the open directory root on
// disk, so that a crash after the rename cannot lose them. The files were
// written without syncing, their write-back started as each was complete.
// Where syncfs is not available, each file and directory is synced.
func flush(root *os.File, how flushMethod) error {
	if skipFlush {
		return nil
	}
	if how == flushFileSystem {
		if ok, err := syncFileSystem(root); ok {
			return err
		}
	}
	return syncEach(root.Name(), syncPath)
}

// syncEach syncs every file below root, flushConcurrency at a time, then
// every directory, root included, and returns the first error.
func syncEach(root string, syncOne func(string) error) error {
	var files, dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var g errgroup.Group
	g.SetLimit(flushConcurrency)
	for _, p := range files {
		g.Go(func() error { return syncOne(p) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, d := range dirs {
		if err := syncOne(d); err != nil {
			return err
		}
	}
	return nil
}

// syncPath syncs a file or a directory.
func syncPath(p string) error {
	if skipFlush {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}
