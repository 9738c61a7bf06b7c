package release

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// TestARecordIsEncodedWithoutTheTemplatesWhileHelmKeepsThem: the encoded
// record holds the chart without templates and schema, and everything
// else; the release Helm holds, and goes on writing, keeps its whole
// chart; and a reused gzip writer encodes each record whole.
func TestARecordIsEncodedWithoutTheTemplatesWhileHelmKeepsThem(t *testing.T) {
	ch, _ := chartValues(t)
	rls := revision(1, helmrelease.StatusDeployed)
	rls.Chart, rls.Manifest = ch, "kind: Deployment"

	var first []byte
	for i := range 3 {
		data, err := encodeRecord(withoutTemplates(rls))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = data
		} else if !bytes.Equal(data, first) {
			t.Fatalf("encoding %d differs from the first", i+1)
		}
	}
	got := decodeRecord(t, first)
	if len(got.Chart.Templates) != 0 || got.Chart.Schema != nil {
		t.Errorf("stored %d templates and a %d-byte schema, want neither", len(got.Chart.Templates), len(got.Chart.Schema))
	}
	if got.Chart.Metadata.Version != ch.Metadata.Version || got.Chart.Metadata.AppVersion != ch.Metadata.AppVersion || len(got.Chart.Values) != len(ch.Values) || got.Manifest != rls.Manifest {
		t.Errorf("stored chart %v with %d values and manifest %q; want the release's", got.Chart.Metadata, len(got.Chart.Values), got.Manifest)
	}
	if rls.Chart != ch || len(ch.Templates) == 0 || ch.Schema == nil {
		t.Fatal("the release Helm holds lost its chart's templates or schema")
	}

	bare := revision(2, helmrelease.StatusDeployed)
	bare.Chart = &chart.Chart{Metadata: ch.Metadata}
	if withoutTemplates(bare) != bare {
		t.Error("a chart with nothing to leave out was copied")
	}
}

// decodeRecord reads a record's data as Helm's driver does.
func decodeRecord(t *testing.T, data []byte) *helmrelease.Release {
	t.Helper()
	zipped, err := base64.StdEncoding.DecodeString(string(data))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped))
	if err != nil {
		t.Fatal(err)
	}
	js, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	rls := &helmrelease.Release{}
	if err := json.Unmarshal(js, rls); err != nil {
		t.Fatal(err)
	}
	return rls
}

// renderedRelease is revision 1 of a default ModelServer, as a fresh
// install renders it.
func renderedRelease(tb testing.TB) *helmrelease.Release {
	tb.Helper()
	ch, vals := chartValues(tb)
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.ClientOnly, install.DryRun = true, true
	install.ReleaseName, install.Namespace = "m", "ns"
	install.DisableOpenAPIValidation = true
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	rls, err := install.RunWithContext(context.Background(), ch, vals)
	if err != nil {
		tb.Fatal(err)
	}
	return rls
}

// BenchmarkEncodeRecordAsHelmDoes: the whole chart, and a new gzip writer
// for each record.
func BenchmarkEncodeRecordAsHelmDoes(b *testing.B) {
	rls := renderedRelease(b)
	b.ReportAllocs()
	for b.Loop() {
		js, err := json.Marshal(rls)
		if err != nil {
			b.Fatal(err)
		}
		var zipped bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&zipped, gzip.BestCompression)
		_, _ = zw.Write(js)
		_ = zw.Close()
		b.ReportMetric(float64(base64.StdEncoding.EncodedLen(zipped.Len())), "record-bytes")
	}
}

func BenchmarkEncodeRecord(b *testing.B) {
	rls := renderedRelease(b)
	b.ReportAllocs()
	for b.Loop() {
		data, err := encodeRecord(withoutTemplates(rls))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(data)), "record-bytes")
	}
}
