package fetch

import (
	"syscall"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// checkSpace refuses a download that cannot fit before it starts, saying
// how much it needs: the volume's size is the user's to raise, and a fetch
// that runs out of space half way has only wasted the transfer. An
// archive's need is its compressed size, so for archives this is a floor
// and ENOSPC during extraction still applies. Each file takes whole
// blocks, which for a model of small files is much more than its bytes.
func checkSpace(dir string, objs []Object) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Bsize <= 0 {
		return nil // unknown: running out of space reports itself
	}
	var need int64
	for _, o := range objs {
		if o.Size < 0 {
			return nil
		}
		need += (o.Size + st.Bsize - 1) / st.Bsize * st.Bsize
	}
	return spaceShortfall(need, int64(st.Bavail)*st.Bsize, int64(st.Blocks)*st.Bsize)
}

func spaceShortfall(need, free, size int64) error {
	if need <= free {
		return nil
	}
	return permanentf(servingv1alpha1.ReasonTooLarge,
		"the model needs %s but the model volume has %s free of %s; raise spec.storage.size to at least %s",
		FormatBytes(need), FormatBytes(free), FormatBytes(size), FormatBytes(size-free+need))
}
