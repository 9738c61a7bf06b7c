package main

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

func TestFlagsAfterAStrayArgumentAreRefusedNotIgnored(t *testing.T) {
	err := runManager([]string{"--kubeconfig=/nonexistent", "manager", "--metrics-bind-address=0"})
	if err == nil || !strings.Contains(err.Error(), `unexpected argument "manager"`) {
		t.Fatalf("runManager with flags after a positional argument: %v, want it refused", err)
	}
}

// Whether the apiserver compresses what it sends is the client's call: Go's
// transport asks for gzip unless compression is disabled.
func TestTheAPIClientAsksForGzipOnlyWhenCompressionIsOn(t *testing.T) {
	var asked atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Store(r.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	}))
	defer srv.Close()
	for _, c := range []struct {
		compression bool
		want        string
	}{{false, ""}, {true, "gzip"}} {
		// Over TLS, as in a cluster: without a TLS config client-go uses
		// Go's default transport, which ignores the setting.
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
		tuneAPIClient(cfg, 200, 400, c.compression)
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Get(srv.URL + "/api")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got := asked.Load(); got != c.want {
			t.Errorf("compression %v: Accept-Encoding %q, want %q", c.compression, got, c.want)
		}
		if cfg.QPS != 200 || cfg.Burst != 400 {
			t.Errorf("QPS %v and burst %d, want 200 and 400", cfg.QPS, cfg.Burst)
		}
	}
}
