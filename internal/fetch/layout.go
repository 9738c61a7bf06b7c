package fetch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// A model's base directory, as TF Serving reads it, holds one directory
// per version, named by a positive integer, each holding a SavedModel:
//
//	<base>/1/saved_model.pb    (or saved_model.pbtxt)
//	<base>/1/variables/
//	<base>/2/...
//
// and, once fetched, the fetch's manifest.

// savedModelFiles are the names of a SavedModel's graph file.
var savedModelFiles = []string{"saved_model.pb", "saved_model.pbtxt"}

// versionName tells whether name is a version directory's name: a
// positive integer, without leading zeros, that fits in an int64.
func versionName(name string) (int64, bool) {
	if name == "" || name[0] < '1' || name[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseInt(name, 10, 64)
	return v, err == nil && v > 0
}

// hasSavedModel tells whether dir holds a SavedModel's graph file.
func hasSavedModel(dir string) bool {
	for _, n := range savedModelFiles {
		if st, err := os.Stat(filepath.Join(dir, n)); err == nil && st.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// normalize arranges freshly fetched files in dir as a base directory:
// an archive's single wrapping directory (model/1/..., when unwrap) is
// removed, and a single SavedModel without a version directory becomes
// version 1. It returns how the files' paths moved.
func normalize(dir string, unwrap bool) (func(string) string, []string, error) {
	move := func(p string) string { return p }
	var notes []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, classify(err, dir)
	}
	if unwrap && len(entries) == 1 && entries[0].IsDir() && !hasSavedModel(dir) {
		name := entries[0].Name()
		if _, isVersion := versionName(name); !isVersion {
			if err := hoist(dir, name); err != nil {
				return nil, nil, err
			}
			prefix := name + "/"
			move = func(p string) string { return strings.TrimPrefix(p, prefix) }
			notes = append(notes, fmt.Sprintf("the archive's top directory %s/ is the model", name))
		}
	}
	if !hasSavedModel(dir) {
		return move, notes, nil
	}
	entries, err = os.ReadDir(dir)
	if err != nil {
		return nil, nil, classify(err, dir)
	}
	for _, e := range entries {
		if _, isVersion := versionName(e.Name()); isVersion && e.IsDir() {
			return nil, nil, permanentf(ReasonInvalidLayout, "the model has both a SavedModel at its top and a version directory %s/; keep one of them", e.Name())
		}
	}
	tmp := filepath.Join(dir, ".version-1-"+randomSuffix())
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, nil, classify(err, dir)
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(tmp, e.Name())); err != nil {
			return nil, nil, classify(err, dir)
		}
	}
	if err := os.Rename(tmp, filepath.Join(dir, "1")); err != nil {
		return nil, nil, classify(err, dir)
	}
	first := move
	move = func(p string) string { return "1/" + first(p) }
	notes = append(notes, "a SavedModel without a version directory is served as version 1")
	return move, notes, nil
}

// hoist moves the children of dir/name up into dir, and removes name.
func hoist(dir, name string) error {
	tmp := filepath.Join(dir, ".unwrap-"+randomSuffix())
	if err := os.Rename(filepath.Join(dir, name), tmp); err != nil {
		return classify(err, dir)
	}
	children, err := os.ReadDir(tmp)
	if err != nil {
		return classify(err, tmp)
	}
	for _, c := range children {
		if err := os.Rename(filepath.Join(tmp, c.Name()), filepath.Join(dir, c.Name())); err != nil {
			return classify(err, dir)
		}
	}
	if err := os.Remove(tmp); err != nil {
		return classify(err, tmp)
	}
	return nil
}

// verifyLayout checks that dir is a base directory TF Serving can serve,
// and returns its versions in ascending order. shown is how dir is named
// in messages.
func verifyLayout(dir, shown string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, permanentf(ReasonNotFound, "%s does not exist", shown)
		}
		return nil, classify(err, shown)
	}
	var versions []int64
	var unexpected []string
	for _, e := range entries {
		name := e.Name()
		if name == ManifestName {
			continue
		}
		v, isVersion := versionName(name)
		if st, err := os.Stat(filepath.Join(dir, name)); isVersion && err == nil && st.IsDir() {
			versions = append(versions, v)
			continue
		}
		unexpected = append(unexpected, entryLabel(dir, name))
	}
	if len(versions) == 0 {
		switch {
		case hasSavedModel(dir):
			return nil, permanentf(ReasonInvalidLayout, "%s holds a SavedModel without a version directory; TF Serving needs it in %s/1/", shown, strings.TrimSuffix(shown, "/"))
		case len(entries) == 0:
			return nil, permanentf(ReasonInvalidLayout, "%s is empty: no SavedModel found", shown)
		}
		msg := fmt.Sprintf("no SavedModel found in %s: expected <version>/saved_model.pb and <version>/variables/; found %s", shown, summarizeNames(unexpected))
		if deeper := findSavedModel(dir); deeper != "" {
			msg += fmt.Sprintf("; there is a SavedModel at %s: point the URI at the directory holding its version directories", deeper)
		}
		return nil, permanentf(ReasonInvalidLayout, "%s", msg)
	}
	if len(unexpected) > 0 {
		return nil, permanentf(ReasonInvalidLayout, "%s: %s at the top of the model; only version directories named by a positive integer (1/, 2/, ...) may be there", shown, summarizeNames(unexpected))
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	for _, v := range versions {
		vdir := filepath.Join(dir, strconv.FormatInt(v, 10))
		if !hasSavedModel(vdir) {
			found := "nothing"
			if es, err := os.ReadDir(vdir); err == nil && len(es) > 0 {
				names := make([]string, len(es))
				for i, e := range es {
					names[i] = entryLabel(vdir, e.Name())
				}
				found = summarizeNames(names)
			}
			return nil, permanentf(ReasonInvalidLayout, "version %d has no saved_model.pb or saved_model.pbtxt (found %s)", v, found)
		}
		if st, err := os.Stat(filepath.Join(vdir, "variables")); err != nil || !st.IsDir() {
			return nil, permanentf(ReasonInvalidLayout, "version %d has no variables/ directory beside its SavedModel", v)
		}
	}
	return versions, nil
}

// entryLabel is name, with a slash for a directory.
func entryLabel(dir, name string) string {
	if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.IsDir() {
		return name + "/"
	}
	return name
}

// summarizeNames lists up to 8 names for a message.
func summarizeNames(names []string) string {
	sort.Strings(names)
	const most = 8
	quoted := make([]string, 0, most)
	for i, n := range names {
		if i == most {
			quoted = append(quoted, fmt.Sprintf("and %d more", len(names)-most))
			break
		}
		quoted = append(quoted, strconv.Quote(n))
	}
	return strings.Join(quoted, ", ")
}

// findSavedModel looks a few levels down dir for a SavedModel, to tell a
// user whose URI points above the model where it is.
func findSavedModel(dir string) string {
	found, seen := "", 0
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || found != "" {
			return filepath.SkipAll
		}
		if seen++; seen > 10000 {
			return filepath.SkipAll
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && strings.Count(rel, string(filepath.Separator)) >= 4 {
			return filepath.SkipDir
		}
		for _, n := range savedModelFiles {
			if d.Name() == n && !d.IsDir() {
				found = filepath.ToSlash(rel)
				return filepath.SkipAll
			}
		}
		return nil
	})
	return found
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
