package fetch

import (
	"errors"
	"os"

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

// startWriteBack starts writing the n bytes of f at off to disk, without
// waiting: the flush before publishing then has little left to wait for.
func startWriteBack(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
