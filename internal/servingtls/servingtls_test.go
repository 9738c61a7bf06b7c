package servingtls

import (
	"encoding/pem"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/modelserver-dev/modelserver-operator/internal/servingtls/tlstest"
)

// pair is a certificate and its key, in PEM.
func pair(t *testing.T, name string) (cert, key []byte) {
	c := tlstest.CA(t, name)
	return c.CertPEM, c.KeyPEM
}

func TestCheck(t *testing.T) {
	cert, key := pair(t, "server")
	other, otherKey := pair(t, "other")
	for _, tc := range []struct {
		name          string
		f             Files
		requireClient bool
		want          string // a part of the problem; "" for none
	}{
		{"a pair", Files{Cert: cert, Key: key}, false, ""},
		{"a pair and its CA", Files{Cert: cert, Key: key, CA: other}, true, ""},
		{"a CA bundle of two", Files{Cert: cert, Key: key, CA: append(append([]byte{}, other...), cert...)}, true, ""},
		{"no CA needed without client certificates", Files{Cert: cert, Key: key}, false, ""},
		{"no certificate", Files{Key: key}, false, "tls.crt is empty"},
		{"no key", Files{Cert: cert}, false, "tls.key is empty"},
		{"another's key", Files{Cert: cert, Key: otherKey}, false, "tls.crt and tls.key: private key does not match public key"},
		{"the key in place of the certificate", Files{Cert: key, Key: key}, false, "tls.crt and tls.key: "},
		{"not PEM", Files{Cert: []byte("hello"), Key: key}, false, "tls.crt and tls.key: failed to find any PEM data in certificate input"},
		{"no CA with clients' certificates", Files{Cert: cert, Key: key}, true, "ca.crt is missing or empty: clientAuth Require needs"},
		{"a key for a CA", Files{Cert: cert, Key: key, CA: otherKey}, true, "ca.crt: block 1 is a PRIVATE KEY, not a CERTIFICATE"},
		{"a CA that is not PEM", Files{Cert: cert, Key: key, CA: []byte("hello")}, true, "ca.crt: no CERTIFICATE block in PEM"},
		{"a CA that does not parse", Files{Cert: cert, Key: key, CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")})}, true, "ca.crt: certificate 1: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got := Check(tc.f, tc.requireClient)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("Check = %q, want %q", got, tc.want)
			}
		})
	}
}

// sslConfigType is TF Serving's SSLConfig (tensorflow_serving/config/
// ssl_config.proto), built here so that protobuf's own text parser reads
// what SSLConfig writes.
func sslConfigType(t *testing.T) *dynamicpb.Message {
	t.Helper()
	str, boolean := descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_BOOL
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
	field := func(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(n), Type: typ.Enum(), Label: opt.Enum(), JsonName: proto.String(name)}
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("tensorflow_serving/config/ssl_config.proto"), Package: proto.String("tensorflow.serving"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("SSLConfig"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("server_key", 1, str), field("server_cert", 2, str), field("custom_ca", 3, str), field("client_verify", 4, boolean),
			},
		}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return dynamicpb.NewMessage(fd.Messages().ByName("SSLConfig"))
}

func TestSSLConfigReadsBackAsWritten(t *testing.T) {
	cert, key := pair(t, "server")
	ca, _ := pair(t, "ca")
	// What openssl leaves before a block, and bytes a PEM never holds, must
	// come back byte for byte too.
	cert = append([]byte("Bag Attributes\n    friendlyName: \"server\" \\ é\t\r\n"), cert...)
	for _, requireClient := range []bool{false, true} {
		f := Files{Cert: cert, Key: key, CA: ca}
		text := SSLConfig(f, requireClient)
		msg := sslConfigType(t)
		if err := prototext.Unmarshal([]byte(text), msg); err != nil {
			t.Fatalf("protobuf's parser refuses the SSL config: %v\n%s", err, text)
		}
		get := func(name string) any {
			return msg.Get(msg.Descriptor().Fields().ByName(protoreflect.Name(name))).Interface()
		}
		wantCA := ""
		if requireClient {
			wantCA = string(ca)
		}
		for name, want := range map[string]any{"server_key": string(key), "server_cert": string(cert), "custom_ca": wantCA, "client_verify": requireClient} {
			if got := get(name); got != want {
				t.Errorf("requireClient=%v: %s = %q, want %q", requireClient, name, got, want)
			}
		}
	}
}

func TestCheckGivesTheServersCertificate(t *testing.T) {
	issuer := tlstest.CA(t, "issuer")
	server := issuer.Server(t, "server")
	chain := append(append([]byte{}, server.CertPEM...), issuer.CertPEM...)
	if got, problem := Check(Files{Cert: chain, Key: server.KeyPEM}, false); got == nil || !got.Equal(server.Cert) {
		t.Errorf("Check = %v (%s), want the server certificate, expiring %v", got, problem, server.Cert.NotAfter)
	}
	if got, problem := Check(Files{Cert: []byte("hello"), Key: server.KeyPEM}, false); got != nil || problem == "" {
		t.Errorf("Check of no PEM = %v (%q), want no certificate and a problem", got, problem)
	}
}
