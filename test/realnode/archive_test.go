package realnode

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/fetch"
	"github.com/modelserver-dev/modelserver-operator/internal/names"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
	"github.com/modelserver-dev/modelserver-operator/test/s3server"
)

// TestALargeArchiveFromS3IsReadInPartsAndServed: a model as one tar.gz of
// over 72 MiB (the SavedModel, and weights that do not compress) in the
// S3 server is fetched on the real node as parts read in order, and
// served. Fetched again unchanged, it is taken from the copy on the volume,
// by the ETag the S3 server names it by, and the serving pod stays.
func TestALargeArchiveFromS3IsReadInPartsAndServed(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)
	ctx := context.Background()

	root := filepath.Join(e.Root, "test/testdata/tf-serving/saved_model_half_plus_two_cpu")
	weights := make([]byte, 72<<20)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(weights)
	archive := tarGzOf(t, root, map[string][]byte{"00000123/assets/weights.bin": weights})
	key := "archives/" + ns + ".tar.gz"
	if err := s3server.PutObject(ctx, s3server.Client(e.S3Endpoint, e.S3Creds), realenv.Bucket, key, archive); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	uri := "s3://" + realenv.Bucket + "/" + key
	e.kubectl(t, e.modelServer("archive", uri, 1, "512Mi", ""), "-n", ns, "apply", "-f", "-")
	first := e.waitNewModelReady(t, ns, "archive", nil)
	t.Logf("kubectl apply to Ready, a %d MiB archive read in parts: %.1fs", len(archive)>>20, time.Since(start).Seconds())

	if m, want := e.get(t, ns, "archive").Status.Model, int64(len(weights)); m == nil || m.SizeBytes < want {
		t.Errorf("status.model %+v: want the %d bytes of weights in its size", m, want)
	}
	if got := e.modelStatus(t, ns, "archive"); got["123"] != "AVAILABLE" {
		t.Errorf("TF Serving (double) reports %v, want version 123 AVAILABLE", got)
	}
	logs := e.kubectl(t, "", "-n", ns, "logs", "job/"+names.FetchJob("archive", first), "-c", "fetch")
	if !strings.Contains(logs, `"msg":"downloading an archive in ranges"`) {
		t.Errorf("the fetch's log does not say the archive was read in parts:\n%s", logs)
	}

	if got, want := e.received(t, ns, names.FetchJob("archive", first)), int64(len(archive)); got < want {
		t.Errorf("the first fetch's summary says it received %d bytes; want at least the archive's %d", got, want)
	}

	pods := e.servingPodNames(t, ns)
	start = time.Now()
	e.kubectl(t, e.modelServer("archive", uri, 1, "512Mi", "    refetch: run-1\n"), "-n", ns, "apply", "-f", "-")
	again := e.waitNewModelReady(t, ns, "archive", []string{first})
	t.Logf("the unchanged archive fetched again: %.1fs from kubectl apply to Ready", time.Since(start).Seconds())
	logs = e.kubectl(t, "", "-n", ns, "logs", "job/"+names.FetchJob("archive", again), "-c", "fetch")
	if !strings.Contains(logs, `"msg":"the store names the archive by the version of the copy fetched before; taking that copy"`) || strings.Contains(logs, `"msg":"downloading`) {
		t.Errorf("the fetch of the unchanged archive does not say it took the copy on the volume without downloading:\n%s", logs)
	}
	if got := e.received(t, ns, names.FetchJob("archive", again)); got > 64<<10 {
		t.Errorf("the fetch of the unchanged archive's summary says it received %d bytes; want a few kilobytes", got)
	}
	if m := e.get(t, ns, "archive").Status.Model; m.ServedGeneration != first {
		t.Errorf("status.model.servedGeneration %q after fetching the archive unchanged, want the pods' copy %s", m.ServedGeneration, first)
	}
	if now := e.servingPodNames(t, ns); !slices.Equal(now, pods) {
		t.Errorf("the serving pods %q were replaced by %q for an archive that did not change", pods, now)
	}
}

// tarGzOf packs the files below root, and extra, as a tar.gz whose top
// entries are root's.
func tarGzOf(t *testing.T, root string, extra map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	add := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := eachFile(root, add); err != nil {
		t.Fatal(err)
	}
	for name, data := range extra {
		add(name, data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// eachFile calls fn with each file below root: its path from root, with
// slashes, and its contents.
func eachFile(root string, fn func(name string, data []byte)) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fn(filepath.ToSlash(rel), data)
		return nil
	})
}

// received is what the summary of fetch Job job says it received from the
// store.
func (e *env) received(t *testing.T, ns, job string) int64 {
	t.Helper()
	msg := e.kubectl(t, "", "-n", ns, "get", "pods", "-l", "job-name="+job, "--field-selector", "status.phase=Succeeded",
		"-o", "jsonpath={.items[0].status.containerStatuses[0].state.terminated.message}")
	sum, ok := fetch.ParseSummary(msg)
	if !ok || sum.Received < 0 {
		t.Fatalf("the termination message of Job %s's pod is no summary saying what it received: %q", job, msg)
	}
	return sum.Received
}
