package fetch

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/pbtext"
)

// modelsVolume is a model volume's top directory, as a fetch Job mounts it.
type modelsVolume struct {
	t   *testing.T
	dir string
	now time.Time
}

func newModelsVolume(t *testing.T) *modelsVolume {
	return &modelsVolume{t: t, dir: t.TempDir(), now: time.Now()}
}

// published puts a model fetched age ago into the generation's directory.
func (v *modelsVolume) published(gen string, age time.Duration) {
	v.t.Helper()
	p := filepath.Join(v.dir, gen)
	writeTree(v.t, p, model(1))
	writeTree(v.t, p, map[string][]byte{ManifestName: []byte(`{"format":3,"bytes":3035}`)})
	v.age(filepath.Join(p, ManifestName), age)
}

func (v *modelsVolume) age(p string, age time.Duration) {
	v.t.Helper()
	if err := os.Chtimes(p, v.now.Add(-age), v.now.Add(-age)); err != nil {
		v.t.Fatal(err)
	}
}

// config writes the serving pods' model config, naming these generations.
func (v *modelsVolume) config(gens ...string) string {
	v.t.Helper()
	var b strings.Builder
	b.WriteString("model_config_list {\n")
	for i, g := range gens {
		b.WriteString("  config {\n    name: " + pbtext.Quote(string(rune('a'+i))) + "\n    base_path: " + pbtext.Quote(filepath.Join(v.dir, g)) + "\n  }\n")
	}
	b.WriteString("}\n")
	p := filepath.Join(v.t.TempDir(), "models.config")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		v.t.Fatal(err)
	}
	return p
}

func (v *modelsVolume) entries() []string {
	v.t.Helper()
	es, err := os.ReadDir(v.dir)
	if err != nil {
		v.t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestAFetchRemovesTheModelsThePodsWereMovedOff: a model the config no
// longer names, published before every model it names, goes, with what
// abandoned fetches left; a model published since (another model's, whose
// config the operator has yet to write), one never published, and
// anything not named as a generation stay.
func TestAFetchRemovesTheModelsThePodsWereMovedOff(t *testing.T) {
	v := newModelsVolume(t)
	v.published("0000000a", 72*time.Hour)                                                        // superseded
	v.published("0000000b", 2*time.Hour)                                                         // served
	v.published("0000000c", 3*time.Hour)                                                         // served by another model
	v.published("0000000d", time.Hour)                                                           // fetched since the config was written
	v.published("0000000e", 4*time.Hour)                                                         // superseded
	v.published("00000015", 150*time.Minute)                                                     // after a served one, but never served since
	v.published("oldmodel", 72*time.Hour)                                                        // not a generation's name
	writeTree(t, filepath.Join(v.dir, "0000000f"), model(1))                                     // never published
	writeTree(t, v.dir, map[string][]byte{"00000010": []byte("a file")})                         // no directory
	writeTree(t, filepath.Join(v.dir, "00000011.partial-123"), model(1))                         // abandoned
	writeTree(t, filepath.Join(v.dir, "00000012.partial-456"), model(1))                         // still being written
	writeTree(t, filepath.Join(v.dir, "00000013.stale-789"), model(1))                           // abandoned
	writeTree(t, filepath.Join(v.dir, "00000014.pruned-abc"), model(1))                          // an interrupted removal
	writeTree(t, filepath.Join(v.dir, "lost+found"), map[string][]byte{"x": []byte("the fs's")}) // the file system's
	v.age(filepath.Join(v.dir, "00000011.partial-123"), 3*time.Hour)
	v.age(filepath.Join(v.dir, "00000013.stale-789"), 3*time.Hour)
	v.age(filepath.Join(v.dir, "00000012.partial-456"), 10*time.Minute)

	logs := &logBuffer{}
	pruneSuperseded(filepath.Join(v.dir, "000000ff"), v.config("0000000b", "0000000c"), v.now, testLogger(logs))

	want := []string{"0000000b", "0000000c", "0000000d", "0000000f", "00000010", "00000012.partial-456", "lost+found", "oldmodel"}
	if got := v.entries(); !slices.Equal(got, want) {
		t.Errorf("the volume holds %q, want %q\nlog:\n%s", got, want, logs)
	}
	for _, gone := range []string{"0000000a", "0000000e", "00000015"} {
		if !strings.Contains(logs.String(), `"msg":"removed a model no pod serves"`) || !strings.Contains(logs.String(), filepath.Join(v.dir, gone)) {
			t.Errorf("the log does not name the removed model %s:\n%s", gone, logs)
		}
	}
}

// TestWithoutAConfigThatNamesAPublishedModelNothingIsRemoved: a config
// missing (its ConfigMap not made yet), one naming only the model being
// fetched (a first fetch), or a destination not named as a generation,
// leave the volume as it is.
func TestWithoutAConfigThatNamesAPublishedModelNothingIsRemoved(t *testing.T) {
	for name, c := range map[string]func(v *modelsVolume) (dest, config string){
		"no config": func(v *modelsVolume) (string, string) {
			return filepath.Join(v.dir, "000000ff"), filepath.Join(v.dir, "missing")
		},
		"first fetch": func(v *modelsVolume) (string, string) { return filepath.Join(v.dir, "000000ff"), v.config("000000ff") },
		"another dir": func(v *modelsVolume) (string, string) {
			return filepath.Join(v.dir, "000000ff"), v.config("/elsewhere/0000000b")
		},
		"unnamed dest": func(v *modelsVolume) (string, string) { return filepath.Join(v.dir, "model"), v.config("0000000b") },
	} {
		t.Run(name, func(t *testing.T) {
			v := newModelsVolume(t)
			v.published("0000000a", 72*time.Hour)
			v.published("0000000b", time.Hour)
			dest, config := c(v)
			pruneSuperseded(dest, config, v.now, testLogger(&logBuffer{}))
			if got := v.entries(); !slices.Equal(got, []string{"0000000a", "0000000b"}) {
				t.Errorf("the volume holds %q, want both models", got)
			}
		})
	}
}

// TestAModelServedAgainCountsAsJustPublished: a rollback to a model still
// on the volume downloads nothing, and the model it replaces, published
// after it, is removed by the next fetch.
func TestAModelServedAgainCountsAsJustPublished(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, model(1))
	v := newModelsVolume(t)
	fetchInto := func(gen string, served ...string) *logBuffer {
		t.Helper()
		o, logs := testOptions(t, src, "")
		o.Dest, o.ServedConfig = filepath.Join(v.dir, gen), v.config(served...)
		if _, err := Run(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		return logs
	}
	fetchInto("0000000a", "0000000a")
	v.age(filepath.Join(v.dir, "0000000a", ManifestName), 2*time.Hour)
	fetchInto("0000000b", "0000000a")
	v.age(filepath.Join(v.dir, "0000000b", ManifestName), time.Hour)
	// Back to the first: its fetch finds it intact.
	if logs := fetchInto("0000000a", "0000000b"); !strings.Contains(logs.String(), "nothing to download") {
		t.Fatalf("the rollback downloaded the model again:\n%s", logs)
	}
	if got := v.entries(); !slices.Equal(got, []string{"0000000a", "0000000b"}) {
		t.Fatalf("the volume holds %q before the next fetch, want both models", got)
	}
	fetchInto("0000000c", "0000000a")
	if got := v.entries(); !slices.Equal(got, []string{"0000000a", "0000000c"}) {
		t.Errorf("the volume holds %q, want the model served again and the new one", got)
	}
}

func testLogger(logs *logBuffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
