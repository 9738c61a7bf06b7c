package fetch

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
)

// TestOnlyTheServedVersionsAreFetched: of a store holding versions 1, 2
// and 3, a fetch copies and downloads the version directories its
// selection takes, and nothing of the others.
func TestOnlyTheServedVersionsAreFetched(t *testing.T) {
	s3 := newFakeS3(t)
	s3.put(t, "m", model(1, 2, 3))
	creds := s3.creds(t, testAccessKey, testSecretKey)
	for _, c := range []struct {
		versions fetchcontract.Versions
		want     []int
	}{
		{fetchcontract.Versions{Latest: 1}, []int{3}},
		{fetchcontract.Versions{Latest: 2}, []int{2, 3}},
		{fetchcontract.Versions{Latest: 5}, []int{1, 2, 3}},
		{fetchcontract.Versions{Specific: []int64{1, 3, 9}}, []int{1, 3}},
		{fetchcontract.Versions{}, []int{1, 2, 3}},
	} {
		t.Run(c.versions.String(), func(t *testing.T) {
			o, logs := testOptions(t, "s3://models/m", creds)
			o.Versions = c.versions
			before := len(s3.requests)
			sum, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			assertTree(t, o.Dest, model(c.want...))
			var want []int64
			for _, v := range c.want {
				want = append(want, int64(v))
			}
			if !reflect.DeepEqual(sum.Versions, want) {
				t.Errorf("summary versions %v; want %v", sum.Versions, want)
			}
			for _, r := range s3.requests[before:] {
				v, ok := versionOfPath(strings.TrimPrefix(r, "GET /models/m/"), false)
				if strings.HasPrefix(r, "GET /models/m/") && ok && !slices.Contains(want, v) {
					t.Errorf("downloaded %s, of a version not fetched", r)
				}
			}
			if left := len(c.want) < 3; left != strings.Contains(logs.String(), "fetching only the versions") {
				t.Errorf("the versions left are logged: %v; want %v\n%s", !left, left, logs)
			}
		})
	}
}

// TestTheSizeCapCountsTheServedVersionsAlone: a store whose versions
// together are over maxSizeBytes is fetched when the served one is under
// it.
func TestTheSizeCapCountsTheServedVersionsAlone(t *testing.T) {
	s3 := newFakeS3(t)
	s3.put(t, "m", model(1, 2, 3))
	o, _ := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	o.MaxBytes, o.Versions = 4000, fetchcontract.Versions{Latest: 1}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, model(3))
}

// TestVersionsNoneOfWhichAreThereAreNotFound: a specific policy naming
// only versions the store lacks fails, naming both, and publishes
// nothing; the store's other files are not downloaded.
func TestVersionsNoneOfWhichAreThereAreNotFound(t *testing.T) {
	s3 := newFakeS3(t)
	s3.put(t, "m", model(1, 2))
	o, _ := testOptions(t, "s3://models/m", s3.creds(t, testAccessKey, testSecretKey))
	o.Versions = fetchcontract.Versions{Specific: []int64{7, 8}}
	_, err := Run(context.Background(), o)
	fe := wantFailure(t, err, servingv1alpha1.ReasonNotFound, ExitPermanent)
	if !strings.Contains(fe.Message, "holds versions 1, 2") || !strings.Contains(fe.Message, "serves 7, 8: none of them") {
		t.Errorf("message %q names not the versions found and those served", fe.Message)
	}
	if n := s3.count("GET", "/models/m/"); n != 0 {
		t.Errorf("%d objects downloaded; want none", n)
	}
	assertNothingPublished(t, o.Dest)
}

// TestAPinnedCopyFetchesTheJobsVersions: a serving pod's own copy takes
// the versions its Job fetched, whatever its own selection says, so that
// a Job that fetched every version still pins the pods' copies; a store
// that lost them all since is a changed model.
func TestAPinnedCopyFetchesTheJobsVersions(t *testing.T) {
	s3 := newFakeS3(t)
	s3.put(t, "m", model(1, 2, 3))
	creds := s3.creds(t, testAccessKey, testSecretKey)
	job, _ := testOptions(t, "s3://models/m", creds)
	sum, err := Run(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	pod, _ := testOptions(t, "s3://models/m", creds)
	pod.Versions = fetchcontract.Versions{Latest: 1}
	pod.Pin = Pin{Digest: sum.Digest, Versions: sum.Versions}
	if _, err := Run(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	assertTree(t, pod.Dest, model(1, 2, 3))

	s3.put(t, "other", model(4))
	pod, _ = testOptions(t, "s3://models/other", creds)
	pod.Pin = Pin{Digest: sum.Digest, Versions: []int64{1, 2}}
	_, err = Run(context.Background(), pod)
	fe := wantFailure(t, err, servingv1alpha1.ReasonModelChanged, ExitPermanent)
	if !strings.Contains(fe.Message, "holds versions 4, none of those its fetch Job fetched (1, 2)") {
		t.Errorf("message %q", fe.Message)
	}
}

// TestASelectionKeepsWhatIsNotAVersion: a SavedModel without a version
// directory is version 1 whatever the selection, and a file beside the
// version directories is kept for the layout check to report.
func TestASelectionKeepsWhatIsNotAVersion(t *testing.T) {
	s3 := newFakeS3(t)
	s3.put(t, "flat", map[string][]byte{"saved_model.pb": []byte("graph"), "variables/variables.index": []byte("index")})
	creds := s3.creds(t, testAccessKey, testSecretKey)
	o, _ := testOptions(t, "s3://models/flat", creds)
	o.Versions = fetchcontract.Versions{Latest: 1}
	if sum, err := Run(context.Background(), o); err != nil || !reflect.DeepEqual(sum.Versions, []int64{1}) {
		t.Fatalf("versions %v, %v; want [1]", sum.Versions, err)
	}

	files := model(1, 2)
	files["README.md"] = []byte("notes")
	s3.put(t, "noted", files)
	o, _ = testOptions(t, "s3://models/noted", creds)
	o.Versions = fetchcontract.Versions{Latest: 1}
	_, err := Run(context.Background(), o)
	fe := wantFailure(t, err, servingv1alpha1.ReasonInvalidLayout, ExitPermanent)
	if !strings.Contains(fe.Message, "README.md") {
		t.Errorf("message %q does not name the file", fe.Message)
	}
}

// TestAWiderSelectionLinksTheVersionsItHas: a fetch that serves one more
// version than the earlier generation beside it downloads that version
// alone; the other is linked from there.
func TestAWiderSelectionLinksTheVersionsItHas(t *testing.T) {
	s3 := newFakeS3(t)
	s3.put(t, "m", model(1, 2, 3))
	creds := s3.creds(t, testAccessKey, testSecretKey)
	models := t.TempDir()
	o, _ := testOptions(t, "s3://models/m", creds)
	o.Dest, o.Versions = filepath.Join(models, "0000000a"), fetchcontract.Versions{Latest: 1}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	before := len(s3.requests)
	o.Dest, o.Versions = filepath.Join(models, "0000000b"), fetchcontract.Versions{Latest: 2}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, model(2, 3))
	for _, r := range s3.requests[before:] {
		if strings.HasPrefix(r, "GET /models/m/") && !strings.HasPrefix(r, "GET /models/m/2/") {
			t.Errorf("downloaded %s, which the earlier generation holds", r)
		}
	}
}

// BenchmarkFetchServedVersionsS3 fetches from a fake S3 holding 30
// versions of a 20 MiB model, as a pipeline that publishes a version a
// day leaves a month of them, with a store's first-byte latency: every
// version, as the fetch did before it was told the version policy's,
// against the latest alone, the default policy's. It reports the bytes
// each received from the store.
func BenchmarkFetchServedVersionsS3(b *testing.B) {
	const versions, files = 30, 4
	s3 := newFakeS3(b)
	s3.latency = benchLatency
	model := benchModelFiles()
	stored := map[string][]byte{}
	for v := 1; v <= versions; v++ {
		stored[fmt.Sprintf("%d/saved_model.pb", v)] = model["1/saved_model.pb"]
		for i := range files {
			stored[fmt.Sprintf("%d/variables/variables.data-%05d-of-%05d", v, i, files)] = model[fmt.Sprintf("1/variables/variables.data-%05d-of-%05d", i, benchFiles-1)]
		}
	}
	s3.put(b, "daily", stored)
	creds := s3.creds(b, testAccessKey, testSecretKey)
	for _, c := range []struct {
		name     string
		versions fetchcontract.Versions
	}{{"every-version", fetchcontract.Versions{}}, {"latest", fetchcontract.Versions{Latest: 1}}} {
		b.Run(c.name, func(b *testing.B) {
			var received int64
			elapsed := timeEachRun(b, 0, func(dest string) error {
				o, _ := testOptions(b, "s3://models/daily", creds)
				o.Dest, o.Versions, o.Concurrency = dest, c.versions, DefaultConcurrency
				sum, err := Run(context.Background(), o)
				received = sum.Received
				return err
			})
			b.ReportMetric(float64(received)/(1<<20), "MiB-received")
			b.Logf("%s of %d versions: %.1f MiB received in %.2f s", c.name, versions, float64(received)/(1<<20), elapsed.Seconds())
		})
	}
}
