package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// entry is one tar entry of the layer.
type entry struct {
	path     string // absolute, clean
	dir      bool
	mode     int64
	uid, gid int
	content  []byte
}

// collectEntries validates spec's files and directories, reads the host
// files and adds the parents nobody listed, in the layer's order: sorted
// by path, so a parent comes before what it holds and the order does not
// depend on the order of spec.Files.
func collectEntries(spec Spec) ([]entry, error) {
	byPath := map[string]*entry{}
	add := func(e entry) error {
		if err := checkImagePath(e.path); err != nil {
			return err
		}
		if e.mode&^chmodBits != 0 {
			return fmt.Errorf("%s: mode %#o has bits other than chmod's (%#o)", e.path, e.mode, chmodBits)
		}
		if e.uid < 0 || e.gid < 0 {
			return fmt.Errorf("%s: negative uid or gid (%d:%d)", e.path, e.uid, e.gid)
		}
		if _, ok := byPath[e.path]; ok {
			return fmt.Errorf("%s is in the spec twice", e.path)
		}
		byPath[e.path] = &e
		return nil
	}

	for _, f := range spec.Files {
		mode := f.Mode
		if mode == 0 {
			mode = defaultFileMode
		}
		content := f.Content
		if f.HostPath != "" {
			if f.Content != nil {
				return nil, fmt.Errorf("%s: both HostPath (%s) and Content are set", f.Path, f.HostPath)
			}
			b, err := os.ReadFile(f.HostPath)
			if err != nil {
				return nil, fmt.Errorf("read %s for %s in the image: %w", f.HostPath, f.Path, err)
			}
			content = b
		}
		if err := add(entry{path: f.Path, mode: mode, uid: f.UID, gid: f.GID, content: content}); err != nil {
			return nil, err
		}
	}
	for _, d := range spec.Dirs {
		mode := d.Mode
		if mode == 0 {
			mode = defaultDirMode
		}
		if err := add(entry{path: d.Path, dir: true, mode: mode, uid: d.UID, gid: d.GID}); err != nil {
			return nil, err
		}
	}

	// Parents are added after every listed entry, so that a listed Dir
	// keeps its mode and owner and a listed File under another File fails.
	if err := addParents(byPath); err != nil {
		return nil, err
	}

	out := make([]entry, 0, len(byPath))
	for _, e := range byPath {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, nil
}

// addParents adds to byPath the directories above its entries that it
// lacks, with the default mode and root as owner.
func addParents(byPath map[string]*entry) error {
	listed := make([]string, 0, len(byPath))
	for p := range byPath {
		listed = append(listed, p)
	}
	for _, p := range listed {
		for parent := path.Dir(p); parent != "/"; parent = path.Dir(parent) {
			if e, ok := byPath[parent]; ok {
				if !e.dir {
					return fmt.Errorf("%s is under %s, which is a file", p, parent)
				}
				continue
			}
			byPath[parent] = &entry{path: parent, dir: true, mode: defaultDirMode}
		}
	}
	return nil
}

func checkImagePath(p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return fmt.Errorf("path %q in the image must be absolute, clean and not /", p)
	}
	return nil
}

// writeTar writes the entries with nothing of the build host in them: no
// times, user or group names, or host file modes.
func writeTar(w io.Writer, entries []entry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{
			Name:    strings.TrimPrefix(e.path, "/"),
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: epoch,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.content))
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("write the tar header of %s: %w", e.path, err)
		}
		if !e.dir {
			if _, err := tw.Write(e.content); err != nil {
				return fmt.Errorf("write %s into the layer: %w", e.path, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finish the layer's tar: %w", err)
	}
	return nil
}

// gzipDeterministic compresses at level with a header that holds no name
// or time, so the layer digest depends on the tar and the level alone (for
// a given Go release: compress/flate's output may change between
// releases). The default level is within 1% of the best on the manager, at
// a third of the time.
func gzipDeterministic(b []byte, level int) ([]byte, error) {
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, level)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, fmt.Errorf("gzip the layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip the layer: %w", err)
	}
	return out.Bytes(), nil
}
