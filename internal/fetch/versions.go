package fetch

import (
	"maps"
	"slices"
	"strings"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
)

// A store a training pipeline publishes to gains a version directory
// with each run, and TF Serving serves only those its version policy
// names: the latest one by default. Copying the others would fill the
// volume, and the store's egress, with versions nothing loads. So a
// listed model keeps only the version directories Options.Versions
// selects, or the pin's, and whatever is not a version directory (for
// the layout check to report). An archive or an image is taken whole.

// versionsToKeep is the selection of this fetch: the versions the pin
// names, when a Job fetched the model before this pod, else the
// options'.
func (f *fetcher) versionsToKeep() fetchcontract.Versions {
	if len(f.o.Pin.Versions) > 0 {
		return fetchcontract.Versions{Specific: f.o.Pin.Versions}
	}
	return f.o.Versions
}

// keepServedVersions drops from l the files and directories of the
// version directories the selection does not take. A listing without a
// version directory (a SavedModel at its top, served as version 1) is
// kept whole.
func (f *fetcher) keepServedVersions(l Listing, shown string) (Listing, error) {
	sel := f.versionsToKeep()
	if sel.All() {
		return l, nil
	}
	found := map[int64]bool{}
	for _, o := range l.Objects {
		if v, ok := versionOfPath(o.Key, false); ok {
			found[v] = true
		}
	}
	for _, d := range l.Dirs {
		if v, ok := versionOfPath(d, true); ok {
			found[v] = true
		}
	}
	if len(found) == 0 {
		return l, nil
	}
	all := slices.Sorted(maps.Keys(found))
	kept := sel.Select(all)
	switch {
	case len(kept) == len(all):
		return l, nil
	case len(kept) > 0:
	case len(f.o.Pin.Versions) > 0:
		return l, permanentf(servingv1alpha1.ReasonModelChanged, "%s holds versions %s, none of those its fetch Job fetched (%s): it changed in place since; a new spec.model.refetch fetches what it holds now, for every pod",
			shown, fetchcontract.JoinVersions(all, ", "), fetchcontract.JoinVersions(sel.Specific, ", "))
	default:
		// Only a list of versions can select none of those there.
		return l, permanentf(servingv1alpha1.ReasonNotFound, "%s holds versions %s, and the model's versionPolicy serves %s: none of them",
			shown, fetchcontract.JoinVersions(all, ", "), fetchcontract.JoinVersions(sel.Specific, ", "))
	}
	dropped := func(p string, dir bool) bool {
		v, ok := versionOfPath(p, dir)
		return ok && !slices.Contains(kept, v)
	}
	out := l
	out.Objects, out.Dirs = nil, nil
	var left []Object
	for _, o := range l.Objects {
		if dropped(o.Key, false) {
			left = append(left, o)
		} else {
			out.Objects = append(out.Objects, o)
		}
	}
	for _, d := range l.Dirs {
		if !dropped(d, true) {
			out.Dirs = append(out.Dirs, d)
		}
	}
	f.log.Info("fetching only the versions the version policy serves",
		"versions", kept, "found", all, "selection", sel.String(), "filesLeft", len(left), "bytesLeft", totalOf(left))
	return out, nil
}

// versionOfPath is the version of the version directory a listed path
// is in: its first component, when that names a version and is a
// directory (any component of a directory's path; all but the last of a
// file's).
func versionOfPath(p string, dir bool) (int64, bool) {
	top, _, nested := strings.Cut(p, "/")
	if !nested && !dir {
		return 0, false
	}
	return versionName(top)
}
