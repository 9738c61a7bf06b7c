package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
)

// verifyTree checks that dir holds exactly the files of want, by path
// below dir, each with its size and sha256, so that a tool that copied
// fast but wrong does not count. Paths in ignore (a fetch's own records)
// are skipped; so are empty directories, which no tool is asked for.
func verifyTree(dir string, want map[string]fileSum, ignore ...string) error {
	var got []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if slices.Contains(ignore, rel) {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", rel)
		}
		got = append(got, rel)
		return nil
	})
	if err != nil {
		return err
	}
	var problems []string
	seen := make(map[string]bool, len(got))
	for _, rel := range got {
		seen[rel] = true
		if _, ok := want[rel]; !ok {
			problems = append(problems, "unexpected "+rel)
		}
	}
	for rel := range want {
		if !seen[rel] {
			problems = append(problems, "missing "+rel)
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("%s: %s", dir, brief(problems))
	}

	g := new(errgroup.Group)
	g.SetLimit(4)
	for _, rel := range got {
		g.Go(func() error {
			sum, err := sumFile(filepath.Join(dir, filepath.FromSlash(rel)))
			if err != nil {
				return err
			}
			if w := want[rel]; sum != w {
				return fmt.Errorf("%s: %s is %d bytes with sha256 %s, want %d bytes with sha256 %s", dir, rel, sum.Size, sum.SHA256, w.Size, w.SHA256)
			}
			return nil
		})
	}
	return g.Wait()
}

func sumFile(p string) (fileSum, error) {
	f, err := os.Open(p)
	if err != nil {
		return fileSum{}, err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fileSum{}, err
	}
	return fileSum{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// brief shows the first few of many problems.
func brief(problems []string) string {
	const shown = 5
	if len(problems) <= shown {
		return strings.Join(problems, ", ")
	}
	return strings.Join(problems[:shown], ", ") + fmt.Sprintf(" and %d more", len(problems)-shown)
}
