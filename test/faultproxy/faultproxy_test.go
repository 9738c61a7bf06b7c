package faultproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestParseNamesVerbAndResourceAsTheAuthorizerDoes(t *testing.T) {
	for _, tc := range []struct {
		method, url string
		want        Request
	}{
		{"GET", "/api/v1/namespaces/ns/configmaps/c", Request{"get", "configmaps", "ns", "c"}},
		{"GET", "/api/v1/namespaces/ns/configmaps", Request{"list", "configmaps", "ns", ""}},
		{"GET", "/api/v1/namespaces/ns/configmaps?watch=true", Request{"watch", "configmaps", "ns", ""}},
		{"GET", "/api/v1/namespaces/ns", Request{"get", "namespaces", "", "ns"}},
		{"GET", "/api/v1/namespaces", Request{"list", "namespaces", "", ""}},
		{"POST", "/apis/apps/v1/namespaces/ns/deployments", Request{"create", "deployments", "ns", ""}},
		{"PATCH", "/apis/serving.modelserver.dev/v1alpha1/namespaces/ns/modelservers/m/status", Request{"patch", "modelservers/status", "ns", "m"}},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/l", Request{"update", "leases", "default", "l"}},
		{"DELETE", "/api/v1/namespaces/ns/secrets/s", Request{"delete", "secrets", "ns", "s"}},
		{"DELETE", "/api/v1/namespaces/ns/pods", Request{"deletecollection", "pods", "ns", ""}},
		{"GET", "/apis/apps/v1", Request{Verb: "get"}},
		{"GET", "/healthz", Request{Verb: "get"}},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := Parse(tc.method, u); got != tc.want {
			t.Errorf("%s %s: %+v, want %+v", tc.method, tc.url, got, tc.want)
		}
	}
}

func TestRateOfFindsTheBusiestSecond(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var recs []Record
	for i := range 10 {
		recs = append(recs, Record{At: t0.Add(time.Duration(i) * 100 * time.Millisecond)}) // second 0
	}
	recs = append(recs, Record{At: t0.Add(1500 * time.Millisecond)}, Record{At: t0.Add(5 * time.Second)})
	r := RateOf(recs, t0, t0.Add(4*time.Second), nil)
	if r.Requests != 11 || r.Peak != 10 || r.Mean != 11.0/4 {
		t.Errorf("got %+v, want 11 requests, peak 10, mean 2.75", r)
	}
}

// A client through the proxy gets the apiserver's answers, and an injected
// rejection in the form client-go classifies.
func TestRejectionsReachTheClientAsAPIErrors(t *testing.T) {
	up, stop := fakeAPIServer(t)
	defer stop()
	p, err := Start(up, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cs := clientFor(t, p)
	ctx := context.Background()

	if _, err := cs.CoreV1().ConfigMaps("ns").Get(ctx, "c", metav1.GetOptions{}); err != nil {
		t.Fatalf("forwarded get: %v", err)
	}
	for _, tc := range []struct {
		status int
		is     func(error) bool
	}{
		{409, apierrors.IsConflict},
		{500, apierrors.IsInternalError},
	} {
		p.SetRules(Rule{Verbs: []string{"create"}, Resources: []string{"configmaps"}, Status: tc.status})
		_, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
		if !tc.is(err) {
			t.Errorf("status %d: got %v", tc.status, err)
		}
	}
	p.SetRules()
	if _, err := cs.CoreV1().ConfigMaps("ns").Get(ctx, "c", metav1.GetOptions{}); err != nil {
		t.Fatalf("get after the rules are lifted: %v", err)
	}
	recs := p.Records(time.Time{})
	rejected := 0
	for _, r := range recs {
		if r.Rejected != 0 {
			rejected++
		}
	}
	if len(recs) != 4 || rejected != 2 {
		t.Errorf("records %+v: want 4 with 2 rejected", recs)
	}
}

func TestATooManyRequestsCarriesRetryAfter(t *testing.T) {
	up, stop := fakeAPIServer(t)
	defer stop()
	p, err := Start(up, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetRules(Rule{Verbs: []string{"get"}, Status: 429, RetryAfter: 7})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, p.CAData())}}}
	resp, err := client.Get(p.URL() + "/api/v1/namespaces/ns/configmaps/c")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" {
		t.Errorf("status %d, Retry-After %q; want 429 with Retry-After 7", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func pool(t *testing.T, pemData []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemData) {
		t.Fatal("no certificate")
	}
	return p
}

func clientFor(t *testing.T, p *Proxy) *kubernetes.Clientset {
	t.Helper()
	return kubernetes.NewForConfigOrDie(restConfigFor(t, p))
}
