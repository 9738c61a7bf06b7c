package localcluster

import (
	"encoding/json"
	"fmt"
	"path/filepath"
)

// The real node's network, all in 198.18.0.0/15 (the benchmarking range,
// never routed between networks): the host is the bridge's gateway, pods get
// addresses beside it, and Services come from the second half.
const (
	// HostAddress is where pods reach this machine: the bridge's address.
	// The apiserver, and servers a test starts for pods (an object store),
	// listen on it.
	HostAddress   = "198.18.0.1"
	podSubnet     = "198.18.0.0/24"
	serviceSubnet = "198.19.0.0/16"
	// kubernetesServiceIP is the first address of serviceSubnet, which the
	// apiserver gives the kubernetes Service.
	kubernetesServiceIP = "198.19.0.1"
	// RealNodeName is the real node's name.
	RealNodeName = "real-node"
	// RealNodeStorageClass is the default StorageClass when a real node
	// runs: each claim gets a tmpfs of exactly its requested size, so a
	// model that does not fit really runs out of space.
	RealNodeStorageClass = "local"
	realNodeProvisioner  = "localcluster.modelserver.dev/tmpfs"
)

// realNodeLayout is where a real node keeps its state under the cluster's
// directory.
type realNodeLayout struct {
	dir string
}

func (l realNodeLayout) containerdDir() string { return filepath.Join(l.dir, "containerd") }
func (l realNodeLayout) containerdConfig() string {
	return filepath.Join(l.containerdDir(), "config.toml")
}
func (l realNodeLayout) containerdSocket() string {
	return filepath.Join(l.containerdDir(), "containerd.sock")
}
func (l realNodeLayout) registryHostsDir() string { return filepath.Join(l.containerdDir(), "certs.d") }
func (l realNodeLayout) cniConfDir() string       { return filepath.Join(l.dir, "cni", "net.d") }
func (l realNodeLayout) cniDataDir() string       { return filepath.Join(l.dir, "cni", "ipam") }
func (l realNodeLayout) kubeletDir() string       { return filepath.Join(l.dir, "kubelet") }
func (l realNodeLayout) kubeletConfig() string    { return filepath.Join(l.dir, "kubelet-config.yaml") }
func (l realNodeLayout) kubeProxyConfig() string {
	return filepath.Join(l.dir, "kube-proxy-config.yaml")
}
func (l realNodeLayout) volumesDir() string { return filepath.Join(l.dir, "volumes") }

// containerdConfig keeps every path of containerd's under the cluster's
// directory. Each setting that departs from containerd's defaults is there
// because this machine needs it.
func containerdConfig(l realNodeLayout, sandboxImage, cniBinDir string) string {
	d := l.containerdDir()
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
# Only what the CRI plugin uses; the others would probe the host.
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

# The tasks service needs the v1 runtime loaded, though pods use v2; its
# runc state goes under the cluster's directory too.
[plugins."io.containerd.runtime.v1.linux"]
  runtime_root = %[11]q

[plugins."io.containerd.grpc.v1.cri"]
  # Nothing can be pulled from outside: the pause image is built here and
  # served by the cluster's registry.
  sandbox_image = %[6]q
  # Without CAP_SYS_RESOURCE the sandbox's negative oom_score_adj fails
  # ("can't get final child's PID from pipe: EOF" from runc).
  restrict_oom_score_adj = true
  # Pod network namespaces under the state directory, not /var/run/netns,
  # so that tearing down finds them.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # No systemd here: cgroupfs on both sides, as the kubelet.
        SystemdCgroup = false
        Root = %[7]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[8]q
    conf_dir = %[9]q
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[10]q
`, filepath.Join(d, "root"), filepath.Join(d, "state"), l.containerdSocket(), l.containerdSocket()+".ttrpc",
		filepath.Join(d, "opt"), sandboxImage, filepath.Join(d, "runc"), cniBinDir, l.cniConfDir(), l.registryHostsDir(),
		filepath.Join(d, "runc-v1"))
}

// registryHosts is containerd's hosts.toml for a registry host: every pull
// of an image named after host goes to the local registry over HTTP.
// Mirroring a public registry's name (the operator's ghcr.io image) lets
// dist/install.yaml be applied as users apply it, as in an air-gapped
// cluster, and nothing is ever asked of the public registry.
func registryHosts(localRegistry string) string {
	return fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n",
		"http://"+localRegistry, "http://"+localRegistry)
}

// registryTLSHosts is containerd's hosts.toml for the registry's TLS
// address: pulls verify its certificate with the cluster's CA.
func registryTLSHosts(addr, caFile string) string {
	return fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = %q\n",
		"https://"+addr, "https://"+addr, caFile)
}

// cniConfig is a bridge with the host as the gateway. No masquerading: pods
// only talk to this machine and to each other.
func cniConfig(l realNodeLayout) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       cniNetworkName,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      bridgeName,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": podSubnet, "gateway": HostAddress}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": l.cniDataDir(),
				},
			},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

type kubeletPorts struct{ serving, healthz int }

// kubeletConfig is the node's KubeletConfiguration.
func kubeletConfig(l realNodeLayout, caFile string, ports kubeletPorts) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 and no systemd; kubelet >= 1.35 refuses v1
# unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
# Every pod under one cgroup of the node's own, so that tearing down can
# find and kill what the runtime leaves.
cgroupRoot: /%[1]s
cgroupsPerQOS: true
enforceNodeAllocatable: []
containerRuntimeEndpoint: unix://%[2]s
# The apiserver reaches the kubelet (logs, exec) on the node's address.
address: %[3]s
port: %[4]d
healthzBindAddress: 127.0.0.1
healthzPort: %[5]d
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[6]q}
authorization: {mode: Webhook}
podLogsDir: %[7]q
volumePluginDir: %[8]q
failSwapOn: false
# Pods resolve Services through the cluster's DNS (dns.go) and nothing
# else: the host's resolvers are not theirs.
resolvConf: ""
clusterDNS: [%[9]s]
clusterDomain: %[10]s
registerNode: true
serializeImagePulls: false
# A shared disk must not make the node evict pods or delete images.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {}
localStorageCapacityIsolation: false
# ConfigMap and Secret updates reach pods within seconds, not a minute.
syncFrequency: 10s
nodeStatusReportFrequency: 10s
shutdownGracePeriod: 0s
`, cgroupRootName, l.containerdSocket(), HostAddress, ports.serving, ports.healthz, caFile,
		filepath.Join(l.kubeletDir(), "pod-logs"), filepath.Join(l.kubeletDir(), "volume-plugins"), HostAddress, ClusterDomain)
}

// kubeProxyConfig runs kube-proxy in iptables mode without touching the
// host's conntrack settings or localhost routing.
func kubeProxyConfig(kubeconfig string, healthzPort, metricsPort int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
mode: iptables
hostnameOverride: %s
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
nodePortAddresses: ["%s/32"]
iptables:
  localhostNodePorts: false
# Zero leaves the kernel's conntrack settings as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
oomScoreAdj: 0
`, kubeconfig, RealNodeName, podSubnet, healthzPort, metricsPort, HostAddress)
}

// mirroredRegistries are the public registries whose images the real node
// pulls from the local registry instead, as an air-gapped cluster's
// mirrors do: the project's images (ghcr.io), operator-framework's
// (quay.io), and the image operator-sdk's bundle-upgrade decompresses a
// catalog with, which no flag changes (registry.access.redhat.com).
var mirroredRegistries = []string{"ghcr.io", "quay.io", "registry.access.redhat.com"}
