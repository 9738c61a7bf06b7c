package release

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
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

// createdSecrets keeps the Secrets a driver creates, and refuses a name
// it has kept already, as the apiserver does.
type createdSecrets struct {
	corev1client.SecretInterface
	created map[string]*corev1.Secret
}

func (c *createdSecrets) Create(_ context.Context, s *corev1.Secret, _ metav1.CreateOptions) (*corev1.Secret, error) {
	if c.created[s.Name] != nil {
		return nil, apierrors.NewAlreadyExists(corev1.Resource("secrets"), s.Name)
	}
	c.created[s.Name] = s
	return s, nil
}

func (c *createdSecrets) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Secret, error) {
	if s := c.created[name]; s != nil {
		return s, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
}

func TestANewRecordIsTheOneHelmWrites(t *testing.T) {
	rls := withoutTemplates(renderedRelease(t))
	rls.SetStatus(helmrelease.StatusDeployed, "Install complete")
	rls.Labels = map[string]string{LabelValuesDigest: "d"}
	const key = "sh.helm.release.v1.m.v1"

	helms := &createdSecrets{created: map[string]*corev1.Secret{}}
	before := time.Now().Unix()
	if err := driver.NewSecrets(helms).Create(key, rls); err != nil {
		t.Fatal(err)
	}
	ours := &createdSecrets{created: map[string]*corev1.Secret{}}
	d := newRecords{Driver: driver.NewSecrets(ours), secrets: ours}
	if err := d.Create(key, rls); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Unix()

	want, got := helms.created[key], ours.created[key]
	for _, s := range []*corev1.Secret{want, got} {
		at, err := strconv.ParseInt(s.Labels["createdAt"], 10, 64)
		if err != nil || at < before || at > after {
			t.Errorf("createdAt %q, want the time of the write", s.Labels["createdAt"])
		}
		delete(s.Labels, "createdAt")
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("record written:\n%+v\nHelm's:\n%+v", got.ObjectMeta, want.ObjectMeta)
	}
	if !bytes.Equal(got.Data["release"], want.Data["release"]) {
		t.Error("the record's release differs from the one Helm encodes")
	}
	if again, err := encodeRecord(rls); err != nil || !bytes.Equal(again, want.Data["release"]) {
		t.Errorf("encoded again through a reused writer: %v, a different record", err)
	}

	// Helm reads it back, and a second create is refused as Helm's is.
	read, err := driver.NewSecrets(ours).Get(key)
	if err != nil || read.Manifest != rls.Manifest || read.Info.Status != helmrelease.StatusDeployed || read.Labels[LabelValuesDigest] != "d" {
		t.Errorf("Helm read back %v, %v", read, err)
	}
	if err := d.Create(key, rls); !errors.Is(err, driver.ErrReleaseExists) {
		t.Errorf("a second create: %v, want driver.ErrReleaseExists", err)
	}
}
