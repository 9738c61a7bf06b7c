package fetch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
	"github.com/modelserver-dev/modelserver-operator/test/azblobserver"
)

const (
	benchFiles    = 64
	benchFileSize = 4 << 20 // 64 × 4 MiB = 256 MiB
	// benchLatency is added before each object's first byte. gofakes3
	// answers from memory at once, which no real store does; a store's
	// time to first byte (tens of milliseconds for S3) is what a
	// sequential copy pays per object and parallel downloads hide.
	benchLatency = 20 * time.Millisecond
)

// benchModel stores a 256 MiB model of 64 files in a fake S3.
func benchModel(b *testing.B) (*fakeS3, string) {
	b.Helper()
	s3 := newFakeS3(b)
	s3.latency = benchLatency
	s3.put(b, "bench", benchModelFiles())
	return s3, s3.creds(b, testAccessKey, testSecretKey)
}

// benchModelFiles are the files of a 256 MiB model, 64 of 4 MiB of random
// bytes (as weights are, which do not compress), the same in every run.
func benchModelFiles() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	files := map[string][]byte{"1/saved_model.pb": make([]byte, benchFileSize)}
	for i := 1; i < benchFiles; i++ {
		files[fmt.Sprintf("1/variables/variables.data-%05d-of-%05d", i-1, benchFiles-1)] = make([]byte, benchFileSize)
	}
	for _, data := range files {
		for i := 0; i < len(data); i += 8 {
			v := rng.Uint64()
			for j := range 8 {
				data[i+j] = byte(v >> (8 * j))
			}
		}
	}
	return files
}

// BenchmarkFetchS3 fetches a 256 MiB model of 64 files from a fake S3 over
// loopback, with a store's first-byte latency on every object: the
// fetcher (16 downloads at once, hashing, syncing, verifying) against a
// plain sequential copy of the same objects through the same client.
func BenchmarkFetchS3(b *testing.B) {
	s3, creds := benchModel(b)
	total := int64(benchFiles * benchFileSize)
	var parallel, sequential time.Duration

	b.Run("parallel", func(b *testing.B) {
		parallel = timeEachRun(b, total, func(dest string) error {
			o, _ := testOptions(b, "s3://models/bench", creds)
			o.Dest, o.Concurrency = dest, DefaultConcurrency
			sum, err := Run(context.Background(), o)
			if err == nil && (sum.Bytes != total || sum.Files != benchFiles) {
				err = fmt.Errorf("summary %+v", sum)
			}
			return err
		})
	})

	b.Run("sequential", func(b *testing.B) {
		sequential = timeEachRun(b, total, func(dest string) error { return copySequentially(s3, creds, dest) })
		if parallel > 0 {
			// How many times faster the parallel fetch was, on this line
			// of the output too.
			b.ReportMetric(sequential.Seconds()/parallel.Seconds(), "x-slower-than-parallel")
		}
	})

	if parallel > 0 && sequential > 0 {
		mbps := func(d time.Duration) float64 { return float64(total) / 1e6 / d.Seconds() }
		b.Logf("256 MiB in 64 files, %v first-byte latency: parallel fetch %.0f MB/s, sequential copy %.0f MB/s, speedup %.1fx",
			benchLatency, mbps(parallel), mbps(sequential), sequential.Seconds()/parallel.Seconds())
	}
}

// BenchmarkFetchAzure fetches the 256 MiB model of BenchmarkFetchS3 from
// the Azure Blob Storage stand-in, with the same first-byte latency, with
// the account key: what the Azure SDK's client costs beside the S3 one's.
func BenchmarkFetchAzure(b *testing.B) {
	srv := azblobserver.Serve(b, "127.0.0.1:0", azureAccount, false)
	srv.SetLatency(benchLatency)
	for name, data := range benchModelFiles() {
		srv.Put("models", "bench/"+name, data)
	}
	creds := secretDir(b, azureKeys(srv))
	total := int64(benchFiles * benchFileSize)
	b.ResetTimer() // storing the model is not the fetch
	took := timeEachRun(b, total, func(dest string) error {
		o, _ := testOptions(b, azureModels+"/bench", creds)
		o.Dest, o.Concurrency = dest, DefaultConcurrency
		sum, err := Run(context.Background(), o)
		if err == nil && (sum.Bytes != total || sum.Files != benchFiles) {
			err = fmt.Errorf("summary %+v", sum)
		}
		return err
	})
	if took > 0 {
		b.Logf("256 MiB in 64 files from Azure Blob Storage, %v first-byte latency: %.0f MB/s", benchLatency, float64(total)/1e6/took.Seconds())
	}
}

// BenchmarkRefetchS3 fetches the 256 MiB model of BenchmarkFetchS3 again
// into a new generation beside the copy a first fetch made, one 4 MiB
// file overwritten in the store since: the 63 files unchanged are linked
// from the copy (untouched since, they are not read again), one is
// downloaded. Beside it, the same fetch with no earlier copy.
func BenchmarkRefetchS3(b *testing.B) {
	s3, creds := benchModel(b)
	total := int64(benchFiles * benchFileSize)
	models := b.TempDir()
	fetchInto := func(dest string) error {
		o, _ := testOptions(b, "s3://models/bench", creds)
		o.Dest = dest
		sum, err := Run(context.Background(), o)
		if err == nil && sum.Bytes != total {
			err = fmt.Errorf("summary %+v", sum)
		}
		return err
	}
	if err := fetchInto(filepath.Join(models, "0000000a")); err != nil {
		b.Fatal(err)
	}
	changed := bytes.Repeat([]byte{7}, benchFileSize)
	s3.put(b, "bench", map[string][]byte{"1/saved_model.pb": changed})
	var refetch, fresh time.Duration
	b.Run("refetch", func(b *testing.B) {
		b.SetBytes(total)
		refetch = 0
		for range b.N {
			dest := filepath.Join(models, "0000000b")
			start := time.Now()
			err := fetchInto(dest)
			refetch += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			_ = os.RemoveAll(dest)
			b.StartTimer()
		}
		refetch /= time.Duration(b.N)
	})
	b.Run("fresh", func(b *testing.B) {
		fresh = timeEachRun(b, total, func(dest string) error {
			return fetchInto(filepath.Join(filepath.Dir(dest), "0000000c"))
		})
	})
	if refetch > 0 && fresh > 0 {
		b.Logf("256 MiB in 64 files, one changed: refetch beside the earlier copy %v, fresh fetch %v (%.1fx)",
			refetch.Round(time.Millisecond), fresh.Round(time.Millisecond), fresh.Seconds()/refetch.Seconds())
	}
}

// BenchmarkFetchS3Archive fetches the same 256 MiB as one tar.gz from the
// fake S3 capping each download at 50 MB/s, as a store caps a
// connection: as one download (Concurrency 1), and as the fetch does, in
// parts inOrderAhead at a time, read in order.
func BenchmarkFetchS3Archive(b *testing.B) {
	s3 := newFakeS3(b)
	s3.put(b, "", map[string][]byte{"bench.tar.gz": tarball(b, true, entries(benchModelFiles()))})
	creds := s3.creds(b, testAccessKey, testSecretKey)
	s3.streamRate.Store(50e6)
	total := int64(benchFiles * benchFileSize)
	rates := map[int]float64{}
	for _, conc := range []int{1, DefaultConcurrency} {
		b.Run(fmt.Sprintf("50MBps-a-stream/concurrency=%d", conc), func(b *testing.B) {
			rates[conc] = fetchRate(b, "s3://models/bench.tar.gz", creds, conc, total)
		})
	}
	b.Logf("256 MiB as one tar.gz at 50 MB/s a stream: %.0f MB/s as one download, %.0f MB/s in parts %d at once",
		rates[1], rates[DefaultConcurrency], inOrderAhead)
}

// BenchmarkFetchHTTPArchive fetches the same tar.gz from a web server
// (net/http's file serving: ranges, ETag) capping each download at 50
// MB/s: as one download (Concurrency 1), and in parts inOrderAhead at a
// time.
func BenchmarkFetchHTTPArchive(b *testing.B) {
	archive := tarball(b, true, entries(benchModelFiles()))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"bench"`)
		http.ServeContent(&paced{ResponseWriter: w, rate: 50e6, start: time.Now()}, r, "bench.tar.gz", time.Time{}, bytes.NewReader(archive))
	}))
	defer srv.Close()
	total := int64(benchFiles * benchFileSize)
	rates := map[int]float64{}
	for _, conc := range []int{1, DefaultConcurrency} {
		b.Run(fmt.Sprintf("50MBps-a-stream/concurrency=%d", conc), func(b *testing.B) {
			rates[conc] = fetchRate(b, srv.URL+"/bench.tar.gz", "", conc, total)
		})
	}
	b.Logf("256 MiB as one tar.gz over HTTP at 50 MB/s a stream: %.0f MB/s as one download, %.0f MB/s in parts %d at once",
		rates[1], rates[DefaultConcurrency], inOrderAhead)
}

// BenchmarkRefreshHTTPArchive fetches the tar.gz of BenchmarkFetchHTTPArchive
// (50 MB/s a stream) again into a new generation beside the copy a first
// fetch made, as a refresh round that finds it unchanged does: the server
// names it by the same strong ETag, and the copy is linked. Beside it, the
// same round from a server whose ETag is weak, which downloads it.
func BenchmarkRefreshHTTPArchive(b *testing.B) {
	archive := tarball(b, true, entries(benchModelFiles()))
	serve := func(etag string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", etag)
			http.ServeContent(&paced{ResponseWriter: w, rate: 50e6, start: time.Now()}, r, "bench.tar.gz", time.Time{}, bytes.NewReader(archive))
		}))
		b.Cleanup(srv.Close)
		return srv
	}
	total := int64(benchFiles * benchFileSize)
	rounds := map[string]time.Duration{}
	for _, etag := range []string{`"bench"`, `W/"bench"`} {
		models := b.TempDir()
		uri := serve(etag).URL + "/bench.tar.gz"
		fetchInto := func(gen string) error {
			o, _ := testOptions(b, uri, "")
			o.Dest = filepath.Join(models, gen)
			sum, err := Run(context.Background(), o)
			if err == nil && sum.Bytes != total {
				err = fmt.Errorf("summary %+v", sum)
			}
			return err
		}
		if err := fetchInto("0000000a"); err != nil {
			b.Fatal(err)
		}
		b.Run("etag="+etag, func(b *testing.B) {
			b.SetBytes(total)
			var elapsed time.Duration
			for range b.N {
				start := time.Now()
				err := fetchInto("0000000b")
				elapsed += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = os.RemoveAll(filepath.Join(models, "0000000b"))
				b.StartTimer()
			}
			rounds[etag] = elapsed / time.Duration(b.N)
		})
	}
	b.Logf("a refresh round of 256 MiB as one tar.gz over HTTP at 50 MB/s a stream, unchanged: %v by a strong ETag, %v by a weak one",
		rounds[`"bench"`].Round(time.Millisecond), rounds[`W/"bench"`].Round(time.Millisecond))
}

// fetchRate fetches uri b.N times with concurrency conc, each a model of
// total bytes, and returns the mean MB/s.
func fetchRate(b *testing.B, uri, creds string, conc int, total int64) float64 {
	return float64(total) / 1e6 / timeEachRun(b, total, func(dest string) error {
		o, _ := testOptions(b, uri, creds)
		o.Dest, o.Concurrency = dest, conc
		sum, err := Run(context.Background(), o)
		if err == nil && sum.Bytes != total {
			err = fmt.Errorf("summary %+v", sum)
		}
		return err
	}).Seconds()
}

// timeEachRun runs copyTo b.N times, each into a fresh directory removed
// off the clock, and returns the mean time of a run, which must succeed.
func timeEachRun(b *testing.B, bytes int64, copyTo func(dest string) error) time.Duration {
	b.SetBytes(bytes)
	var elapsed time.Duration
	for range b.N {
		dest := filepath.Join(b.TempDir(), "models", "gen-1")
		start := time.Now()
		err := copyTo(dest)
		elapsed += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = os.RemoveAll(filepath.Dir(dest))
		b.StartTimer()
	}
	return elapsed / time.Duration(b.N)
}

// copySequentially lists the model and copies its objects one after the
// other into dest, with no hashing or checks: the baseline.
func copySequentially(_ *fakeS3, creds, dest string) error {
	c, err := LoadCredentials(creds)
	if err != nil {
		return err
	}
	loc, err := storageuri.Parse("s3://models/bench")
	if err != nil {
		return err
	}
	transport, err := newTransport(transportOptions{Conns: 1})
	if err != nil {
		return err
	}
	ctx := context.Background()
	src, err := newS3Source(ctx, loc, c, WebIdentity{}, transport, DefaultMaxFiles)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	l, err := src.List(ctx)
	if err != nil {
		return err
	}
	for _, obj := range l.Objects {
		body, _, err := src.Open(ctx, obj.Key)
		if err != nil {
			return err
		}
		err = writePlainly(filepath.Join(dest, filepath.FromSlash(obj.Key)), body)
		_ = body.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkHashTree hashes a model holding one 256 MiB file, as a re-run's
// check of a fetched model and a pvc:// model's verification do: format 1
// reads the file in order on one CPU, format 2 reads and hashes its 16 MiB
// chunks several at once, format 3 does so with BLAKE3.
func BenchmarkHashTree(b *testing.B) {
	dir := b.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "1", "variables"), 0o755); err != nil {
		b.Fatal(err)
	}
	const size = 256 << 20
	if err := os.WriteFile(filepath.Join(dir, "1", "variables", "variables.data-00000-of-00001"), randomBytes(size, 5), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, format := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("format%d", format), func(b *testing.B) {
			b.SetBytes(size)
			for range b.N {
				if _, err := hashTree(context.Background(), dir, format, DefaultConcurrency, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// writePlainly writes r to the file p, making its directory: what a
// baseline does with a file, with no hashing, checks or sync.
func writePlainly(p string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// BenchmarkResumeS3 fetches the 256 MiB model of BenchmarkFetchS3 after a
// fetch of it stopped with most of its 64 files completed (the store
// refused the last one until it gave up): those are taken from what it
// kept, hashed again, and the rest downloaded. Beside it, the same fetch
// from nothing, as before a stop kept anything.
func BenchmarkResumeS3(b *testing.B) {
	s3, creds := benchModel(b)
	last := fmt.Sprintf("/variables.data-%05d-of-%05d", benchFiles-2, benchFiles-1)
	refuse := refusing(s3, func(r *http.Request) bool { return isObjectRequest(r) && strings.HasSuffix(r.URL.Path, last) })
	timeResumes(b, "256 MiB in 64 files, %d completed before a stop", "s3://models/bench", creds, 0, refuse,
		func(stopped *earlier) int { return len(stopped.files) })
}

// BenchmarkResumeLargeFileS3 is BenchmarkResumeS3 for a model whose
// 256 MiB are one file (a SavedModel's one variables shard), fetched as
// 16 parts: the fetch before stopped when the store refused its last part
// until it gave up, and the parts it completed are checked and kept.
func BenchmarkResumeLargeFileS3(b *testing.B) {
	const key = "1/variables/variables.data-00000-of-00001"
	total := int64(benchFiles * benchFileSize)
	s3 := newFakeS3(b)
	s3.latency = benchLatency
	s3.put(b, "large", map[string][]byte{"1/saved_model.pb": []byte("graph"), key: make([]byte, total)})
	last := fmt.Sprintf("bytes=%d-%d", total-DefaultPartSize, total-1)
	refuse := refusing(s3, func(r *http.Request) bool { return r.Header.Get("Range") == last })
	timeResumes(b, "one 256 MiB file in 16 parts, %d completed before a stop", "s3://models/large", s3.creds(b, testAccessKey, testSecretKey), DefaultPartSize, refuse,
		func(stopped *earlier) int { return len(stopped.parts[key]) })
}

// refusing makes s3 refuse the requests picked while the flag it returns
// is set.
func refusing(s3 *fakeS3, pick func(*http.Request) bool) *atomic.Bool {
	var refuse atomic.Bool
	s3.setFault(func(r *http.Request) int {
		if refuse.Load() && pick(r) {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	return &refuse
}

// timeResumes times a fetch of uri that resumes from one stopped while
// refuse was set (kept says how much the stopped fetch kept, 0 for
// nothing), and the same fetch from nothing, and logs both after what.
func timeResumes(b *testing.B, what, uri, creds string, partSize int64, refuse *atomic.Bool, kept func(*earlier) int) {
	total := int64(benchFiles * benchFileSize)
	fetchInto := func(dest string) error {
		o, _ := testOptions(b, uri, creds)
		o.Dest, o.partSize = dest, partSize
		_, err := Run(context.Background(), o)
		return err
	}
	var resume, fresh time.Duration
	n := 0
	b.Run("resume", func(b *testing.B) {
		b.SetBytes(total)
		resume = 0
		for range b.N {
			b.StopTimer()
			dest := filepath.Join(b.TempDir(), "0000000a")
			refuse.Store(true)
			err := fetchInto(dest)
			refuse.Store(false)
			stopped := findStopped(dest, uri)
			if err == nil || stopped == nil || kept(stopped) == 0 {
				b.Fatalf("the first fetch did not stop with anything kept: %v", err)
			}
			n = kept(stopped)
			b.StartTimer()
			start := time.Now()
			err = fetchInto(dest)
			resume += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
		}
		resume /= time.Duration(b.N)
	})
	b.Run("fresh", func(b *testing.B) {
		fresh = timeEachRun(b, total, fetchInto)
	})
	if resume > 0 && fresh > 0 {
		b.Logf(what+": resumed %v, fresh fetch %v (%.1fx)",
			n, resume.Round(time.Millisecond), fresh.Round(time.Millisecond), fresh.Seconds()/resume.Seconds())
	}
}
