package fetch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// preallocate gives f its size's blocks before the parts of a ranged
// download arrive, so that a volume too small fails at once and the file
// is laid out in one piece. A file system that cannot allocate ahead gets
// a sparse file instead.
func preallocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return f.Truncate(size)
	}
	return err
}

// syncFileSystem flushes everything written to the file system that holds
// dir: one syncfs(2). Since Linux 5.8 it reports a write-back error of any
// file written after dir was opened. ok is false where it is not
// available.
func syncFileSystem(dir *os.File) (ok bool, err error) {
	err = unix.Syncfs(int(dir.Fd()))
	if errors.Is(err, unix.ENOSYS) {
		return false, nil
	}
	return true, err
}

// pendingWrites is what the node has written to files and not yet put on
// disk, in bytes; -1 when it cannot be read.
func pendingWrites() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return -1
	}
	return parsePendingWrites(b)
}

// startWriteBack starts writing the n bytes of f at off to disk, without
// waiting: the flush before publishing then has little left to wait for.
func startWriteBack(f *os.File, off, n int64) {
	if skipFlush {
		return
	}
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// hashFileRange adds the n bytes of f at off to h. It hashes them where
// they lie in the page cache, mapped a few MiB at a time rather than
// copied out by read(2): on a ranged download the hash is the one part
// that cannot run in parallel, and the copy was a tenth of it. A range the
// mapping cannot serve is read instead; a fault while hashing (an I/O
// error behind the mapping) is an error, not a crash.
func hashFileRange(h io.Writer, f *os.File, off, n int64, buf []byte) error {
	if off%int64(os.Getpagesize()) != 0 {
		return readFileRange(h, f, off, n, buf)
	}
	// A window, not the whole range: a mapped page counts in the process's
	// resident set while it is mapped.
	const window = 4 << 20
	for done := int64(0); done < n; done += window {
		if err := hashMapped(h, f, off+done, min(window, n-done), buf); err != nil {
			return err
		}
	}
	return nil
}

func hashMapped(h io.Writer, f *os.File, off, n int64, buf []byte) (err error) {
	m, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return readFileRange(h, f, off, n, buf)
	}
	defer func() { _ = unix.Munmap(m) }()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("read back %d bytes at %d: a fault in the mapped file: %v", n, off, r)
		}
	}()
	_, _ = h.Write(m) // a hash's Write never fails
	return nil
}
