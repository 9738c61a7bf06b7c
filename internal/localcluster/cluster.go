// Package localcluster runs a real Kubernetes control plane on this machine
// for tests, benchmarks and the demo: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler built from source, and kwok
// playing the kubelet for a pool of fake nodes, so that Deployments become
// Ready and Jobs complete through the real controllers without a container
// runtime.
package localcluster

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

//go:embed stages.yaml
var stages []byte

// Options configure a cluster. The zero value is a usable default.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler and kwok. Default: $LOCALCLUSTER_BIN_DIR, else the
	// bin/ directory at the root of this repository (see `make tools`).
	BinDir string
	// NodePools are the fake nodes to create. Default: DefaultNodePools().
	NodePools []NodePool
	// StartTimeout bounds Start. Default: 3 minutes.
	StartTimeout time.Duration
	// ComponentQPS, if set, is the client QPS of kube-controller-manager and
	// kube-scheduler (burst twice that). Their defaults (20 and 50) make
	// thousands of pods wait on the controllers' own rate limiters rather
	// than on the apiserver, which is what a benchmark means to measure.
	ComponentQPS int
	// RealNode adds a real node (kubelet, kube-proxy, containerd, runc and
	// the CNI bridge) on which pods really run, a registry it pulls from,
	// and a StorageClass of real volumes. RealNodeSupport says whether the
	// machine can. With it, NodePools default to none.
	RealNode bool
	// RealNodeLockTimeout bounds the wait for another real node on this
	// machine to stop. Default: 30 minutes.
	RealNodeLockTimeout time.Duration
	// AuditedUser, if set, has the apiserver write a line to AuditLog for
	// each request this user makes (its metadata: verb, resource, user,
	// response code), and none for anyone else's. A benchmark counts a
	// client's requests from it without standing between the client and
	// the apiserver. UserKubeconfig gives a client such a user.
	AuditedUser string
	// CRDDir, if set, holds CRDs (YAML files) to install as soon as the
	// apiserver is ready, before kube-controller-manager starts: its
	// garbage collector then knows their kinds from its first discovery.
	// With a CRD installed later, an object owned by a custom resource
	// outlives the resource until the collector discovers kinds again,
	// every 30 s.
	CRDDir string
	// Logf, if set, receives a line per start-up step.
	Logf func(format string, args ...any)
}

// Cluster is a running local control plane.
type Cluster struct {
	// Dir holds the cluster's data, credentials and component logs
	// (Dir/logs/<component>.log). It is removed by Stop.
	Dir string
	// Kubeconfig is the path of an admin kubeconfig for the cluster.
	Kubeconfig string
	// Config is the admin REST config (system:masters).
	Config *rest.Config
	// Nodes is the number of fake nodes created.
	Nodes int
	// Registry is the host:port of the registry the real node pulls from
	// (empty without a real node). Images named ghcr.io/... are pulled from
	// it too.
	Registry string
	// RegistryTLS is the same registry served over TLS on the host's
	// bridge address, which pods reach too; its certificate is signed by
	// the cluster's CA, CACertFile.
	RegistryTLS string
	// RegistryPrivateCredentials are the user:password the registry asks
	// for to download a repository under PrivateRepositories, as a private
	// registry would.
	RegistryPrivateCredentials string
	// CACertFile is the cluster's CA certificate (PEM).
	CACertFile string
	// EtcdURL is etcd's client URL (plain HTTP on loopback), for reading
	// its metrics.
	EtcdURL string
	// AuditLog is the file of Options.AuditedUser's requests, one JSON
	// object (an audit.k8s.io/v1 Event) per line; empty without one.
	AuditLog string

	opts     Options
	certs    *pki
	mu       sync.Mutex // guards procs
	procs    []*Process
	stopOnce sync.Once

	node        *realNode // nil without a real node
	lock        *os.File  // the machine's real-node lock, held until Stop
	teardownErr error
}

// Components, in start order.
const (
	etcdName      = "etcd"
	apiserverName = "kube-apiserver"
	kcmName       = "kube-controller-manager"
	schedulerName = "kube-scheduler"
	kwokName      = "kwok"
)

// Binaries lists the executables a cluster needs in its BinDir.
var Binaries = []string{etcdName, apiserverName, kcmName, schedulerName, kwokName}

// Start boots a cluster and returns once its API is serving, its
// controllers and scheduler are healthy and every fake node is Ready. On
// error nothing is left running.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	if opts.RealNodeLockTimeout == 0 {
		opts.RealNodeLockTimeout = 30 * time.Minute
	}
	if opts.NodePools == nil && !opts.RealNode {
		opts.NodePools = DefaultNodePools()
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.BinDir == "" {
		dir, err := defaultBinDir()
		if err != nil {
			return nil, err
		}
		opts.BinDir = dir
	}
	for _, b := range Binaries {
		if b == kwokName && len(opts.NodePools) == 0 {
			continue
		}
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make tools` first", b, opts.BinDir)
		}
	}
	if opts.RealNode {
		if err := RealNodeSupport(opts.BinDir); err != nil {
			return nil, err
		}
	}
	CleanStale()

	// Real nodes take turns on a machine; the wait for another to finish
	// (a parallel test package's whole suite) is not start-up time.
	var lock *os.File
	if opts.RealNode {
		lctx, lcancel := context.WithTimeout(ctx, opts.RealNodeLockTimeout)
		l, err := acquireRealNodeLock(lctx, opts.Logf)
		lcancel()
		if err != nil {
			return nil, err
		}
		lock = l
		sweepAbandonedRealNodes(opts.Logf)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	// A port picked free can be taken by another process before the
	// component binds it; such a start is retried with fresh ports.
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		var c *Cluster
		c, err = boot(ctx, opts, lock)
		if err == nil {
			c.lock = lock
			return c, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
		opts.Logf("port taken during start-up, retrying: %v", err)
	}
	if lock != nil {
		_ = lock.Close()
	}
	return nil, err
}

func boot(ctx context.Context, opts Options, lock *os.File) (_ *Cluster, err error) { //nolint:gocognit // the control plane's start-up in its order; nearly every branch is a step's error return
	dir, err := newClusterDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), opts: opts}
	track(c)
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	for _, d := range []string{"logs", "pids", "home"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	// The host is prepared before any component starts: the apiserver
	// listens on the bridge's address.
	listenAddr := "127.0.0.1"
	if opts.RealNode {
		if err := c.prepareHost(lock); err != nil {
			return nil, err
		}
		listenAddr = HostAddress
	}
	certs, err := newPKI(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, err
	}
	c.CACertFile = certs.caCertFile
	c.certs = certs
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	etcdPort, etcdPeerPort, apiPort, kcmPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4]

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort)
	etcd, err := c.start(etcdName, []string{
		"--name=local",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=local=" + peerURL,
		// The data is thrown away with the cluster; fsync would only make
		// every write wait on the disk.
		"--unsafe-no-fsync",
		"--log-level=warn",
	})
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, etcd, http.DefaultClient, etcdURL+"/health"); err != nil {
		return nil, err
	}
	c.EtcdURL = etcdURL
	opts.Logf("etcd is serving on %s", etcdURL)

	apiURL := fmt.Sprintf("https://%s:%d", listenAddr, apiPort)
	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + listenAddr,
		"--advertise-address=" + listenAddr,
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--tls-cert-file=" + certs.servingCertFile,
		"--tls-private-key-file=" + certs.servingKeyFile,
		"--client-ca-file=" + certs.caCertFile,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=PodSecurity",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + certs.saPubFile,
		"--service-account-signing-key-file=" + certs.saKeyFile,
		"--service-cluster-ip-range=" + serviceSubnet,
		"--allow-privileged=true",
		"--profiling=false",
		// The aggregation layer, for extension apiservers such as OLM's
		// packageserver: they trust the aggregator's client certificate
		// and the user it names in these headers.
		"--requestheader-client-ca-file=" + certs.caCertFile,
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + certs.frontProxyCertFile,
		"--proxy-client-key-file=" + certs.frontProxyKeyFile,
		// Straight to a Service's endpoints: the apiserver runs on the
		// host, where cluster IPs route only with a real node.
		"--enable-aggregator-routing=true",
	}
	if opts.RealNode {
		// Pods reach the apiserver through the kubernetes Service; the
		// apiserver reaches the kubelet (logs, exec) as the admin.
		apiArgs = append(apiArgs,
			"--kubelet-client-certificate="+certs.adminCertFile,
			"--kubelet-client-key="+certs.adminKeyFile,
			"--kubelet-preferred-address-types=InternalIP")
	} else {
		// The lease reconciler refuses a loopback advertise address; nothing
		// reaches the apiserver through the kubernetes Service without a
		// real node.
		apiArgs = append(apiArgs, "--endpoint-reconciler-type=none")
	}
	if opts.AuditedUser != "" {
		auditArgs, err := c.auditOneUser(opts.AuditedUser)
		if err != nil {
			return nil, err
		}
		apiArgs = append(apiArgs, auditArgs...)
	}
	apiserver, err := c.start(apiserverName, apiArgs)
	if err != nil {
		return nil, err
	}
	c.Config = &rest.Config{
		Host: apiURL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   certs.caPEM,
			CertData: certs.adminCert,
			KeyData:  certs.adminKeyPEM,
		},
		QPS:   200,
		Burst: 400,
	}
	if err := c.writeKubeconfig(); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	if err := c.waitAPIReady(ctx, apiserver, cs); err != nil {
		return nil, err
	}
	opts.Logf("kube-apiserver is ready on %s", apiURL)
	if opts.CRDDir != "" {
		if err := c.InstallCRDs(ctx, opts.CRDDir); err != nil {
			return nil, err
		}
	}

	componentArgs := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
	}
	if opts.ComponentQPS > 0 {
		componentArgs = append(componentArgs,
			fmt.Sprintf("--kube-api-qps=%d", opts.ComponentQPS),
			fmt.Sprintf("--kube-api-burst=%d", 2*opts.ComponentQPS))
	}
	kcm, err := c.start(kcmName, append([]string{
		fmt.Sprintf("--secure-port=%d", kcmPort),
		"--service-account-private-key-file=" + certs.saKeyFile,
		"--root-ca-file=" + certs.caCertFile,
		"--cluster-signing-cert-file=" + certs.caCertFile,
		"--cluster-signing-key-file=" + certs.caKeyFile,
		"--controllers=*,-node-ipam-controller",
		// Give up on an unreachable fake node slowly; kwok renews leases.
		"--node-monitor-grace-period=60s",
	}, componentArgs...))
	if err != nil {
		return nil, err
	}
	scheduler, err := c.start(schedulerName, append([]string{
		fmt.Sprintf("--secure-port=%d", schedPort),
	}, componentArgs...))
	if err != nil {
		return nil, err
	}
	kwok, err := c.startKwok(opts)
	if err != nil {
		return nil, err
	}

	if err := createStorageClass(ctx, cs, !opts.RealNode); err != nil {
		return nil, fmt.Errorf("create storage class: %w", err)
	}
	if c.Nodes, err = createNodes(ctx, cs, opts.NodePools); err != nil {
		return nil, err
	}
	insecure := insecureClient()
	for _, w := range []struct {
		p   *Process
		url string
	}{
		{kcm, fmt.Sprintf("https://127.0.0.1:%d/healthz", kcmPort)},
		{scheduler, fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort)},
	} {
		if err := waitHTTP(ctx, w.p, insecure, w.url); err != nil {
			return nil, err
		}
	}
	opts.Logf("kube-controller-manager and kube-scheduler are healthy")
	if c.Nodes > 0 {
		if err := c.waitNodesReady(ctx, kwok, cs); err != nil {
			return nil, err
		}
		opts.Logf("%d fake nodes are Ready", c.Nodes)
	}
	// Pods can only be admitted once the namespace's default
	// ServiceAccount exists; waiting for it proves the controllers act.
	if err := c.waitDefaultServiceAccount(ctx, kcm, cs, metav1.NamespaceDefault); err != nil {
		return nil, err
	}
	if opts.RealNode {
		if err := c.startRealNode(ctx, certs, cs); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// startKwok runs kwok for the fake nodes; a cluster with none runs without.
func (c *Cluster) startKwok(opts Options) (*Process, error) {
	if len(opts.NodePools) == 0 {
		return nil, nil
	}
	stagesFile := filepath.Join(c.Dir, "stages.yaml")
	if err := os.WriteFile(stagesFile, stages, 0o600); err != nil {
		return nil, err
	}
	return c.startWithEnv(kwokName, filepath.Join(opts.BinDir, kwokName), []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--config=" + stagesFile,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
		"--node-lease-duration-seconds=40",
		// Fake pods' and nodes' addresses: never routed, but kept in the
		// benchmarking range like the real node's.
		"--cidr=198.18.128.0/17",
		"--node-ip=198.18.127.254",
	}, []string{"HOME=" + filepath.Join(c.Dir, "home")})
}

// Stop shuts every component down (newest first), kills what does not stop
// within ten seconds, and removes Dir. It is safe to call more than once
// and from several goroutines.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.stopProvisioner()
		for i := len(c.procs) - 1; i >= 0; i-- {
			c.procs[i].Stop(10 * time.Second)
		}
		c.stopRealNode()
		if c.lock != nil {
			_ = c.lock.Close()
		}
		if os.Getenv("LOCALCLUSTER_KEEP") == "" {
			_ = os.RemoveAll(c.Dir)
		}
		untrack(c)
	})
}

// Pids returns the process ID of each process the cluster runs, by its
// name: for the control plane the name of its binary (Binaries), for those
// started with StartProcess the name they were given.
func (c *Cluster) Pids() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pids := map[string]int{}
	for _, p := range c.procs {
		pids[p.name] = p.Pid()
	}
	return pids
}

// Clientset returns a typed admin client.
func (c *Cluster) Clientset() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(c.Config)
}

// LogTails returns the last lines of every component's log, for a failing
// test to print.
func (c *Cluster) LogTails(lines int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, p := range c.procs {
		fmt.Fprintf(&b, "----- %s (%s) -----\n%s\n", p.name, p.logFile, tail(p.logFile, lines))
	}
	return b.String()
}

// StartProcess runs a program beside the cluster, for example the operator
// under test. It gets the same guarantees as the components: output in
// Dir/logs/<name>.log, killed if this process dies, stopped (first) by Stop.
func (c *Cluster) StartProcess(name, binary string, args, env []string) (*Process, error) {
	return c.startWithEnv(name, binary, args, env)
}

func (c *Cluster) start(name string, args []string) (*Process, error) {
	return c.startWithEnv(name, filepath.Join(c.opts.BinDir, name), args, nil)
}

func (c *Cluster) startWithEnv(name, binary string, args, env []string) (*Process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := startProcess(name, binary, args, env,
		filepath.Join(c.Dir, "logs"), filepath.Join(c.Dir, "pids"))
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

func (c *Cluster) writeKubeconfig() error {
	return c.writeKubeconfigAs(c.Kubeconfig, "admin", c.Config.CertData, c.Config.KeyData)
}

// writeKubeconfigAs writes a kubeconfig for the cluster that authenticates
// with the given client certificate.
func (c *Cluster) writeKubeconfigAs(path, user string, cert, key []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user, Namespace: metav1.NamespaceDefault}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}

// poll runs cond every 100ms until it reports done, the context ends, or
// the watched process exits (whose log tail then explains why).
func poll(ctx context.Context, p *Process, what string, cond func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if p != nil && !p.running() {
			return false, p.exitError()
		}
		done, err := cond(ctx)
		if err != nil {
			last = err
		}
		return done, nil
	})
	if err != nil && ctx.Err() != nil {
		if last != nil {
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, err, last)
		}
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return err
}

func waitHTTP(ctx context.Context, p *Process, client *http.Client, url string) error {
	return poll(ctx, p, p.name+" health", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("%s: %s", url, resp.Status)
	})
}

func (c *Cluster) waitAPIReady(ctx context.Context, p *Process, cs kubernetes.Interface) error {
	return poll(ctx, p, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		var code int
		res := cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&code)
		return code == http.StatusOK, res.Error()
	})
}

func (c *Cluster) waitNodesReady(ctx context.Context, p *Process, cs kubernetes.Interface) error {
	return poll(ctx, p, "fake nodes Ready", func(ctx context.Context) (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == c.Nodes, fmt.Errorf("%d of %d nodes Ready", ready, c.Nodes)
	})
}

func (c *Cluster) waitDefaultServiceAccount(ctx context.Context, p *Process, cs kubernetes.Interface, ns string) error {
	return poll(ctx, p, "default ServiceAccount in "+ns, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// freePorts asks the kernel for n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// defaultBinDir finds bin/ at the root of this module from the working
// directory, which for `go test` is the package's directory.
func defaultBinDir() (string, error) {
	if dir := os.Getenv("LOCALCLUSTER_BIN_DIR"); dir != "" {
		return dir, nil
	}
	root, err := RepositoryRoot()
	if err != nil {
		return "", fmt.Errorf("%w: set LOCALCLUSTER_BIN_DIR", err)
	}
	return filepath.Join(root, "bin"), nil
}

// RepositoryRoot is this module's root directory, found from the working
// directory upwards.
func RepositoryRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(mod), "module github.com/modelserver-dev/modelserver-operator\n") {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", errors.New("cannot find the repository's root from " + wd)
		}
	}
}
