package fetch

import (
	"io/fs"
	"path/filepath"
	"syscall"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// checkSpace refuses a download that cannot fit before it starts, saying
// how much it needs: the volume's size is the user's to raise, and a fetch
// that runs out of space half way has only wasted the transfer. An
// archive's need is its compressed size, so for archives this is a floor
// and ENOSPC during extraction still applies. Each file takes whole
// blocks, which for a model of small files is much more than its bytes.
//
// limit, when above 0, is the volume's size where its file system does
// not tell it: an emptyDir's size limit (storage mode PerPod), past which
// the kubelet evicts the pod. What root, the volume, holds already counts
// against it.
func checkSpace(dir string, objs []Object, limit int64, root string) error {
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
	free, size := int64(st.Bavail)*st.Bsize, int64(st.Blocks)*st.Bsize
	if limit > 0 {
		if left := limit - usage(root); left < free {
			free, size = max(left, 0), limit
		}
	}
	return spaceShortfall(need, free, size)
}

// usage is the space the files below root take, as the kubelet counts an
// emptyDir's: their blocks.
func usage(root string) int64 {
	var used int64
	_ = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				used += st.Blocks * 512
			} else {
				used += info.Size()
			}
		}
		return nil
	})
	return used
}

func spaceShortfall(need, free, size int64) error {
	if need <= free {
		return nil
	}
	return permanentf(servingv1alpha1.ReasonTooLarge,
		"the model needs %s but the model volume has %s free of %s; raise spec.storage.size to at least %s",
		FormatBytes(need), FormatBytes(free), FormatBytes(size), FormatBytes(size-free+need))
}
