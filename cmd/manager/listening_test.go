package main

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/modelserver-dev/modelserver-operator/internal/metricscert"
	"github.com/modelserver-dev/modelserver-operator/internal/servingtls/tlstest"
)

// The secure metrics server as the manager runs it, its certificate from
// the directory its Secret is mounted at: its check fails until it
// listens, and once it passes, a connection to the port is accepted at
// once, and served the directory's certificate (not one controller-runtime
// makes).
func TestTheMetricsCheckPassesOnlyOnceThePortAccepts(t *testing.T) {
	metrics := &listening{what: "the metrics server"}
	dir := t.TempDir()
	ca := tlstest.CA(t, "cert-manager")
	ca.Server(t, "modelserver-controller-manager-metrics-service").WriteTo(t, dir)
	certs, err := metricscert.New(dir, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	opts := metricsserver.Options{BindAddress: "127.0.0.1:0", SecureServing: true, TLSOpts: []func(*tls.Config){certs.TLSOption}}
	opts.ListenConfig.Control = metrics.control
	srv, err := metricsserver.NewServer(opts, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := metrics.check(nil); err == nil {
		t.Fatal("the check passed before the server started")
	} else if err.Error() != "the metrics server is not listening yet" {
		t.Errorf("check before start: %q", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("metrics server: %v", err)
		}
	})

	deadline := time.Now().Add(30 * time.Second)
	for metrics.check(nil) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the check did not pass within 30 s of the server's start")
		}
		time.Sleep(time.Millisecond)
	}
	// The bound port is known only once the listener exists; the check
	// passes a moment before that, while bind and listen run.
	bound := srv.(interface{ GetBindAddr() string })
	for bound.GetBindAddr() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the server reported no bound address")
		}
		time.Sleep(time.Millisecond)
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", bound.GetBindAddr(),
		&tls.Config{ServerName: "modelserver-controller-manager-metrics-service", RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("the check passed, but the metrics port refuses, or serves another certificate: %v", err)
	}
	_ = conn.Close()
}
