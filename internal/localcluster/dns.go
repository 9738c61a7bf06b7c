package localcluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// ClusterDomain is the real node's cluster domain: a Service is
// <name>.<namespace>.svc.cluster.local.
const ClusterDomain = "cluster.local"

// clusterDNS answers the real node's pods for Services by name, as CoreDNS
// does in a real cluster, from the apiserver's Services: OLM's operators
// dial catalogs at <service>.<namespace>.svc. It answers A records for
// Services with a cluster IP, and nothing else: other names are not found,
// and the pods here reach the world outside the cluster by address.
type clusterDNS struct {
	conn     net.PacketConn
	services cache.Indexer
	stop     context.CancelFunc
	done     chan struct{}
}

// startClusterDNS serves DNS on addr (UDP) until stop.
func startClusterDNS(ctx context.Context, addr string, cs kubernetes.Interface) (*clusterDNS, error) {
	conn, err := net.ListenPacket("udp4", addr)
	if err != nil {
		return nil, fmt.Errorf("cluster DNS: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(cs, 0)
	svcInformer := factory.Core().V1().Services().Informer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), svcInformer.HasSynced) {
		cancel()
		_ = conn.Close()
		return nil, errors.New("cluster DNS: the Service cache did not sync")
	}
	d := &clusterDNS{conn: conn, services: svcInformer.GetIndexer(), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		d.serve()
	}()
	go func() {
		<-ctx.Done()
		_ = conn.Close()
		factory.Shutdown()
	}()
	return d, nil
}

func (d *clusterDNS) Close() {
	d.stop()
	<-d.done
}

func (d *clusterDNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if reply := d.answer(buf[:n]); reply != nil {
			_, _ = d.conn.WriteTo(reply, from)
		}
	}
}

// DNS wire constants (RFC 1035).
const (
	dnsHeaderLen  = 12
	dnsTypeA      = 1
	dnsClassIN    = 1
	rcodeNXDomain = 3
	rcodeNotImpl  = 4
	flagQR        = 1 << 15
	flagAA        = 1 << 10
	flagRD        = 1 << 8
	// A Service's address can change when it is recreated: a short TTL.
	dnsTTL = 5
)

// answer is the reply to one query message, or nil for a message that is
// not a query with one question.
func (d *clusterDNS) answer(msg []byte) []byte {
	if len(msg) < dnsHeaderLen {
		return nil
	}
	flags := binary.BigEndian.Uint16(msg[2:])
	if flags&flagQR != 0 || binary.BigEndian.Uint16(msg[4:]) != 1 {
		return nil
	}
	name, end, ok := readQuestionName(msg, dnsHeaderLen)
	if !ok || end+4 > len(msg) {
		return nil
	}
	qtype, qclass := binary.BigEndian.Uint16(msg[end:]), binary.BigEndian.Uint16(msg[end+2:])
	question := msg[dnsHeaderLen : end+4]

	reply := make([]byte, dnsHeaderLen, dnsHeaderLen+len(question)+16)
	copy(reply, msg[:2])
	rflags := uint16(flagQR|flagAA) | flags&flagRD | flags&0x7800 // the opcode
	var ip net.IP
	if opcode := (flags >> 11) & 0xf; opcode != 0 {
		rflags |= rcodeNotImpl
	} else if ip, ok = d.lookup(name); !ok {
		rflags |= rcodeNXDomain
	}
	binary.BigEndian.PutUint16(reply[2:], rflags)
	binary.BigEndian.PutUint16(reply[4:], 1)
	reply = append(reply, question...)
	// A known name with no record of the asked type (AAAA) is an empty
	// answer, not "not found": resolvers then use the A record.
	if ip != nil && qtype == dnsTypeA && qclass == dnsClassIN {
		binary.BigEndian.PutUint16(reply[6:], 1)
		reply = append(reply, 0xc0, dnsHeaderLen) // the question's name
		reply = binary.BigEndian.AppendUint16(reply, dnsTypeA)
		reply = binary.BigEndian.AppendUint16(reply, dnsClassIN)
		reply = binary.BigEndian.AppendUint32(reply, dnsTTL)
		reply = binary.BigEndian.AppendUint16(reply, 4)
		reply = append(reply, ip.To4()...)
	}
	return reply
}

// readQuestionName reads an uncompressed name at off; it returns the name
// in lower case without the final dot, and where the name ends.
func readQuestionName(msg []byte, off int) (string, int, bool) {
	var labels []string
	for off < len(msg) {
		n := int(msg[off])
		off++
		if n == 0 {
			return strings.ToLower(strings.Join(labels, ".")), off, true
		}
		if n > 63 || off+n > len(msg) {
			return "", 0, false
		}
		labels = append(labels, string(msg[off:off+n]))
		off += n
	}
	return "", 0, false
}

// lookup is the cluster IP of the Service name stands for.
func (d *clusterDNS) lookup(name string) (net.IP, bool) {
	rest, ok := strings.CutSuffix(name, ".svc."+ClusterDomain)
	if !ok {
		return nil, false
	}
	svcName, ns, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(ns, ".") {
		return nil, false
	}
	obj, exists, err := d.services.GetByKey(ns + "/" + svcName)
	if err != nil || !exists {
		return nil, false
	}
	ip := net.ParseIP(obj.(*corev1.Service).Spec.ClusterIP).To4()
	return ip, ip != nil
}
