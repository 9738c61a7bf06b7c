package fetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// fakeGCS is fake-gcs-server behind a handler that, when a token is
// required, refuses requests without it, as GCS refuses a private
// bucket's anonymous readers.
type fakeGCS struct {
	*httptest.Server
	store         *fakestorage.Server
	requiredToken string
	requests      atomic.Int32
	// seen, when set, sees every request before the store does.
	seen func(*http.Request)
}

func newFakeGCS(t *testing.T) *fakeGCS {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// PublicHost: object downloads (the XML API) come to this address.
	store, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true, PublicHost: ln.Addr().String(), Writer: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeGCS{store: store}
	handler := store.HTTPHandler()
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		if f.seen != nil {
			f.seen(r)
		}
		if f.requiredToken != "" && r.Header.Get("Authorization") != "Bearer "+f.requiredToken {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":401,"message":"Anonymous caller does not have storage.objects.list access"}}`)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	f.Listener = ln
	f.Config.ErrorLog = log.New(io.Discard, "", 0)
	f.Start()
	t.Cleanup(func() { f.Close(); store.Stop() })
	return f
}

func (f *fakeGCS) put(prefix string, files map[string][]byte) {
	for name, data := range files {
		f.store.CreateObject(fakestorage.Object{
			ObjectAttrs: fakestorage.ObjectAttrs{BucketName: testBucket, Name: prefix + "/" + name},
			Content:     data,
		})
	}
}

// tokenServer plays Google's OAuth token endpoint: it grants token to
// the JWT assertions of clientEmail, and refuses others.
func tokenServer(t *testing.T, clientEmail, token string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		parts := strings.Split(r.Form.Get("assertion"), ".")
		var claims struct {
			Iss string `json:"iss"`
		}
		if len(parts) == 3 {
			if b, err := jwtPart(parts[1]); err == nil {
				_ = json.Unmarshal(b, &claims)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if claims.Iss != clientEmail {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
			return
		}
		_, _ = io.WriteString(w, `{"access_token":"`+token+`","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// serviceAccountKey is a service account JSON key whose tokens come from
// tokenURI.
func serviceAccountKey(t *testing.T, email, tokenURI string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{
		"type":           "service_account",
		"project_id":     "test",
		"private_key_id": "0123456789abcdef0123456789abcdef01234567",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   email,
		"client_id":      "1",
		"token_uri":      tokenURI,
	})
	return string(b)
}

func TestFetchingFromAPublicGCSBucket(t *testing.T) {
	gcs := newFakeGCS(t)
	files := model(1, 3)
	gcs.put("resnet", files)
	gcs.put("resnet-other", model(4))
	o, _ := testOptions(t, "gs://models/resnet", secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL}))
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if !reflect.DeepEqual(sum.Versions, []int64{1, 3}) {
		t.Errorf("versions %v; want [1 3]", sum.Versions)
	}
}

func TestFetchingFromGCSWithAServiceAccount(t *testing.T) {
	gcs := newFakeGCS(t)
	gcs.requiredToken = "token-for-fetcher"
	files := model(2)
	gcs.put("private/m", files)
	const email = "fetcher@test.iam.gserviceaccount.com"
	tokens := tokenServer(t, email, gcs.requiredToken)

	t.Run("a granted key", func(t *testing.T) {
		creds := secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL, KeyGCSServiceAccount: serviceAccountKey(t, email, tokens.URL)})
		o, _ := testOptions(t, "gs://models/private/m", creds)
		if _, err := Run(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		assertTree(t, o.Dest, files)
	})
	t.Run("a refused key", func(t *testing.T) {
		key := serviceAccountKey(t, "stranger@test.iam.gserviceaccount.com", tokens.URL)
		creds := secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL, KeyGCSServiceAccount: key})
		o, logs := testOptions(t, "gs://models/private/m", creds)
		_, err := Run(context.Background(), o)
		wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
		var parsed map[string]string
		_ = json.Unmarshal([]byte(key), &parsed)
		line := strings.Split(strings.TrimSpace(parsed["private_key"]), "\n")[3]
		if strings.Contains(TerminationMessage(Summary{}, err), line) || strings.Contains(logs.String(), line) {
			t.Error("the private key shows in the message or the logs")
		}
		assertNothingPublished(t, o.Dest)
	})
	t.Run("no key", func(t *testing.T) {
		o, _ := testOptions(t, "gs://models/private/m", secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL}))
		_, err := Run(context.Background(), o)
		fe := wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
		if !strings.Contains(fe.Message, "HTTP 401 Unauthorized: Anonymous caller does not have storage.objects.list access") {
			t.Errorf("message %q does not give the service's words", fe.Message)
		}
	})
}

func TestMissingGCSModelIsNotFound(t *testing.T) {
	gcs := newFakeGCS(t)
	gcs.put("resnet", model(1))
	creds := secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL})
	for _, uri := range []string{"gs://models/absent", "gs://no-such-bucket/resnet"} {
		t.Run(uri, func(t *testing.T) {
			o, _ := testOptions(t, uri, creds)
			_, err := Run(context.Background(), o)
			wantFailure(t, err, servingv1alpha1.ReasonNotFound, ExitPermanent)
			assertNothingPublished(t, o.Dest)
		})
	}
}

func jwtPart(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(s)
}

func TestALargeGCSFileIsFetchedAsRanges(t *testing.T) {
	gcs := newFakeGCS(t)
	files := largeModel()
	gcs.put("m", files)
	var seen rangesOf
	gcs.seen = func(r *http.Request) {
		if isLargeFileDownload(r) {
			seen.add(r.Header.Get("Range"))
		}
	}
	o, _ := testOptions(t, "gs://models/m", secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL}))
	o.partSize = testPartSize
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if len(seen.ranges) != 11 {
		t.Fatalf("%d requests for the large file (%q); want one for each of its 11 parts", len(seen.ranges), seen.ranges)
	}
	if seen.count("bytes=655360-655482") != 1 {
		t.Errorf("the last part was not asked for once: %q", seen.ranges)
	}
}

func TestAGCSObjectReplacedDuringARangedDownloadIsNotStitched(t *testing.T) {
	gcs := newFakeGCS(t)
	files := largeModel()
	gcs.put("m", files)
	var (
		mu    sync.Mutex
		parts int
	)
	gcs.seen = func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if isLargeFileDownload(r) {
			if parts++; parts == 4 {
				gcs.put("m", map[string][]byte{largeFileKey: bytes.Repeat([]byte{7}, len(files[largeFileKey]))})
			}
		}
	}
	o, _ := testOptions(t, "gs://models/m", secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL}))
	wantNoStitch(t, o)
}

// isLargeFileDownload: r downloads largeModel's large file from below the
// prefix "m".
func isLargeFileDownload(r *http.Request) bool {
	return r.URL.Query().Get("alt") == "media" && strings.HasSuffix(r.URL.Path, "/m/"+largeFileKey)
}

// Object names are one segment of the JSON API's URL: every character a
// URL gives a meaning to must arrive as part of the name.
func TestGCSObjectNamesWithURLCharactersAreFetched(t *testing.T) {
	gcs := newFakeGCS(t)
	files := model(1)
	for _, name := range []string{"1/assets/vocab #1?.txt", "1/assets/100%+50%.txt", "1/assets/é ü.txt", "1/assets/a;b=c&d.txt"} {
		files[name] = []byte(name)
	}
	gcs.put("odd names/m", files)
	o, _ := testOptions(t, "gs://models/odd names/m", secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL}))
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
}

func TestAGCSListingOfManyPagesListsEveryObject(t *testing.T) {
	gcs := newFakeGCS(t)
	files := model(1, 2)
	for i := range 7 {
		files[fmt.Sprintf("2/assets/%d.txt", i)] = []byte{byte(i)}
	}
	gcs.put("m", files)
	gcs.put("m2", model(3)) // beside the prefix, not below it
	var pages atomic.Int32
	gcs.seen = func(r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/b/models/o") {
			pages.Add(1)
		}
	}
	creds, err := LoadCredentials(secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL}))
	if err != nil {
		t.Fatal(err)
	}
	loc, err := storageuri.Parse("gs://models/m")
	if err != nil {
		t.Fatal(err)
	}
	src, err := newGCSSource(context.Background(), loc, creds, WebIdentity{}, http.DefaultTransport, 1000)
	if err != nil {
		t.Fatal(err)
	}
	src.(*gcsSource).pageSize = 3
	l, err := src.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, obj := range l.Objects {
		got = append(got, obj.Key)
		if obj.Size != int64(len(files[obj.Key])) {
			t.Errorf("%s listed with %d bytes; want %d", obj.Key, obj.Size, len(files[obj.Key]))
		}
	}
	slices.Sort(got)
	want := slices.Sorted(maps.Keys(files))
	if !slices.Equal(got, want) {
		t.Errorf("listed %q; want %q", got, want)
	}
	if n := int(pages.Load()); n != (len(files)+2)/3 {
		t.Errorf("%d listing requests; want %d pages of 3", n, (len(files)+2)/3)
	}
}

func TestAGCSObjectAtThePrefixIsFetchedAsAnArchive(t *testing.T) {
	gcs := newFakeGCS(t)
	files := model(1)
	gcs.store.CreateObject(fakestorage.Object{
		ObjectAttrs: fakestorage.ObjectAttrs{BucketName: testBucket, Name: "exports/m.tar.gz"},
		Content:     tarball(t, true, entries(files)),
	})
	o, _ := testOptions(t, "gs://models/exports/m.tar.gz", secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL}))
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
}

func TestALargeGCSArchiveIsReadInParts(t *testing.T) {
	gcs := newFakeGCS(t)
	files := largeModel()
	gcs.store.CreateObject(fakestorage.Object{
		ObjectAttrs: fakestorage.ObjectAttrs{BucketName: testBucket, Name: "exports/m.tar.gz"},
		Content:     tarball(t, true, entries(files)),
	})
	var seen rangesOf
	gcs.seen = func(r *http.Request) {
		if r.URL.Query().Get("alt") == "media" && strings.HasSuffix(r.URL.Path, "/exports/m.tar.gz") {
			seen.add(r.Header.Get("Range"))
		}
	}
	o, logs := testOptions(t, "gs://models/exports/m.tar.gz", secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL}))
	o.partSize = testPartSize
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, files)
	if len(seen.ranges) < 10 || seen.count("") != 0 {
		t.Errorf("downloads of the archive: %q; want one range for each of its parts", seen.ranges)
	}
}

func TestAGzipEncodedGCSObjectIsRefusedByName(t *testing.T) {
	gcs := newFakeGCS(t)
	files := model(1)
	gcs.put("m", files)
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write([]byte("vocabulary"))
	_ = zw.Close()
	gcs.store.CreateObject(fakestorage.Object{
		ObjectAttrs: fakestorage.ObjectAttrs{BucketName: testBucket, Name: "m/1/assets/vocab.txt", ContentEncoding: "gzip"},
		Content:     zipped.Bytes(),
	})
	o, _ := testOptions(t, "gs://models/m", secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL}))
	_, err := Run(context.Background(), o)
	fe := wantFailure(t, err, servingv1alpha1.ReasonFetchFailed, ExitPermanent)
	if !strings.Contains(fe.Message, "gs://models/m/1/assets/vocab.txt is stored with Content-Encoding gzip") {
		t.Errorf("message %q does not name the object and its encoding", fe.Message)
	}
	assertNothingPublished(t, o.Dest)
}

func TestEscapeSegmentLeavesOnlyUnreservedBytes(t *testing.T) {
	for name, want := range map[string]string{
		"m/1/saved_model.pb":      "m%2F1%2Fsaved_model.pb",
		"a b+c;d=e&f?g#h%i~j-k.l": "a%20b%2Bc%3Bd%3De%26f%3Fg%23h%25i~j-k.l",
		"é":                       "%C3%A9",
	} {
		if got := escapeSegment(name); got != want {
			t.Errorf("escapeSegment(%q) = %q; want %q", name, got, want)
		}
	}
}

// TestAGCSRefetchDownloadsOnlyWhatChanged: objects listed with the
// generation they were fetched at are taken from the earlier copy; a new
// version is downloaded.
func TestAGCSRefetchDownloadsOnlyWhatChanged(t *testing.T) {
	gcs := newFakeGCS(t)
	gcs.put("resnet", model(1))
	var downloads atomic.Int32
	gcs.seen = func(r *http.Request) {
		if r.URL.Query().Get("alt") == "media" || strings.HasPrefix(r.URL.Path, "/"+testBucket+"/") {
			downloads.Add(1)
		}
	}
	creds := secretDir(t, map[string]string{KeyGCSEndpointURL: gcs.URL})
	models := t.TempDir()
	for _, gen := range []string{"0000000a", "0000000b"} {
		o, logs := testOptions(t, "gs://models/resnet", creds)
		o.Dest = filepath.Join(models, gen)
		downloads.Store(0)
		if _, err := Run(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		if gen == "0000000a" {
			gcs.put("resnet", model(2))
			continue
		}
		if n, want := downloads.Load(), int32(len(model(2))); n != want {
			t.Errorf("the refetch made %d downloads, want %d, of version 2's files\n%s", n, want, logs)
		}
		assertTree(t, o.Dest, mergeTrees(model(1), model(2)))
	}
}

func mergeTrees(trees ...map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for _, t := range trees {
		maps.Copy(out, t)
	}
	return out
}
