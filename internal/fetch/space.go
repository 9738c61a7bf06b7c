package fetch

import "syscall"

// checkSpace refuses a download that cannot fit before it starts, saying
// how much it needs: the volume's size is the user's to raise, and a fetch
// that runs out of space half way has only wasted the transfer. An
// archive's need is its compressed size, so for archives this is a floor
// and ENOSPC during extraction still applies.
func checkSpace(dir string, need int64) error {
	if need <= 0 {
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil // unknown: running out of space reports itself
	}
	return spaceShortfall(need, int64(st.Bavail)*st.Bsize, int64(st.Blocks)*st.Bsize)
}

func spaceShortfall(need, free, size int64) error {
	if need <= free {
		return nil
	}
	return permanentf(ReasonTooLarge,
		"the model needs %s but the model volume has %s free of %s; raise spec.storage.size to at least %s",
		formatBytes(need), formatBytes(free), formatBytes(size), formatBytes(size-free+need))
}
