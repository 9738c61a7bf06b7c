package release

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// newRecords writes a release's new records itself and leaves everything
// else to Helm's Secrets driver, which it wraps.
//
// Helm's driver gzips each record through a new writer at the best
// compression, whose state is 0.8 MB allocated and dropped per record: a
// fifth of all the bytes the operator allocated during a burst of
// installs, and so about a fifth of its garbage collection. Here the
// writers are reused. The record is the one Helm writes, byte for byte
// (TestANewRecordIsTheOneHelmWrites), and Helm reads it back.
type newRecords struct {
	driver.Driver
	secrets corev1client.SecretInterface
}

func (d newRecords) Create(key string, rls *helmrelease.Release) error {
	secret, err := recordSecret(key, rls, time.Now())
	if err != nil {
		return fmt.Errorf("create: failed to encode release %q: %w", rls.Name, err)
	}
	if _, err := d.secrets.Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return driver.ErrReleaseExists
		}
		return fmt.Errorf("create: failed to create: %w", err)
	}
	return nil
}

// recordSecret is the Secret that Helm's Secrets driver creates for rls
// under key at now: the release labels, Helm's own labels over them, and
// the release as JSON, gzipped at the best compression, in base64.
func recordSecret(key string, rls *helmrelease.Release, now time.Time) (*corev1.Secret, error) {
	encoded, err := encodeRecord(rls)
	if err != nil {
		return nil, err
	}
	labels := make(map[string]string, len(rls.Labels)+5)
	for k, v := range rls.Labels {
		labels[k] = v
	}
	labels["createdAt"] = strconv.FormatInt(now.Unix(), 10)
	labels["name"] = rls.Name
	labels["owner"] = "helm"
	labels["status"] = rls.Info.Status.String()
	labels["version"] = strconv.Itoa(rls.Version)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key, Labels: labels},
		Type:       "helm.sh/release.v1",
		Data:       map[string][]byte{"release": encoded},
	}, nil
}

// gzipWriters keeps gzip writers for the records. A writer at the best
// compression carries 814 kB of state. A sync.Pool drops what it
// keeps at every garbage collection, which during a burst of installs
// comes every few installs, so a new writer was made for about one install
// in nine: a tenth of what an install allocated. A free list as long as
// the CPUs that can compress at once keeps them across collections.
var gzipWriters = make(chan *gzip.Writer, runtime.GOMAXPROCS(0))

func gzipWriter() *gzip.Writer {
	select {
	case w := <-gzipWriters:
		return w
	default:
		w, _ := gzip.NewWriterLevel(nil, gzip.BestCompression) // a valid level cannot fail
		return w
	}
}

func keepGzipWriter(w *gzip.Writer) {
	w.Reset(nil) // not to hold the last record's buffer
	select {
	case gzipWriters <- w:
	default:
	}
}

func encodeRecord(rls *helmrelease.Release) ([]byte, error) {
	js, err := json.Marshal(rls)
	if err != nil {
		return nil, err
	}
	var zipped bytes.Buffer
	zw := gzipWriter()
	defer keepGzipWriter(zw)
	zw.Reset(&zipped)
	if _, err := zw.Write(js); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(zipped.Len()))
	base64.StdEncoding.Encode(out, zipped.Bytes())
	return out, nil
}
