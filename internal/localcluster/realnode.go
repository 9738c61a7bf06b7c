package localcluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/modelserver-dev/modelserver-operator/internal/ociimage"
)

// A real node is a kubelet with containerd, runc and the CNI bridge plugin
// (Debian's packages) beside the control plane, so that pods really run:
// images are pulled from a registry the cluster serves on loopback, pods
// get addresses on a bridge in 198.18.0.0/24 and reach the apiserver through
// the kubernetes Service (kube-proxy), and claims get real, size-limited
// volumes.

const (
	kubeletName    = "kubelet"
	kubeProxyName  = "kube-proxy"
	containerdName = "containerd"
	pauseName      = "pause"
)

// realNodeBinaries are built by `make tools`, beside Binaries.
var realNodeBinaries = []string{kubeletName, kubeProxyName, pauseName}

// hostPrograms are the Debian packages' programs a real node needs.
var hostPrograms = map[string]string{
	"containerd":                         "containerd",
	"containerd-shim-runc-v2":            "containerd",
	"runc":                               "runc",
	"iptables":                           "iptables",
	"ip":                                 "iproute2",
	cniBinDir + "/bridge":                "containernetworking-plugins",
	cniBinDir + "/host-local":            "containernetworking-plugins",
	cniBinDir + "/loopback":              "containernetworking-plugins",
	"/etc/ssl/certs/ca-certificates.crt": "ca-certificates",
}

// RealNodeSupport says, in one line, why this machine cannot run a real
// node, or returns nil when it can: it needs root, cgroups, the Debian
// packages that `make node-deps` installs, and the binaries `make tools`
// builds.
func RealNodeSupport(binDir string) error {
	if os.Geteuid() != 0 {
		return errors.New("no real node: containers need root (kubelet, containerd and runc run as root)")
	}
	if len(cgroupHierarchies()) == 0 {
		return errors.New("no real node: no cgroup hierarchy under /sys/fs/cgroup")
	}
	var missing []string
	for prog, pkg := range hostPrograms {
		if strings.HasPrefix(prog, "/") {
			if _, err := os.Stat(prog); err != nil {
				missing = append(missing, pkg)
			}
		} else if _, err := exec.LookPath(prog); err != nil {
			missing = append(missing, pkg)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no real node: missing Debian packages %s (make node-deps installs them)", strings.Join(slices.Compact(slices.Sorted(slices.Values(missing))), " "))
	}
	if binDir == "" {
		dir, err := defaultBinDir()
		if err != nil {
			return err
		}
		binDir = dir
	}
	for _, b := range realNodeBinaries {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Errorf("no real node: %s not found in %s (run `make tools`)", b, binDir)
		}
	}
	return nil
}

// realNode is what a cluster with a real node holds beyond the control
// plane.
type realNode struct {
	layout   realNodeLayout
	reaper   *reaper
	registry *ociimage.Registry
	dns      *clusterDNS
	stopProv context.CancelFunc
	provDone chan struct{}
}

// prepareHost starts the reaper, holding the machine's real-node lock,
// before anything on the host changes, then records the sysctls to restore
// and creates the bridge and the pods' cgroup, which the apiserver and the
// kubelet need before they start.
func (c *Cluster) prepareHost(lock *os.File) error {
	rp, err := startReaper(c.Dir, lock)
	if err != nil {
		return err
	}
	c.node = &realNode{layout: realNodeLayout{dir: c.Dir}, reaper: rp}
	if err := recordHostState(c.Dir); err != nil {
		return err
	}
	if err := createBridge(); err != nil {
		return err
	}
	if err := rejectUnservedServiceIPs(); err != nil {
		return err
	}
	return createCgroupRoot(cgroupRootName)
}

// unservedChain refuses connections to the Service range that no
// kube-proxy rule has translated to a pod.
const unservedChain = "LOCALCLUSTER-UNSERVED"

// rejectUnservedServiceIPs makes a connection to a cluster IP that
// kube-proxy has not (or not yet) written a rule for refused, as a
// cluster's network would. Without it the packet follows the host's
// default route, and whatever answers beyond it (on some machines an
// egress proxy, with a 404) looks like the Service. The chain is hooked
// into filter's OUTPUT (this host's clients) and FORWARD (the pods'),
// which run after kube-proxy's DNAT, so translated connections no longer
// match it. teardownHost's sweep removes it with kube-proxy's chains.
func rejectUnservedServiceIPs() error {
	run := func(args ...string) error {
		if out, err := exec.Command("iptables", append([]string{"-w", "5"}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if exec.Command("iptables", "-w", "5", "-n", "-L", unservedChain).Run() != nil {
		if err := run("-N", unservedChain); err != nil {
			return err
		}
	}
	if err := run("-F", unservedChain); err != nil {
		return err
	}
	if err := run("-A", unservedChain, "-d", serviceSubnet,
		"-m", "comment", "--comment", "no kube-proxy rule for this cluster IP",
		"-j", "REJECT", "--reject-with", "icmp-port-unreachable"); err != nil {
		return err
	}
	for _, hook := range []string{"OUTPUT", "FORWARD"} {
		if exec.Command("iptables", "-w", "5", "-C", hook, "-j", unservedChain).Run() == nil {
			continue
		}
		if err := run("-I", hook, "1", "-j", unservedChain); err != nil {
			return err
		}
	}
	return nil
}

// sweepAbandonedRealNodes tears down what a run whose owner and reaper
// both died left on the host.
func sweepAbandonedRealNodes(logf func(string, ...any)) {
	matches, _ := filepath.Glob(filepath.Join(clustersRoot(), "*", hostStateFile))
	for _, m := range matches {
		dir := filepath.Dir(m)
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(dir), "%d-", &pid); err != nil || processAlive(pid) {
			continue
		}
		logf("cleaning up after a real node whose owner (pid %d) died", pid)
		_ = teardownHost(dir, logf)
		_ = os.RemoveAll(dir)
	}
}

func createBridge() error {
	if !linkExists(bridgeName) {
		if out, err := exec.Command("ip", "link", "add", bridgeName, "type", "bridge").CombinedOutput(); err != nil {
			return fmt.Errorf("create bridge %s: %v: %s", bridgeName, err, out)
		}
	}
	for _, args := range [][]string{
		{"addr", "replace", HostAddress + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// PrivateRepositories is the prefix of the registry's repositories whose
// downloads need RegistryPrivateCredentials.
const PrivateRepositories = "private/"

// startRealNode serves the registry, pushes the pause image, and starts
// containerd, the kubelet and kube-proxy; it returns once the node is
// Ready and its default StorageClass provisions claims.
func (c *Cluster) startRealNode(ctx context.Context, certs *pki, cs kubernetes.Interface) error {
	l := c.node.layout
	for _, d := range []string{l.containerdDir(), l.registryHostsDir(), l.cniConfDir(), l.cniDataDir(), l.kubeletDir(), l.volumesDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	c.RegistryPrivateCredentials = "puller:" + rand.Text()
	user, password, _ := strings.Cut(c.RegistryPrivateCredentials, ":")
	reg, err := ociimage.StartRegistry("127.0.0.1:0", filepath.Join(c.Dir, "registry"), ociimage.RegistryPrivate(PrivateRepositories, user, password))
	if err != nil {
		return fmt.Errorf("start the registry: %w", err)
	}
	c.node.registry = reg
	c.Registry = reg.Addr()
	if c.RegistryTLS, err = c.serveRegistryTLS(certs, reg); err != nil {
		return err
	}
	c.opts.Logf("registry is serving on %s, and with TLS on %s", c.Registry, c.RegistryTLS)

	pauseImg, err := ociimage.BuildLocal(ociimage.Binary(filepath.Join(c.opts.BinDir, pauseName), "/pause", ""))
	if err != nil {
		return fmt.Errorf("pause image: %w", err)
	}
	pause, err := c.PushImage(ctx, pauseImg, "localcluster/pause:local")
	if err != nil {
		return fmt.Errorf("pause image: %w", err)
	}
	if err := c.writeContainerdConfig(pause); err != nil {
		return err
	}
	containerd, err := c.startWithEnv(containerdName, "containerd", []string{"--config", l.containerdConfig()}, nil)
	if err != nil {
		return err
	}
	if err := poll(ctx, containerd, "containerd's socket", func(context.Context) (bool, error) {
		_, err := os.Stat(l.containerdSocket())
		return err == nil, err
	}); err != nil {
		return err
	}
	c.opts.Logf("containerd is serving on %s", l.containerdSocket())

	// Before the kubelet: its pods' resolv.conf names this server.
	if c.node.dns, err = startClusterDNS(context.Background(), net.JoinHostPort(HostAddress, "53"), cs); err != nil {
		return err
	}
	c.opts.Logf("cluster DNS is serving %s on %s:53", ClusterDomain, HostAddress)

	kubeletKubeconfig, err := c.componentKubeconfig(certs, "kubelet", "system:node:"+RealNodeName, "system:nodes")
	if err != nil {
		return err
	}
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	if err := os.WriteFile(l.kubeletConfig(), []byte(kubeletConfig(l, certs.caCertFile, kubeletPorts{serving: ports[0], healthz: ports[1]})), 0o600); err != nil {
		return err
	}
	kubelet, err := c.start(kubeletName, []string{
		"--config=" + l.kubeletConfig(),
		"--kubeconfig=" + kubeletKubeconfig,
		"--root-dir=" + l.kubeletDir(),
		"--cert-dir=" + filepath.Join(l.kubeletDir(), "pki"),
		"--hostname-override=" + RealNodeName,
		// Not loopback: the node needs an address the apiserver and pods
		// can reach, or it is left without one.
		"--node-ip=" + HostAddress,
		"--v=1",
	})
	if err != nil {
		return err
	}
	proxyKubeconfig, err := c.componentKubeconfig(certs, "kube-proxy", "system:kube-proxy")
	if err != nil {
		return err
	}
	if err := os.WriteFile(l.kubeProxyConfig(), []byte(kubeProxyConfig(proxyKubeconfig, ports[2], ports[3])), 0o600); err != nil {
		return err
	}
	proxy, err := c.start(kubeProxyName, []string{"--config=" + l.kubeProxyConfig(), "--v=1"})
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, kubelet, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[1])); err != nil {
		return err
	}
	if err := waitHTTP(ctx, proxy, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[2])); err != nil {
		return err
	}
	if err := poll(ctx, kubelet, "the real node Ready", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, fmt.Errorf("node %s: %s: %s", RealNodeName, cond.Reason, cond.Message)
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	c.opts.Logf("real node %s is Ready (kubelet, kube-proxy, containerd)", RealNodeName)
	return c.startProvisioner(ctx, cs)
}

// writeContainerdConfig writes containerd's config, with pause as the
// sandbox image, its registry hosts (the cluster's registry, over TLS
// too, and the registries it mirrors) and the CNI network.
func (c *Cluster) writeContainerdConfig(pause string) error {
	l := c.node.layout
	hosts := map[string]string{c.RegistryTLS: registryTLSHosts(c.RegistryTLS, c.CACertFile)}
	for _, host := range append([]string{c.Registry}, mirroredRegistries...) {
		hosts[host] = registryHosts(c.Registry)
	}
	for host, config := range hosts {
		hostDir := filepath.Join(l.registryHostsDir(), host)
		if err := os.MkdirAll(hostDir, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(hostDir, "hosts.toml"), []byte(config), 0o600); err != nil {
			return err
		}
	}
	if err := os.WriteFile(l.containerdConfig(), []byte(containerdConfig(l, pause, cniBinDir)), 0o600); err != nil {
		return err
	}
	cni, err := cniConfig(l)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(l.cniConfDir(), "10-"+cniNetworkName+".conflist"), cni, 0o600)
}

// serveRegistryTLS serves the registry over TLS on the host's bridge
// address too, where pods reach it, with a certificate of the cluster's
// CA (CACertFile).
func (c *Cluster) serveRegistryTLS(certs *pki, reg *ociimage.Registry) (string, error) {
	tmpl := certTemplate(pkix.Name{CommonName: "localcluster-registry"})
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses = []net.IP{net.ParseIP(HostAddress)}
	certPEM, keyPEM, err := certs.issue(tmpl, certs.ca, certs.caKey, filepath.Join(certs.dir, "registry.crt"), filepath.Join(certs.dir, "registry.key"))
	if err != nil {
		return "", err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return "", err
	}
	return reg.ServeTLS(net.JoinHostPort(HostAddress, "0"), cert)
}

// componentKubeconfig writes a kubeconfig for a component with its own
// client certificate.
func (c *Cluster) componentKubeconfig(certs *pki, name, cn string, orgs ...string) (string, error) {
	cert, key, err := certs.issueClient(name, cn, orgs...)
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.Dir, name+".kubeconfig")
	return path, c.writeKubeconfigAs(path, name, cert, key)
}

// PushImage pushes an image or an image index to the cluster's registry as ref (a name
// without the registry host, e.g. "modelserver-dev/modelserver-operator:0.1.0"),
// and returns the reference pods use. Only clusters with a real node have
// a registry.
func (c *Cluster) PushImage(ctx context.Context, img remote.Taggable, ref string) (string, error) {
	if c.node == nil {
		return "", errors.New("this cluster has no real node, so no registry")
	}
	full := c.Registry + "/" + ref
	return full, ociimage.Push(ctx, img, full)
}

// stopProvisioner ends the provisioner before the apiserver goes away.
func (c *Cluster) stopProvisioner() {
	if n := c.node; n != nil && n.stopProv != nil {
		n.stopProv()
		<-n.provDone
		n.stopProv = nil
	}
}

// stopRealNode ends the registry and has the reaper tear the node down; it
// runs after the processes are stopped.
func (c *Cluster) stopRealNode() {
	n := c.node
	if n == nil {
		return
	}
	if n.dns != nil {
		n.dns.Close()
	}
	if n.registry != nil {
		_ = n.registry.Close()
	}
	if n.reaper != nil {
		if err := n.reaper.finish(2 * time.Minute); err != nil {
			c.opts.Logf("%v", err)
			c.teardownErr = err
		}
	}
}

// TeardownError is what the real node's teardown could not undo, once Stop
// has returned (nil when the host is as it was).
func (c *Cluster) TeardownError() error { return c.teardownErr }
