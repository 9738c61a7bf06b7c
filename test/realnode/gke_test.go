package realnode

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
	"github.com/modelserver-dev/modelserver-operator/test/gkemetadata"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
)

// TestAGCSModelIsFetchedAsGKEsMetadataServerKnowsTheFetchPod: with
// webIdentity: {gkeWorkloadIdentity: true}, the fetch pod the real kubelet
// runs asks a metadata server (a stand-in, at the Secret's address) for
// its identity and a token; the server, as GKE's does, knows the pod by
// the address its request comes from alone: the pod of that IP, its
// service account, and the Google service account that is annotated with.
// The bucket (fake-gcs-server) grants that token only. A pod the server
// answers for as the node's service account, as a node pool without GKE's
// metadata server does, fails its fetch with AccessDenied, having asked
// the bucket nothing.
func TestAGCSModelIsFetchedAsGKEsMetadataServerKnowsTheFetchPod(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)
	const (
		pool      = "modelserver-test.svc.id.goog"
		annotated = "model-reader@modelserver-test.iam.gserviceaccount.com"
		node      = "123456789012-compute@developer.gserviceaccount.com"
	)
	granted := map[string]bool{"gke:" + pool + ":" + ns + "/model-reader": true, "gke:" + annotated: true}
	bucket := gcsBucket(t, filepath.Join(e.Root, "test/testdata/tf-serving/saved_model_half_plus_two_cpu"), "gke", granted)

	var (
		mu      sync.Mutex
		asked   = map[string]string{} // the pods the server answered, by name, and as whom
		unknown int                   // requests from an address no pod had yet
	)
	md, err := gkemetadata.Start(localcluster.HostAddress+":0", func(ip string) (gkemetadata.Identity, error) {
		ctx := context.Background()
		pods, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.podIP=" + ip})
		if err != nil {
			return gkemetadata.Identity{}, err
		}
		if len(pods.Items) != 1 {
			mu.Lock()
			unknown++
			mu.Unlock()
			// The kubelet reports a pod's address after its containers
			// start: GKE's server, too, does not know a pod for its first
			// seconds (tried: the fetch asked before the apiserver had
			// its pod's address).
			return gkemetadata.Identity{}, &gkemetadata.Refusal{Status: http.StatusServiceUnavailable, Message: "no pod of address " + ip + " yet"}
		}
		p := pods.Items[0]
		sa, err := e.cs.CoreV1().ServiceAccounts(ns).Get(ctx, p.Spec.ServiceAccountName, metav1.GetOptions{})
		if err != nil {
			return gkemetadata.Identity{}, err
		}
		id := gkemetadata.Identity{Email: pool, Token: "gke:" + pool + ":" + ns + "/" + sa.Name, ExpiresIn: time.Hour}
		switch gsa := sa.Annotations[values.AnnotationGoogleServiceAccount]; {
		case sa.Name == "on-a-gce-node":
			id = gkemetadata.Identity{Email: node, Token: "gke:" + node, ExpiresIn: time.Hour}
		case gsa != "":
			id = gkemetadata.Identity{Email: gsa, Token: "gke:" + gsa, ExpiresIn: time.Hour}
		}
		mu.Lock()
		asked[p.Name] = id.Email
		mu.Unlock()
		return id, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(md.Close)
	e.kubectl(t, `apiVersion: v1
kind: ServiceAccount
metadata:
  name: model-reader
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: impersonating
  annotations:
    iam.gke.io/gcp-service-account: `+annotated+`
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: on-a-gce-node
---
apiVersion: v1
kind: Secret
metadata:
  name: store
stringData:
  GCS_ENDPOINT_URL: `+bucket.url+`
  GCE_METADATA_HOST: `+md.Host+`
`, "-n", ns, "apply", "-f", "-")
	manifest := func(name, account string) string {
		return e.ModelServerYAML(realenv.ModelServer{Name: name, URI: "gs://models/gke", Secret: "store",
			ModelExtra: "    webIdentity: {gkeWorkloadIdentity: true}\n", SpecExtra: "  podTemplate:\n    serviceAccountName: " + account + "\n"})
	}

	start := time.Now()
	e.kubectl(t, manifest("principal", "model-reader")+"---\n"+manifest("impersonating", "impersonating"), "-n", ns, "apply", "-f", "-")
	e.waitReady(t, ns, "principal", 3*time.Minute)
	e.waitReady(t, ns, "impersonating", 3*time.Minute)
	t.Logf("kubectl apply to Ready, two models read with the metadata server's tokens: %.1fs", time.Since(start).Seconds())
	for _, name := range []string{"principal", "impersonating"} {
		if got := e.modelStatus(t, ns, name); got["123"] != "AVAILABLE" {
			t.Errorf("%s: TF Serving (double) reports %v, want version 123 AVAILABLE", name, got)
		}
	}
	mu.Lock()
	t.Logf("the metadata server knew no pod of the address of %d requests, which the fetches asked again", unknown)
	for _, want := range [][2]string{{"principal-fetch-", pool}, {"impersonating-fetch-", annotated}} {
		found := false
		for pod, as := range asked {
			found = found || strings.HasPrefix(pod, want[0]) && as == want[1]
		}
		if !found {
			t.Errorf("the metadata server answered %v; want a pod %s... answered as %s", asked, want[0], want[1])
		}
	}
	mu.Unlock()

	before := bucket.refused()
	e.kubectl(t, manifest("node", "on-a-gce-node"), "-n", ns, "apply", "-f", "-")
	msg := e.waitFetchFailed(t, ns, "node", servingv1alpha1.ReasonAccessDenied)
	t.Logf("a pod answered for as the node: %s", msg)
	if !strings.Contains(msg, "as the Google service account "+node) || !strings.Contains(msg, "does not read a model as the node") {
		t.Errorf("ModelFetched says %q; want the node's account named, and refused", msg)
	}
	if n := bucket.refused() - before; n != 0 {
		t.Errorf("the bucket refused %d requests of the node's fetch; want it asked nothing", n)
	}
}

// gcsBucketServer is fake-gcs-server on the real node's network, holding
// a SavedModel in bucket "models", granting only the bearer tokens given.
type gcsBucketServer struct {
	url     string
	mu      sync.Mutex
	refusal int
}

func (b *gcsBucketServer) refused() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refusal
}

// gcsBucket serves the files below root under prefix.
func gcsBucket(t *testing.T, root, prefix string, granted map[string]bool) *gcsBucketServer {
	t.Helper()
	l, err := net.Listen("tcp", localcluster.HostAddress+":0")
	if err != nil {
		t.Fatal(err)
	}
	store, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true, PublicHost: l.Addr().String(), Writer: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	err = eachFile(root, func(name string, data []byte) {
		store.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "models", Name: prefix + "/" + name}, Content: data})
	})
	if err != nil {
		t.Fatal(err)
	}
	b := &gcsBucketServer{url: "http://" + l.Addr().String()}
	handler := store.HTTPHandler()
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !granted[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")] {
				b.mu.Lock()
				b.refusal++
				b.mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, `{"error":{"code":403,"message":"`+cmp.Or(r.Header.Get("Authorization"), "Anonymous caller")+` does not have storage.objects.list access"}}`)
				return
			}
			handler.ServeHTTP(w, r)
		})}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Log(err)
		}
	}()
	t.Cleanup(func() { _ = srv.Close(); store.Stop() })
	return b
}
