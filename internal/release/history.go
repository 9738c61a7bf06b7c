package release

import (
	"maps"
	"strconv"
	"sync"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/labels"
)

// Latest is the latest revision of a release, as Get read it, with every
// revision the same read found.
type Latest struct {
	*helmrelease.Release
	revisions []*helmrelease.Release
}

// latestOf is the latest of revisions, nil for none.
func latestOf(revisions []*helmrelease.Release) *Latest {
	if len(revisions) == 0 {
		return nil
	}
	l := &Latest{Release: revisions[0], revisions: revisions}
	for _, r := range revisions[1:] {
		if r.Version > l.Version {
			l.Release = r
		}
	}
	return l
}

// knownHistory answers Helm's reads of one release's history during an
// operation from the revisions its caller has just read (Get), instead of
// listing the namespace's release Secrets again: an upgrade lists them for
// the latest revision, again for the history it prunes to MaxHistory, and
// once more for the deployed revision when there is one to prune. Each
// list makes the apiserver select among every release Secret of the
// namespace, and the operator decode each of the release's revisions.
//
// Helm's writes go through to the store and into the known revisions, so
// a read later in the same operation sees them. A revision another client
// wrote since the caller's read is not seen; neither would it be by Helm's
// own read an instant earlier: the create of the next revision, which
// fails if that revision exists, is what keeps two writers apart, with or
// without this.
type knownHistory struct {
	driver.Driver
	name string

	mu        sync.Mutex
	revisions map[int]*helmrelease.Release
}

func newKnownHistory(d driver.Driver, last *Latest) *knownHistory {
	k := &knownHistory{Driver: d, name: last.Name, revisions: map[int]*helmrelease.Release{}}
	for _, r := range last.revisions {
		if r.Info != nil {
			k.revisions[r.Version] = r
		}
	}
	return k
}

func (k *knownHistory) Query(query map[string]string) ([]*helmrelease.Release, error) {
	if query["name"] != k.name {
		return k.Driver.Query(query)
	}
	// The selector the Secrets driver lists with.
	selector := labels.SelectorFromSet(query)
	k.mu.Lock()
	defer k.mu.Unlock()
	var found []*helmrelease.Release
	for _, r := range k.revisions {
		stored := storedLabels(r)
		if selector.Matches(labels.Set(stored)) {
			// A copy, as each list decodes its own: Helm changes the
			// status of what it reads before writing it back.
			c, info := *r, *r.Info
			c.Info, c.Labels = &info, stored
			found = append(found, &c)
		}
	}
	if len(found) == 0 {
		return nil, driver.ErrReleaseNotFound
	}
	return found, nil
}

func (k *knownHistory) Create(key string, rls *helmrelease.Release) error {
	if err := k.Driver.Create(key, rls); err != nil {
		return err
	}
	k.remember(rls)
	return nil
}

func (k *knownHistory) Update(key string, rls *helmrelease.Release) error {
	if err := k.Driver.Update(key, rls); err != nil {
		return err
	}
	k.remember(rls)
	return nil
}

func (k *knownHistory) Delete(key string) (*helmrelease.Release, error) {
	rls, err := k.Driver.Delete(key)
	if err == nil && rls != nil && rls.Name == k.name {
		k.mu.Lock()
		delete(k.revisions, rls.Version)
		k.mu.Unlock()
	}
	return rls, err
}

func (k *knownHistory) remember(rls *helmrelease.Release) {
	if rls.Name != k.name || rls.Info == nil {
		return
	}
	k.mu.Lock()
	k.revisions[rls.Version] = rls
	k.mu.Unlock()
}

// storedLabels are the labels the Secrets driver stores a revision's
// record with, and a list returns it with: its own, and those that name
// the release, its owner, its status and its revision.
func storedLabels(r *helmrelease.Release) map[string]string {
	l := maps.Clone(r.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l["name"], l["owner"], l["status"], l["version"] = r.Name, "helm", r.Info.Status.String(), strconv.Itoa(r.Version)
	return l
}
