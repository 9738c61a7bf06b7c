package main

// The manager: what TF Serving's server core, aspired-versions manager
// and servable state monitor do, as far as a client can tell. Loading a
// version is instantaneous here (a check that its SavedModel file exists),
// so the states a version passes through are all logged but START and
// LOADING are never seen by a request.

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
)

type servableState int

const (
	stateStart servableState = iota
	stateLoading
	stateAvailable
	stateUnloading
	stateEnd
)

func (s servableState) String() string {
	return [...]string{"START", "LOADING", "AVAILABLE", "UNLOADING", "END"}[s]
}

// versionState is what the state monitor knows of a version. It outlives
// the version: TF Serving keeps reporting END for versions it unloaded,
// and for models removed from the config.
type versionState struct {
	state servableState
	err   error // the version's health; nil is OK
	dir   string
	arith arithmetic
	// seq orders state changes, so that waiting for a model re-added to
	// the config ignores what its earlier incarnation reached.
	seq uint64
}

type core struct {
	log                    *logger
	metrics                *metrics
	allowUnavailableLabels bool

	mu sync.Mutex
	// changed is closed and replaced at every state change.
	changed chan struct{}
	seq     uint64
	config  serverConfig
	models  map[string]modelConfig
	labels  map[string]map[string]int64
	states  map[string]map[int64]*versionState
	// aspired is the source's last word on each model: the versions the
	// policy selects among those on disk.
	aspired map[string]map[int64]string
	// managed are the versions the manager holds: available, or failed
	// while still aspired (TF Serving does not retry those).
	managed map[string]map[int64]bool
	noted   map[string]bool
	// started is closed once a config is adopted: the file system source
	// exists from then on.
	started chan struct{}
}

func newCore(log *logger, m *metrics, allowUnavailableLabels bool) *core {
	return &core{
		log:                    log,
		metrics:                m,
		allowUnavailableLabels: allowUnavailableLabels,
		changed:                make(chan struct{}),
		models:                 map[string]modelConfig{},
		labels:                 map[string]map[string]int64{},
		states:                 map[string]map[int64]*versionState{},
		aspired:                map[string]map[int64]string{},
		managed:                map[string]map[int64]bool{},
		noted:                  map[string]bool{},
		started:                make(chan struct{}),
	}
}

// reloadConfig applies a model config as TF Serving's ReloadConfig does:
// it checks the list and the labels, then adds and removes models, and
// returns once the models new to the server have a version AVAILABLE (or
// failed). The first config waits for all its models: that is what keeps
// TF Serving's ports closed until its models are loaded.
func (c *core) reloadConfig(ctx context.Context, cfg serverConfig) error {
	c.mu.Lock()
	first := !c.config.set
	if !cfg.set {
		c.mu.Unlock()
		if first {
			c.log.infof("Taking no action for empty config.")
			return nil
		}
		return errorf(codeFailedPrecondition, "Cannot transition to requested config. It is only legal to transition from one ModelConfigList to another.")
	}
	models, err := checkModels(cfg.models)
	if err == nil {
		err = c.updateLabels(models)
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	c.log.infof("Adding/updating models.")
	since := c.seq
	next := map[string]modelConfig{}
	var awaited []string
	for _, m := range models {
		c.log.infof(" (Re-)adding model: %s", m.name)
		if _, known := c.models[m.name]; first || !known {
			awaited = append(awaited, m.name)
		}
		next[m.name] = m
	}
	for _, name := range slices.Sorted(maps.Keys(c.models)) {
		if _, kept := next[name]; !kept {
			c.setAspired(name, nil)
			c.reconcile(name)
		}
	}
	c.config = serverConfig{set: true, models: models}
	c.models = next
	if first {
		close(c.started)
	}
	c.mu.Unlock()

	if err := c.waitAvailable(ctx, awaited, since); err != nil {
		return err
	}
	c.log.infof("Finished adding/updating models")
	return nil
}

// updateLabels replaces the label map with the config's, refusing a
// label on a version that is not AVAILABLE. With
// --allow_version_labels_for_unavailable_models a new label, or one that
// keeps its version, may name any version; moving a label to a version
// that is not AVAILABLE is refused all the same.
func (c *core) updateLabels(models []modelConfig) error {
	next := map[string]map[string]int64{}
	for _, m := range models {
		for _, label := range slices.Sorted(maps.Keys(m.labels)) {
			v := m.labels[label]
			allowAny := false
			if c.allowUnavailableLabels {
				cur, labelled := c.labels[m.name][label]
				allowAny = !labelled || cur == v
			}
			if st := c.states[m.name][v]; !allowAny && (st == nil || st.state != stateAvailable) {
				return errorf(codeFailedPrecondition, "Request to assign label to version %d of model %s, which is not currently available for inference", v, m.name)
			}
			if next[m.name] == nil {
				next[m.name] = map[string]int64{}
			}
			next[m.name][label] = v
		}
	}
	c.labels = next
	return nil
}

// waitAvailable waits until each model's highest version that settled
// after since is AVAILABLE, or fails if it ended instead.
func (c *core) waitAvailable(ctx context.Context, names []string, since uint64) error {
	for {
		c.mu.Lock()
		pending := false
		var failed []string
		for _, name := range names {
			v, st := c.latestSettled(name, since)
			switch {
			case st == nil:
				pending = true
			case st.state != stateAvailable:
				failed = append(failed, fmt.Sprintf("{%s due to error: %v}", servableID(name, v), st.err))
			}
		}
		changed := c.changed
		c.mu.Unlock()
		if !pending {
			if len(failed) > 0 {
				return errorf(codeUnknown, "%d model(s) did not become available: {%s}", len(failed), strings.Join(failed, ", "))
			}
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *core) latestSettled(name string, since uint64) (int64, *versionState) {
	versions := slices.Sorted(maps.Keys(c.states[name]))
	slices.Reverse(versions)
	for _, v := range versions {
		st := c.states[name][v]
		if st.seq > since && (st.state == stateAvailable || st.state == stateEnd) {
			return v, st
		}
	}
	return 0, nil
}

// runSource looks for versions on disk every interval: once for 0, never
// for a negative interval (TF Serving then waits for its models forever).
func (c *core) runSource(ctx context.Context, every time.Duration) {
	if every < 0 {
		return
	}
	select {
	case <-c.started:
	case <-ctx.Done():
		return
	}
	for {
		c.pollFileSystem()
		if every == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// pollFileSystem is one look at every model's base path. As in TF
// Serving, a base path that cannot be read stops the whole look: no model
// gets new versions until every base path can be read.
func (c *core) pollFileSystem() {
	c.mu.Lock()
	models := slices.Clone(c.config.models)
	c.mu.Unlock()

	aspired := make([]map[int64]string, len(models))
	for i, m := range models {
		scan, err := scanVersions(m.name, m.basePath)
		if err != nil {
			c.log.errorf("FileSystemStoragePathSource encountered a filesystem access error: %s", messageOf(err))
			return
		}
		for _, dir := range scan.incomplete {
			c.noteOnce(dir, "Version directory %s has no saved_model.pb or saved_model.pbtxt; not loading it until one appears", dir)
		}
		for _, dir := range scan.duplicates {
			c.log.warnf("Duplicate version directories detected for servable %s; %s will be ignored.", m.name, dir)
		}
		var missing []int64
		aspired[i], missing = aspire(m.policy, scan.versions)
		for _, v := range missing {
			c.log.warnf("Version %d of servable %s, which was requested to be served as a 'specific' version in the servable's version policy, was not found in the file system", v, m.name)
		}
		switch {
		case m.policy.kind == policySpecific && len(m.policy.specific) == 0:
			c.log.warnf("No specific versions requested for servable %s.", m.name)
		case len(aspired[i]) == 0:
			c.log.warnf("No versions of servable %s found under base path %s. Did you forget to name your leaf directory as a number (eg. '/1/')?", m.name, m.basePath)
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range models {
		// A config reloaded during the look is for the next look.
		if cur, ok := c.models[m.name]; !ok || !reflect.DeepEqual(cur, m) {
			continue
		}
		c.setAspired(m.name, aspired[i])
		c.reconcile(m.name)
	}
}

func (c *core) noteOnce(key, format string, args ...any) {
	if !c.noted[key] {
		c.noted[key] = true
		c.log.warnf(format, args...)
	}
}

func (c *core) setAspired(name string, versions map[int64]string) {
	c.aspired[name] = versions
	for v := range c.managed[name] {
		if _, still := versions[v]; !still && c.states[name][v].state == stateEnd {
			delete(c.managed[name], v) // a failed version is retried only if aspired anew
		}
	}
}

// reconcile loads and unloads a model's versions the way TF Serving's
// availability-preserving policy does, one action at a time: unload the
// lowest version no longer aspired once an aspired version is available
// (or nothing is aspired any more), else load the highest aspired version
// not yet loaded. A new version therefore serves before the old one goes.
func (c *core) reconcile(name string) {
	for {
		aspired, managed := c.aspired[name], c.managed[name]
		aspiredServing := false
		var unaspiredServing []int64
		for v := range managed {
			if c.states[name][v].state != stateAvailable {
				continue
			}
			if _, ok := aspired[v]; ok {
				aspiredServing = true
			} else {
				unaspiredServing = append(unaspiredServing, v)
			}
		}
		if len(unaspiredServing) > 0 && (len(aspired) == 0 || aspiredServing || len(unaspiredServing) > 1) {
			c.unload(name, slices.Min(unaspiredServing))
			continue
		}
		next, found := int64(0), false
		for v := range aspired {
			if !managed[v] && (!found || v > next) {
				next, found = v, true
			}
		}
		if !found {
			return
		}
		c.load(name, next, aspired[next])
	}
}

func (c *core) setState(name string, v int64, state servableState, err error, dir string) *versionState {
	if c.states[name] == nil {
		c.states[name] = map[int64]*versionState{}
	}
	st := c.states[name][v]
	if st == nil {
		st = &versionState{}
		c.states[name][v] = st
	}
	c.seq++
	st.state, st.err, st.dir, st.seq = state, err, dir, c.seq
	close(c.changed)
	c.changed = make(chan struct{})
	return st
}

func (c *core) load(name string, v int64, dir string) {
	id := servableID(name, v)
	if c.managed[name] == nil {
		c.managed[name] = map[int64]bool{}
	}
	c.managed[name][v] = true
	c.setState(name, v, stateStart, nil, dir)
	c.log.infof("Approving load for servable version %s", id)
	c.setState(name, v, stateLoading, nil, dir)
	c.log.infof("Loading servable version %s", id)
	c.log.infof("Reading SavedModel from: %s", dir)
	start := time.Now()
	arith, err := loadSavedModel(dir)
	if err != nil {
		c.metrics.countLoad(dir, false, 0)
		c.setState(name, v, stateEnd, err, dir)
		c.log.errorf("Loading servable: %s failed: %v", id, err)
		return
	}
	c.metrics.countLoad(dir, true, time.Since(start).Microseconds())
	c.setState(name, v, stateAvailable, nil, dir).arith = arith
	c.log.infof("Successfully loaded servable version %s", id)
}

func (c *core) unload(name string, v int64) {
	id := servableID(name, v)
	dir := c.states[name][v].dir
	c.setState(name, v, stateUnloading, nil, dir)
	c.log.infof("Quiescing servable version %s", id)
	c.log.infof("Done quiescing servable version %s", id)
	c.log.infof("Unloading servable version %s", id)
	c.setState(name, v, stateEnd, nil, dir)
	delete(c.managed[name], v)
	c.log.infof("Done unloading servable version %s", id)
}

// versionReport is one version in a model status response.
type versionReport struct {
	version int64
	state   servableState
	err     error
}

// modelStatus is what GetModelStatus answers: one version, or every
// version the server has seen, highest first. A label does not narrow it
// (TF Serving ignores the label there), so callers pass none.
func (c *core) modelStatus(name string, version *int64) ([]versionReport, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if version != nil {
		st := c.states[name][*version]
		if st == nil {
			return nil, errorf(codeNotFound, "Could not find version %d of model %s", *version, name)
		}
		return []versionReport{{*version, st.state, st.err}}, nil
	}
	if len(c.states[name]) == 0 {
		return nil, errorf(codeNotFound, "Could not find any versions of model %s", name)
	}
	versions := slices.Sorted(maps.Keys(c.states[name]))
	slices.Reverse(versions)
	out := make([]versionReport, 0, len(versions))
	for _, v := range versions {
		st := c.states[name][v]
		out = append(out, versionReport{v, st.state, st.err})
	}
	return out, nil
}

// servable is the loaded version a request runs on.
type servable struct {
	name    string
	version int64
	dir     string
	arith   arithmetic
}

// handle finds the version a request names: by label, by number, or the
// highest AVAILABLE one.
func (c *core) handle(name string, version *int64, label *string) (servable, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if label != nil {
		v, ok := c.labels[name][*label]
		if !ok {
			return servable{}, errorf(codeInvalidArgument, "Unrecognized servable version label: %s", *label)
		}
		version = &v
	}
	if version != nil {
		st := c.states[name][*version]
		if st == nil || st.state != stateAvailable {
			return servable{}, errorf(codeNotFound, "Servable not found for request: Specific(%s, %d)", name, *version)
		}
		return servable{name, *version, st.dir, st.arith}, nil
	}
	best, found := int64(0), false
	for v, st := range c.states[name] {
		if st.state == stateAvailable && (!found || v > best) {
			best, found = v, true
		}
	}
	if !found {
		return servable{}, errorf(codeNotFound, "Servable not found for request: Latest(%s)", name)
	}
	st := c.states[name][best]
	return servable{name, best, st.dir, st.arith}, nil
}
