package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPoliciesSelectTheServedVersions(t *testing.T) {
	base := t.TempDir()
	for _, v := range []string{"1", "2", "0003"} {
		addVersion(t, base, v)
	}
	writeFile(t, filepath.Join(base, "4", "variables", "variables.index"), "") // being written
	for _, tc := range []struct{ name, policy, want string }{
		{"no policy serves the latest", "", "3:AVAILABLE"},
		{"latest 1", "model_version_policy { latest { num_versions: 1 } }", "3:AVAILABLE"},
		{"latest 2", "model_version_policy { latest { num_versions: 2 } }", "3:AVAILABLE 2:AVAILABLE"},
		{"specific", "model_version_policy { specific { versions: 1 versions: 3 versions: 9 } }", "3:AVAILABLE 1:AVAILABLE"},
		{"all", "model_version_policy { all {} }", "3:AVAILABLE 2:AVAILABLE 1:AVAILABLE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, logs := newTestCore(t, false)
			mustApply(t, c, modelList(model("m", base, tc.policy)))
			if got := states(t, c, "m"); got != tc.want {
				t.Errorf("states %q, want %q", got, tc.want)
			}
			if !strings.Contains(logs.String(), "Successfully loaded servable version {name: m version: 3}") {
				t.Errorf("no load logged:\n%s", logs)
			}
			if !strings.Contains(logs.String(), filepath.Join(base, "4")+" has no saved_model.pb") {
				t.Errorf("the incomplete version is not logged:\n%s", logs)
			}
		})
	}
}

// TestVersionsComeAndGo follows a model through new versions, removed
// versions and policy changes: a new version serves before the old one
// ends, and what leaves the disk or the policy ends.
func TestVersionsComeAndGo(t *testing.T) {
	base := t.TempDir()
	addVersion(t, base, "1")
	c, logs := newTestCore(t, false)
	latest := modelList(model("m", base, ""))
	mustApply(t, c, latest)
	steps := []struct {
		name   string
		change func()
		want   string
	}{
		{"a new version replaces the old", func() { addVersion(t, base, "2") }, "2:AVAILABLE 1:END"},
		{"an older version does not", func() { addVersion(t, base, "0") }, "2:AVAILABLE 1:END"},
		{"specific brings an old one back", func() {
			mustApply(t, c, modelList(model("m", base, "model_version_policy { specific { versions: 0 versions: 1 } }")))
		}, "2:END 1:AVAILABLE 0:AVAILABLE"},
		{"a removed version ends", func() { removeVersion(t, base, "0") }, "2:END 1:AVAILABLE 0:END"},
		{"all", func() { mustApply(t, c, modelList(model("m", base, "model_version_policy { all {} }"))) }, "2:AVAILABLE 1:AVAILABLE 0:END"},
		{"latest again", func() { mustApply(t, c, latest) }, "2:AVAILABLE 1:END 0:END"},
		{"the newest removed, the next one serves", func() { removeVersion(t, base, "2") }, "2:END 1:AVAILABLE 0:END"},
		{"every version removed", func() { removeVersion(t, base, "1") }, "2:END 1:END 0:END"},
		{"a version back on disk", func() { addVersion(t, base, "2") }, "2:AVAILABLE 1:END 0:END"},
	}
	for _, s := range steps {
		s.change()
		c.pollFileSystem()
		if got := states(t, c, "m"); got != s.want {
			t.Fatalf("%s: states %q, want %q", s.name, got, s.want)
		}
	}
	for _, line := range []string{
		"Approving load for servable version {name: m version: 2}",
		"Quiescing servable version {name: m version: 1}",
		"Done unloading servable version {name: m version: 1}",
		"No versions of servable m found under base path " + base + ". Did you forget to name your leaf directory as a number (eg. '/1/')?",
	} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log lacks %q", line)
		}
	}
}

func TestModelsAddedAndRemoved(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	addVersion(t, a, "1")
	addVersion(t, b, "5")
	c, _ := newTestCore(t, false)
	mustApply(t, c, modelList(model("a", a, "")))
	if got := states(t, c, "b"); got != "NOT_FOUND" {
		t.Errorf("b before it is configured: %s", got)
	}
	mustApply(t, c, modelList(model("a", a, ""), model("b", b, "")))
	if got := states(t, c, "b"); got != "5:AVAILABLE" {
		t.Errorf("b once added: %s", got)
	}
	mustApply(t, c, modelList(model("b", b, "")))
	// TF Serving goes on reporting a removed model's versions as END.
	if got := states(t, c, "a"); got != "1:END" {
		t.Errorf("a once removed: %s", got)
	}
	if _, err := c.handle("a", nil, nil); codeOf(err) != codeNotFound {
		t.Errorf("a removed model still serves: %v", err)
	}
	mustApply(t, c, modelList(model("a", a, ""), model("b", b, "")))
	if got := states(t, c, "a"); got != "1:AVAILABLE" {
		t.Errorf("a once back: %s", got)
	}
	if err := apply(t, c, "# no model_config_list\n"); err == nil || !strings.Contains(err.Error(), "It is only legal to transition from one ModelConfigList to another") {
		t.Errorf("replacing the list by nothing: %v", err)
	}
	mustApply(t, c, "model_config_list {}")
	if got := states(t, c, "a") + " " + states(t, c, "b"); got != "1:END 5:END" {
		t.Errorf("an empty list: %s", got)
	}
}

func TestTheFirstConfigWaitsForItsModels(t *testing.T) {
	base := t.TempDir()
	c, _ := newTestCore(t, false)
	cfg, _ := parseModelServerConfig(modelList(model("m", base, "")))
	done := make(chan error, 1)
	go func() { done <- c.reloadConfig(context.Background(), cfg) }()
	for range 5 {
		c.pollFileSystem()
		select {
		case err := <-done:
			t.Fatalf("the first config returned before its model had a version: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	addVersion(t, base, "1")
	c.pollFileSystem()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first config did not return once its model was loaded")
	}

	// A config with nothing set is no first config: the next one waits.
	c2, logs := newTestCore(t, false)
	if err := apply(t, c2, ""); err != nil || !strings.Contains(logs.String(), "Taking no action for empty config.") {
		t.Errorf("an empty first config: %v\n%s", err, logs)
	}
	mustApply(t, c2, modelList(model("m", base, "")))
	if got := states(t, c2, "m"); got != "1:AVAILABLE" {
		t.Errorf("states %s", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c3, _ := newTestCore(t, false)
	if err := c3.reloadConfig(ctx, cfg); err != context.Canceled {
		t.Errorf("waiting past cancellation: %v", err)
	}
}

func TestAFailedLoadEnds(t *testing.T) {
	c, logs := newTestCore(t, false)
	base := t.TempDir()
	addVersion(t, base, "1")
	mustApply(t, c, modelList(model("m", base, "")))
	c.mu.Lock()
	since := c.seq
	// The version vanished between the look and the load.
	c.setAspired("m", map[int64]string{2: filepath.Join(base, "2")})
	c.reconcile("m")
	c.mu.Unlock()
	if got := states(t, c, "m"); got != "2:END(NOT_FOUND) 1:AVAILABLE" {
		t.Errorf("states %s", got)
	}
	err := c.waitAvailable(context.Background(), []string{"m"}, since)
	if err == nil || !strings.Contains(err.Error(), "1 model(s) did not become available: {{{name: m version: 2} due to error: NOT_FOUND: Could not find SavedModel .pb or .pbtxt") {
		t.Errorf("wait: %v", err)
	}
	if !strings.Contains(logs.String(), "Loading servable: {name: m version: 2} failed") {
		t.Errorf("no failure logged:\n%s", logs)
	}
}

func TestLabels(t *testing.T) {
	base := t.TempDir()
	addVersion(t, base, "1")
	addVersion(t, base, "2")
	all := "model_version_policy { all {} }\n"
	label := func(l string, v string) string { return "version_labels { key: \"" + l + "\" value: " + v + " }\n" }
	unavailable := "Request to assign label to version %s of model m, which is not currently available for inference"
	type step struct {
		extra string
		err   string // "" for success
	}
	for _, tc := range []struct {
		name  string
		allow bool
		steps []step
		// resolved maps labels to the versions they resolve to at the end
		resolved map[string]int64
	}{
		{"without the flag, no label at start", false, []step{
			{all + label("stable", "1"), strings.Replace(unavailable, "%s", "1", 1)},
		}, nil},
		{"without the flag, labels on available versions", false, []step{
			{all, ""},
			{all + label("stable", "1") + label("canary", "2"), ""},
			{all + label("stable", "2"), ""},
			{all + label("stable", "3"), strings.Replace(unavailable, "%s", "3", 1)},
		}, map[string]int64{"stable": 2}},
		{"with the flag, new labels may name any version", true, []step{
			{all + label("stable", "1") + label("next", "7"), ""},
			{all + label("stable", "1") + label("next", "7"), ""},
			{all + label("stable", "2") + label("next", "7"), ""},
		}, map[string]int64{"stable": 2, "next": 7}},
		{"with the flag, a label cannot move to an unavailable version", true, []step{
			{all + label("stable", "1"), ""},
			{all + label("stable", "7"), strings.Replace(unavailable, "%s", "7", 1)},
		}, map[string]int64{"stable": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newTestCore(t, tc.allow)
			for i, s := range tc.steps {
				err := apply(t, c, modelList(model("m", base, s.extra)))
				if s.err == "" && err != nil || s.err != "" && (err == nil || !strings.Contains(err.Error(), s.err)) {
					t.Fatalf("step %d: %v, want %q", i, err, s.err)
				}
				if s.err != "" && codeOf(err) != codeFailedPrecondition {
					t.Errorf("step %d: code %s", i, codeOf(err))
				}
			}
			checkLabelsResolve(t, c, tc.resolved)
			nope := "nope"
			if _, err := c.handle("m", nil, &nope); codeOf(err) != codeInvalidArgument || !strings.Contains(err.Error(), "Unrecognized servable version label: nope") {
				t.Errorf("unknown label: %v", err)
			}
		})
	}
}

// checkLabelsResolve checks that model m's labels name the versions in
// resolved; versions above 2 are not on disk.
func checkLabelsResolve(t *testing.T, c *core, resolved map[string]int64) {
	t.Helper()
	for l, v := range resolved {
		s, err := c.handle("m", nil, &l)
		switch {
		case v > 2: // not on disk
			if codeOf(err) != codeNotFound || !strings.Contains(err.Error(), "Specific(m, 7)") {
				t.Errorf("label %s: %v", l, err)
			}
		case err != nil || s.version != v:
			t.Errorf("label %s: %+v, %v; want version %d", l, s, err, v)
		}
	}
}

func TestARefusedReloadKeepsTheRunningConfig(t *testing.T) {
	base := t.TempDir()
	addVersion(t, base, "1")
	addVersion(t, base, "2")
	path := filepath.Join(t.TempDir(), "models.config")
	c, logs := newTestCore(t, false)
	s := &server{log: c.log, core: c}
	mustApply(t, c, modelList(model("m", base, "")))
	for _, tc := range []struct{ content, log string }{
		{"model_config_list { config { name: \"m\" ", "Failed to read ModelServerConfig file: Invalid protobuf file: '" + path + "'"},
		{modelList(model("m", base, ""), model("m", base, "")), "PollFilesystemAndReloadConfig failed to ReloadConfig: Illegal to list model m multiple times in config list"},
		{modelList(model("m", base, "model_version_policy { all {} } version_labels { key: \"x\" value: 9 }")), "PollFilesystemAndReloadConfig failed to ReloadConfig: Request to assign label to version 9"},
	} {
		writeFile(t, path, tc.content)
		s.reloadModelConfig(context.Background(), path)
		c.pollFileSystem()
		if !strings.Contains(logs.String(), tc.log) {
			t.Errorf("log lacks %q:\n%s", tc.log, logs)
		}
		if got := states(t, c, "m"); got != "2:AVAILABLE" {
			t.Errorf("after %q: states %s", tc.content, got)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	s.reloadModelConfig(context.Background(), path)
	if !strings.Contains(logs.String(), "Failed to read ModelServerConfig file: "+path+"; No such file or directory") {
		t.Errorf("a missing file is not logged:\n%s", logs)
	}
}

// TestAnUnreadableBasePathStopsThePoll: TF Serving's source fails its
// whole poll on one bad base path, holding back every model's versions.
func TestAnUnreadableBasePathStopsThePoll(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	addVersion(t, a, "1")
	addVersion(t, b, "1")
	c, logs := newTestCore(t, false)
	mustApply(t, c, modelList(model("a", a, ""), model("b", b, "")))
	if err := os.Rename(a, a+".moved"); err != nil {
		t.Fatal(err)
	}
	addVersion(t, b, "2")
	c.pollFileSystem()
	if got := states(t, c, "b"); got != "1:AVAILABLE" {
		t.Errorf("b moved on while a's base path was missing: %s", got)
	}
	if !strings.Contains(logs.String(), "FileSystemStoragePathSource encountered a filesystem access error: Could not find base path "+a+" for servable a") {
		t.Errorf("no error logged:\n%s", logs)
	}
	if err := os.Rename(a+".moved", a); err != nil {
		t.Fatal(err)
	}
	c.pollFileSystem()
	if got := states(t, c, "b"); got != "2:AVAILABLE 1:END" {
		t.Errorf("b once a is back: %s", got)
	}
}

func TestRunSourceIntervals(t *testing.T) {
	base := t.TempDir()
	addVersion(t, base, "1")
	cfg, _ := parseModelServerConfig(modelList(model("m", base, "")))
	for _, tc := range []struct {
		every  time.Duration
		loaded bool
	}{{-time.Second, false}, {0, true}, {10 * time.Millisecond, true}} {
		c, _ := newTestCore(t, false)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		done := make(chan struct{})
		go func() { c.runSource(ctx, tc.every); close(done) }()
		err := c.reloadConfig(ctx, cfg)
		if (err == nil) != tc.loaded {
			t.Errorf("every %v: reload %v, want loaded %v", tc.every, err, tc.loaded)
		}
		if tc.every >= 0 && tc.loaded {
			addVersion(t, base, "2")
			time.Sleep(50 * time.Millisecond)
			want := map[bool]string{true: "2:AVAILABLE 1:END", false: "1:AVAILABLE"}[tc.every > 0]
			if got := states(t, c, "m"); got != want {
				t.Errorf("every %v: %s, want %s", tc.every, got, want)
			}
			removeVersion(t, base, "2")
		}
		cancel()
		<-done
	}
}
