package main

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"time"
)

var sslConfigType = &pbType{
	name: "tensorflow.serving.SSLConfig",
	fields: []*pbField{
		{name: "server_key", kind: pbString},
		{name: "server_cert", kind: pbString},
		{name: "custom_ca", kind: pbString},
		{name: "client_verify", kind: pbBool},
	},
}

// readSSLConfig reads --ssl_config_file as TF Serving builds its gRPC
// port's credentials from it: the PEM of the key and the certificate
// chain, and with client_verify a client certificate required and
// verified against custom_ca. TF Serving aborts on a file it cannot parse;
// a key and certificate gRPC cannot use fail the start.
func readSSLConfig(path string, log *logger) (*tls.Config, error) {
	msg, err := readProtoFile(path, sslConfigType)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair([]byte(msg.str("server_cert")), []byte(msg.str("server_key")))
	if err != nil {
		log.errorf("Invalid private key or certificate in %s: %v", path, err)
		return nil, errorf(codeInvalidArgument, "Failed to BuildAndStart gRPC server")
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	if msg.num("client_verify") != 0 {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = x509.NewCertPool()
		cfg.ClientCAs.AppendCertsFromPEM([]byte(msg.str("custom_ca")))
	}
	return cfg, nil
}

// handshakeAndClose is the gRPC port over TLS: the double does not speak
// gRPC, but a client sees the certificate served, and is refused as gRPC
// would refuse it, before the connection closes.
func handshakeAndClose(c net.Conn) {
	defer func() { _ = c.Close() }()
	if tc, ok := c.(*tls.Conn); ok {
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		_ = tc.Handshake()
	}
}
