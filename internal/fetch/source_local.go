package fetch

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// localSource is a directory (or a single file, an archive say) of the
// fetch pod's file system: a hostPath or CSI volume, or a test's model.
type localSource struct {
	root     string
	single   bool
	maxFiles int
}

func newLocalSource(loc storageuri.Location, maxFiles int) Source {
	return &localSource{root: loc.Path, maxFiles: maxFiles}
}

func (s *localSource) List(context.Context) (Listing, error) {
	st, err := os.Stat(s.root)
	if err != nil {
		return Listing{}, classify(err, s.root)
	}
	if st.Mode().IsRegular() {
		s.single = true
		return Listing{Single: true, Objects: []Object{{Key: filepath.Base(s.root), Size: st.Size()}}}, nil
	}
	if !st.IsDir() {
		return Listing{}, permanentf(servingv1alpha1.ReasonInvalidLayout, "%s is neither a directory nor a file", s.root)
	}
	var l Listing
	err = filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		info, err := os.Stat(p) // follows symbolic links to files
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			l.Dirs = append(l.Dirs, rel)
		case info.Mode().IsRegular():
			l.Objects = append(l.Objects, Object{Key: rel, Size: info.Size()})
			if len(l.Objects) > s.maxFiles {
				return permanentf(servingv1alpha1.ReasonTooLarge, "%s holds more than %d files", s.root, s.maxFiles)
			}
		case info.IsDir():
			return permanentf(servingv1alpha1.ReasonInvalidLayout, "%s: symbolic links to directories are not supported", p)
		default:
			return permanentf(servingv1alpha1.ReasonInvalidLayout, "%s is not a regular file", p)
		}
		return nil
	})
	if err != nil {
		return Listing{}, classify(err, s.root)
	}
	if len(l.Objects) == 0 {
		return Listing{}, permanentf(servingv1alpha1.ReasonNotFound, "no files under %s", s.root)
	}
	return l, nil
}

func (s *localSource) Open(_ context.Context, rel string) (io.ReadCloser, objectInfo, error) {
	p := s.root
	if !s.single {
		p = filepath.Join(s.root, filepath.FromSlash(rel))
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, objectInfo{}, classify(err, p)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, objectInfo{}, classify(err, p)
	}
	return f, objectInfo{Size: st.Size()}, nil
}

func (s *localSource) Describe(rel string) string {
	if s.single || rel == "" {
		return s.root
	}
	return filepath.Join(s.root, filepath.FromSlash(rel))
}

func (s *localSource) Close() error { return nil }
