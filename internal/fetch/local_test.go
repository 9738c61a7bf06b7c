package fetch

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

func TestFetchingFromALocalDirectory(t *testing.T) {
	src := t.TempDir()
	files := model(1, 2)
	writeTree(t, src, files)
	// A symbolic link to a file is copied as the file it points to.
	if err := os.Symlink(filepath.Join(src, "1", "saved_model.pb"), filepath.Join(src, "2", "assets", "linked.pb")); err != nil {
		t.Fatal(err)
	}
	files["2/assets/linked.pb"] = files["1/saved_model.pb"]
	// An empty directory is kept.
	if err := os.MkdirAll(filepath.Join(src, "2", "assets", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	o, _ := testOptions(t, src, "")
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if st, err := os.Lstat(filepath.Join(o.Dest, "2", "assets", "linked.pb")); err != nil || !st.Mode().IsRegular() {
		t.Error("the linked file is not a regular file")
	}
	if st, err := os.Stat(filepath.Join(o.Dest, "2", "assets", "empty")); err != nil || !st.IsDir() {
		t.Error("the empty directory is missing")
	}
	if sum.Files != int64(len(files)) {
		t.Errorf("%d files; want %d", sum.Files, len(files))
	}
}

func TestALocalSourceOverlappingTheDestinationIsRefused(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, model(1))
	o, _ := testOptions(t, dir, "")
	o.Dest = filepath.Join(dir, "1")
	_, err := Run(context.Background(), o)
	wantFailure(t, err, servingv1alpha1.ReasonInvalidURI, ExitPermanent)
}

// snapshot lists every path below dir with its mode, size and time.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, _ := os.Lstat(p)
		out = append(out, fmt.Sprintf("%s %v %d %d", p, st.Mode(), st.Size(), st.ModTime().UnixNano()))
		return nil
	})
	sort.Strings(out)
	return out
}

func TestAPVCModelIsVerifiedInPlaceWithoutWriting(t *testing.T) {
	claim := t.TempDir()
	files := model(4, 5)
	base := filepath.Join(claim, "team", "resnet")
	writeTree(t, base, files)
	before := snapshot(t, claim)

	o, _ := testOptions(t, "pvc://shared-models/team/resnet", "")
	o.Dest = base
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, claim); !reflect.DeepEqual(before, after) {
		t.Errorf("the claim changed:\nbefore %v\nafter  %v", before, after)
	}
	if !reflect.DeepEqual(sum.Versions, []int64{4, 5}) || sum.Files != int64(len(files)) {
		t.Errorf("summary %+v", sum)
	}
	// The digest is the model's: the same as a fetched copy's.
	o2, _ := testOptions(t, base, "")
	copied, err := Run(context.Background(), o2)
	if err != nil {
		t.Fatal(err)
	}
	if copied.Digest != sum.Digest || copied.Bytes != sum.Bytes {
		t.Errorf("verified in place %+v; copied %+v", sum, copied)
	}
}

func TestABadPVCModelIsReported(t *testing.T) {
	cases := map[string]struct {
		files   map[string][]byte
		reason  string
		message string
	}{
		"no path":              {nil, servingv1alpha1.ReasonNotFound, "does not exist"},
		"no variables":         {map[string][]byte{"1/saved_model.pb": []byte("g")}, servingv1alpha1.ReasonInvalidLayout, "no variables/"},
		"no version directory": {map[string][]byte{"saved_model.pb": []byte("g"), "variables/v": nil}, servingv1alpha1.ReasonInvalidLayout, "resnet/1/"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			claim := t.TempDir()
			base := filepath.Join(claim, "resnet")
			if c.files != nil {
				writeTree(t, base, c.files)
			}
			o, _ := testOptions(t, "pvc://claim/resnet", "")
			o.Dest = base
			_, err := Run(context.Background(), o)
			fe := wantFailure(t, err, c.reason, ExitPermanent)
			if !strings.Contains(fe.Message, c.message) {
				t.Errorf("message %q lacks %q", fe.Message, c.message)
			}
		})
	}
}
