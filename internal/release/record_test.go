package release

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// TestARecordIsStoredWithoutTheTemplatesWhileHelmKeepsThem: the store gets
// the chart without templates and schema, with everything else; the
// release Helm holds, and goes on writing, keeps its whole chart.
func TestARecordIsStoredWithoutTheTemplatesWhileHelmKeepsThem(t *testing.T) {
	ch, _ := chartValues(t)
	rls := revision(1, helmrelease.StatusDeployed)
	rls.Chart, rls.Manifest = ch, "kind: Deployment"
	store := driver.NewMemory()
	d := chartByVersion{store}
	key := "sh.helm.release.v1.resnet.v1"

	for _, write := range []func(string, *helmrelease.Release) error{d.Create, d.Update} {
		if err := write(key, rls); err != nil {
			t.Fatal(err)
		}
		got, err := store.Get(key)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Chart.Templates) != 0 || got.Chart.Schema != nil {
			t.Errorf("stored %d templates and a %d-byte schema, want neither", len(got.Chart.Templates), len(got.Chart.Schema))
		}
		if got.Chart.Metadata != ch.Metadata || len(got.Chart.Values) != len(ch.Values) || got.Manifest != rls.Manifest {
			t.Errorf("stored chart %v with %d values and manifest %q; want the release's", got.Chart.Metadata, len(got.Chart.Values), got.Manifest)
		}
		if rls.Chart != ch || len(ch.Templates) == 0 || ch.Schema == nil {
			t.Fatal("the release Helm holds lost its chart's templates or schema")
		}
	}

	bare := revision(2, helmrelease.StatusDeployed)
	bare.Chart = &chart.Chart{Metadata: ch.Metadata}
	if withoutTemplates(bare) != bare {
		t.Error("a chart with nothing to leave out was copied")
	}
}

// encodeAsHelm encodes a record as Helm's Secrets driver does: JSON,
// gzipped at the best compression by a new writer, in base64.
func encodeAsHelm(tb testing.TB, rls *helmrelease.Release) []byte {
	js, err := json.Marshal(rls)
	if err != nil {
		tb.Fatal(err)
	}
	var zipped bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zipped, gzip.BestCompression)
	_, _ = zw.Write(js)
	_ = zw.Close()
	return []byte(base64.StdEncoding.EncodeToString(zipped.Bytes()))
}

// renderedRelease is revision 1 of a default ModelServer, as a fresh
// install renders it.
func renderedRelease(tb testing.TB) *helmrelease.Release {
	tb.Helper()
	ch, vals := chartValues(tb)
	rls, err := clientOnlyInstall().RunWithContext(context.Background(), ch, vals)
	if err != nil {
		tb.Fatal(err)
	}
	return rls
}

// benchEncode times the encoding of a default ModelServer's first record,
// with the whole chart or as chartByVersion stores it.
func benchEncode(b *testing.B, stored func(*helmrelease.Release) *helmrelease.Release) {
	rls := stored(renderedRelease(b))
	b.ReportAllocs()
	for b.Loop() {
		b.ReportMetric(float64(len(encodeAsHelm(b, rls))), "record-bytes")
	}
}

func BenchmarkEncodeRecordWithTheWholeChart(b *testing.B) {
	benchEncode(b, func(r *helmrelease.Release) *helmrelease.Release { return r })
}

func BenchmarkEncodeRecordWithoutTemplates(b *testing.B) { benchEncode(b, withoutTemplates) }
