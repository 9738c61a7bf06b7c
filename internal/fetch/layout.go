package fetch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// A model's base directory, as TF Serving reads it, holds one directory
// per version, named by a positive integer, each holding a SavedModel:
//
//	<base>/1/saved_model.pb    (or saved_model.pbtxt)
//	<base>/1/variables/
//	<base>/2/...
//
// and, once fetched, the fetch's manifest. A version directory's name may
// be zero-padded (00000123 is version 123), as in TF Serving's own test
// models; files keep the directory's name, everything else reports the
// number.

// savedModelFiles are the names of a SavedModel's graph file.
var savedModelFiles = []string{"saved_model.pb", "saved_model.pbtxt"}

// versionName tells whether name is a version directory's name, and which
// version. TF Serving parses names with safe_strto64, so leading zeros
// are accepted; the signs and surrounding spaces it would also accept are
// not, so that such a directory is reported rather than silently served
// under a number its owner may not expect. Version 0 is refused because
// the API's version policies and labels start at 1.
func versionName(name string) (int64, bool) {
	if name == "" {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(name, 10, 64)
	if err != nil || v <= 0 {
		return 0, false
	}
	return v, true
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
			return nil, nil, permanentf(servingv1alpha1.ReasonInvalidLayout, "the model has both a SavedModel at its top and a version directory %s/; keep one of them", e.Name())
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
// in messages; archive tells that dir was extracted from an archive,
// whose layout is fixed by repacking it rather than by another URI.
func verifyLayout(dir, shown string, archive bool) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, permanentf(servingv1alpha1.ReasonNotFound, "%s does not exist", shown)
		}
		return nil, classify(err, shown)
	}
	// The on-disk name is kept beside the number: a padded name
	// (00000123) is where the files are, the number what is reported.
	dirOf := map[int64]string{}
	var unexpected []string
	for _, e := range entries {
		name := e.Name()
		if name == ManifestName {
			continue
		}
		v, isVersion := versionName(name)
		if st, err := os.Stat(filepath.Join(dir, name)); isVersion && err == nil && st.IsDir() {
			if other, dup := dirOf[v]; dup {
				// TF Serving keeps one of the two with only a warning in its
				// log, so which files are served would be left to chance.
				return nil, permanentf(servingv1alpha1.ReasonInvalidLayout, "%s: the directories %s/ and %s/ are both version %d, and TF Serving would load only one of them; keep one", shown, other, name, v)
			}
			dirOf[v] = name
			continue
		}
		unexpected = append(unexpected, entryLabel(dir, name))
	}
	if len(dirOf) == 0 {
		return nil, noVersions(dir, shown, len(entries) == 0, unexpected, archive)
	}
	if len(unexpected) > 0 {
		return nil, permanentf(servingv1alpha1.ReasonInvalidLayout, "%s: %s at the top of the model; only version directories named by a positive integer (1/, 2/, ...) may be there", shown, summarizeNames(unexpected))
	}
	versions := make([]int64, 0, len(dirOf))
	for v := range dirOf {
		versions = append(versions, v)
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	for _, v := range versions {
		if err := verifyVersion(dir, dirOf[v], v); err != nil {
			return nil, err
		}
	}
	return versions, nil
}

// noVersions is the failure of a base directory without a version
// directory, saying what it holds instead and, where it can, where the
// SavedModel is.
func noVersions(dir, shown string, empty bool, unexpected []string, archive bool) error {
	switch {
	case hasSavedModel(dir):
		return permanentf(servingv1alpha1.ReasonInvalidLayout, "%s holds a SavedModel without a version directory; TF Serving needs it in %s/1/", shown, strings.TrimSuffix(shown, "/"))
	case empty:
		return permanentf(servingv1alpha1.ReasonInvalidLayout, "%s is empty: no SavedModel found", shown)
	}
	msg := fmt.Sprintf("no SavedModel found in %s: expected <version>/saved_model.pb and <version>/variables/; found %s", shown, summarizeNames(unexpected))
	if hint := misplacedModelHint(findSavedModel(dir), shown, archive); hint != "" {
		msg += "; " + hint
	}
	return permanentf(servingv1alpha1.ReasonInvalidLayout, "%s", msg)
}

// verifyVersion checks that the version directory name (version v) of dir
// holds a SavedModel and its variables.
func verifyVersion(dir, name string, v int64) error {
	vdir := filepath.Join(dir, name)
	label := fmt.Sprintf("version %d", v)
	if name != strconv.FormatInt(v, 10) {
		label += " (" + name + "/)"
	}
	if !hasSavedModel(vdir) {
		found := "nothing"
		if es, err := os.ReadDir(vdir); err == nil && len(es) > 0 {
			names := make([]string, len(es))
			for i, e := range es {
				names[i] = entryLabel(vdir, e.Name())
			}
			found = summarizeNames(names)
		}
		return permanentf(servingv1alpha1.ReasonInvalidLayout, "%s has no saved_model.pb or saved_model.pbtxt (found %s)", label, found)
	}
	if st, err := os.Stat(filepath.Join(vdir, "variables")); err != nil || !st.IsDir() {
		return permanentf(servingv1alpha1.ReasonInvalidLayout, "%s has no variables/ directory beside its SavedModel", label)
	}
	return nil
}

// misplacedModelHint tells how to fix a model whose SavedModel graph was
// found at found (a slash-separated path below the model's top, "" for
// none) rather than in a version directory at the top. Pointing the URI
// elsewhere is suggested only when the model is deeper than the URI; a
// SavedModel one level down is already where a version belongs, under a
// name that is not a version.
func misplacedModelHint(found, shown string, archive bool) string {
	vdir := path.Dir(found)
	if found == "" || vdir == "." {
		return ""
	}
	holder := path.Dir(vdir)
	if holder == "." {
		return fmt.Sprintf("%s/ holds a SavedModel, but TF Serving takes only a directory named by a positive integer as a version: rename it (to 1/, say)", vdir)
	}
	hint := fmt.Sprintf("there is a SavedModel at %s: ", found)
	if archive {
		hint += fmt.Sprintf("pack the content of %s/ at the top of the archive", holder)
	} else {
		hint += fmt.Sprintf("point the URI at %s/%s, the directory holding its version directories", strings.TrimSuffix(shown, "/"), holder)
	}
	if _, ok := versionName(path.Base(vdir)); !ok {
		hint += fmt.Sprintf(", and rename %s/ to a positive integer (1/, say)", path.Base(vdir))
	}
	return hint
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
