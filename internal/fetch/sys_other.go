//go:build !linux

package fetch

import (
	"io"
	"os"
)

// preallocate makes f its full size, sparse: the parts of a ranged
// download are then written in place.
func preallocate(f *os.File, size int64) error { return f.Truncate(size) }

// syncFileSystem is not available: publish syncs each file instead.
func syncFileSystem(*os.File) (ok bool, err error) { return false, nil }

// pendingWrites is not known: publish syncs each file.
func pendingWrites() int64 { return -1 }

// startWriteBack is left to the flush before publishing.
func startWriteBack(*os.File, int64, int64) {}

// hashFileRange adds the n bytes of f at off to h.
func hashFileRange(h io.Writer, f *os.File, off, n int64, buf []byte) error {
	return readFileRange(h, f, off, n, buf)
}
