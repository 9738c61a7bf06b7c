package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// savedModelFiles are the files that make a version directory loadable.
var savedModelFiles = []string{"saved_model.pb", "saved_model.pbtxt"}

// parseVersion reads a child of a base path as a version number: decimal
// digits only, leading zeros allowed (00000123 is version 123).
func parseVersion(name string) (int64, bool) {
	if name == "" || strings.TrimLeft(name, "0123456789") != "" {
		return 0, false
	}
	v, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// hasSavedModel says whether dir holds a SavedModel TF Serving would find.
func hasSavedModel(dir string) bool {
	for _, f := range savedModelFiles {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil && st.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// versionScan is what one look at a base path found.
type versionScan struct {
	// versions maps each loadable version to its directory.
	versions map[int64]string
	// incomplete are version directories without a SavedModel, which the
	// double leaves alone until one appears.
	incomplete []string
	// duplicates are directories naming a version another one names too
	// (1 and 001); the last in name order wins, as in TF Serving.
	duplicates []string
}

// scanVersions lists a model's base path. A base path that is missing, not
// a directory or not local is an error, which in TF Serving stops the
// whole poll, not just this model's.
func scanVersions(model, basePath string) (versionScan, error) {
	if scheme, _, ok := strings.Cut(basePath, "://"); ok {
		return versionScan{}, errorf(codeInvalidArgument,
			"Could not find base path %s for servable %s with error UNIMPLEMENTED: File system scheme '%s' not implemented (file: '%s'): tfservingdouble reads local paths only",
			basePath, model, scheme, basePath)
	}
	if _, err := os.Stat(basePath); err != nil {
		return versionScan{}, errorf(codeInvalidArgument, "Could not find base path %s for servable %s with error NOT_FOUND: %s not found", basePath, model, basePath)
	}
	entries, err := os.ReadDir(basePath)
	if err != nil {
		return versionScan{}, errorf(codeFailedPrecondition, "Could not list base path %s for servable %s: %v", basePath, model, err)
	}
	scan := versionScan{versions: map[int64]string{}}
	seen := map[int64]string{}
	for _, e := range entries { // in name order
		v, ok := parseVersion(e.Name())
		if !ok {
			continue
		}
		dir := filepath.Join(basePath, e.Name())
		if !hasSavedModel(dir) {
			scan.incomplete = append(scan.incomplete, dir)
			continue
		}
		if prev, dup := seen[v]; dup {
			scan.duplicates = append(scan.duplicates, prev)
		}
		seen[v] = dir
		scan.versions[v] = dir
	}
	return scan, nil
}

// aspire applies a version policy to the versions found: the versions to
// serve, and the specific versions asked for that were not found.
func aspire(p versionPolicy, found map[int64]string) (map[int64]string, []int64) {
	out := map[int64]string{}
	var missing []int64
	switch p.kind {
	case policyAll:
		for v, dir := range found {
			out[v] = dir
		}
	case policySpecific:
		for _, v := range p.specific {
			if dir, ok := found[v]; ok {
				out[v] = dir
			} else if !slices.Contains(missing, v) {
				missing = append(missing, v)
			}
		}
	default:
		versions := make([]int64, 0, len(found))
		for v := range found {
			versions = append(versions, v)
		}
		slices.Sort(versions)
		n := int(max(p.latest, 1))
		for _, v := range versions[max(0, len(versions)-n):] {
			out[v] = found[v]
		}
	}
	return out, missing
}
