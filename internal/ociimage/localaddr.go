package ociimage

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// benchmarkNet is 198.18.0.0/15 (RFC 2544), the range the local cluster's
// node network uses; like loopback, it never leaves this machine, which is
// what makes plain HTTP without authentication acceptable.
var benchmarkNet = netip.MustParsePrefix("198.18.0.0/15")

// IsLocalHost reports whether host (a name or IP, without port or
// brackets) is one that only this machine answers: localhost, a loopback
// address, or one in 198.18.0.0/15. Other names are not resolved, because
// what a name resolves to can change between the check and the connection.
func IsLocalHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	return ip.IsLoopback() || benchmarkNet.Contains(ip)
}

// checkLocalHostPort fails unless hostport is a host:port whose host is
// local; what says what the address is for, to make the error specific.
func checkLocalHostPort(hostport, what string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("%s %q is not host:port: %w", what, hostport, err)
	}
	if host == "" {
		return fmt.Errorf("%s %q has no host, which would mean every interface; give 127.0.0.1 (or an address in 198.18.0.0/15)", what, hostport)
	}
	if !IsLocalHost(host) {
		return fmt.Errorf("%s %q is not on this machine: only localhost, 127.0.0.0/8, ::1 and 198.18.0.0/15 are allowed, because the registry speaks plain HTTP without authentication", what, hostport)
	}
	return nil
}
