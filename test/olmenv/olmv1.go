package olmenv

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/ociimage"
)

// OLM v1 runs as upstream ships it: catalogd and operator-controller as
// Deployments in olmv1-system, from upstream's kustomize base at the
// version bin/catalogd was built from, with this machine's images,
// certificates and registries.conf patched in. Not as host processes:
// catalogd (v1.2.0) always serves its ClusterCatalog webhook on every
// interface (controller-runtime's webhook server, whose host it never
// sets; --webhook-server-port only moves the port), which nothing here may
// do on the host. In a pod, every interface is the pod's own.
const (
	OLMv1Namespace = "olmv1-system"
	// CatalogdDeployment and OperatorControllerDeployment are upstream's
	// names.
	CatalogdDeployment           = "catalogd-controller-manager"
	OperatorControllerDeployment = "operator-controller-controller-manager"
	operatorControllerModule     = "github.com/operator-framework/operator-controller"
)

// OLMv1 is OLM v1 running on the real node.
type OLMv1 struct {
	// Version is operator-controller's release, e.g. v1.2.0.
	Version string
	// CatalogdImage and OperatorControllerImage are the images of
	// bin/catalogd and bin/operator-controller the Deployments run.
	CatalogdImage, OperatorControllerImage string
	// PodRegistry is the cluster's registry where pods reach it, over
	// TLS: catalogd and operator-controller pull catalog and bundle images
	// themselves, from inside their pods, not through the node's
	// containerd.
	PodRegistry string

	env *Env
}

// StartOLMv1 installs OLM v1 and returns once catalogd's webhook answers
// and both controllers are available. It all goes with the cluster.
func (e *Env) StartOLMv1(ctx context.Context) (*OLMv1, error) {
	if e.Cluster.RegistryTLS == "" {
		return nil, errors.New("the cluster serves its registry to no pod (no RegistryTLS): OLM v1 pulls from inside its pods")
	}
	version, configDir, err := e.olmv1Source(ctx)
	if err != nil {
		return nil, err
	}
	o := &OLMv1{Version: version, PodRegistry: e.Cluster.RegistryTLS, env: e}
	if o.CatalogdImage, err = e.pushBinaryImage(ctx, "catalogd", version); err != nil {
		return nil, err
	}
	if o.OperatorControllerImage, err = e.pushBinaryImage(ctx, "operator-controller", version); err != nil {
		return nil, err
	}
	dir := filepath.Join(e.work, "olmv1")
	if err := o.writeKustomization(dir, configDir); err != nil {
		return nil, err
	}
	manifests, err := run(ctx, dir, "", filepath.Join(e.BinDir, "kustomize"), "build", ".")
	if err != nil {
		return nil, err
	}
	if _, err := e.Kubectl(manifests, "apply", "--server-side", "-f", "-"); err != nil {
		return nil, err
	}
	for _, d := range []string{CatalogdDeployment, OperatorControllerDeployment} {
		if _, err := e.Kubectl("", "-n", OLMv1Namespace, "rollout", "status", "deployment/"+d, "--timeout=4m"); err != nil {
			return nil, fmt.Errorf("%w\n%s\n%s", err, e.Describe(OLMv1Namespace, "pods"), o.Logs(30))
		}
	}
	return o, o.waitWebhook(ctx)
}

// Logs are the last lines of catalogd's and operator-controller's logs,
// for a failure's message.
func (o *OLMv1) Logs(lines int) string {
	var b strings.Builder
	for _, d := range []string{CatalogdDeployment, OperatorControllerDeployment} {
		out, err := o.env.Kubectl("", "-n", OLMv1Namespace, "logs", "deployment/"+d, fmt.Sprintf("--tail=%d", lines))
		if err != nil {
			out = err.Error()
		}
		fmt.Fprintf(&b, "----- %s -----\n%s\n", d, out)
	}
	return b.String()
}

// olmv1Source is the operator-controller release bin/catalogd and
// bin/operator-controller were built from, and that release's config/
// directory in the module cache: its CRDs and manifests must be the
// binaries' own.
func (e *Env) olmv1Source(ctx context.Context) (version, configDir string, err error) {
	for _, bin := range []string{"catalogd", "operator-controller"} {
		v, err := moduleVersion(filepath.Join(e.BinDir, bin), operatorControllerModule)
		if err != nil {
			return "", "", err
		}
		if version != "" && v != version {
			return "", "", fmt.Errorf("bin/catalogd is %s of %s but bin/operator-controller %s: run `make tools`", version, operatorControllerModule, v)
		}
		version = v
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	configDir = filepath.Join(strings.TrimSpace(string(out)), operatorControllerModule+"@"+version, "config")
	if _, err := os.Stat(configDir); err != nil {
		return "", "", fmt.Errorf("%s's manifests: %w (run `make tools`, which downloads the module)", operatorControllerModule, err)
	}
	return version, configDir, nil
}

// moduleVersion is the version of module that binary was built with.
func moduleVersion(binary, module string) (string, error) {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return "", fmt.Errorf("%s: %w (run `make tools`)", binary, err)
	}
	for _, m := range append(info.Deps, &info.Main) {
		if m.Path == module {
			if m.Replace != nil {
				return "", fmt.Errorf("%s: %s is replaced by %s; its manifests cannot be found", binary, module, m.Replace.Path)
			}
			return m.Version, nil
		}
	}
	return "", fmt.Errorf("%s was not built from %s", binary, module)
}

// pushBinaryImage is upstream's image of one of OLM v1's binaries: the
// static binary at /<name> on nothing, run as 65532 (its Dockerfile's
// user); upstream's Deployments start it from the working directory /.
func (e *Env) pushBinaryImage(ctx context.Context, name, version string) (string, error) {
	spec := ociimage.Binary(filepath.Join(e.BinDir, name), "/"+name, "65532:65532")
	return e.pushSpec(ctx, spec, "localcluster/"+name+":"+version)
}

// The Service names the serving certificate is for: catalogd serves
// catalogs at its Service (--external-address), where operator-controller
// fetches them, and its webhook at the same Service, where the apiserver
// calls it; operator-controller serves metrics at its own.
var olmv1ServiceNames = []string{
	"catalogd-service." + OLMv1Namespace + ".svc",
	"catalogd-service." + OLMv1Namespace + ".svc." + localcluster.ClusterDomain,
	"operator-controller-service." + OLMv1Namespace + ".svc",
	"operator-controller-service." + OLMv1Namespace + ".svc." + localcluster.ClusterDomain,
}

// writeKustomization writes, in dir, upstream's base (as its basic-olm
// overlay uses it) with what upstream's cert-manager and e2e components
// would add: certificates, here issued by the test, the CA that signed the
// registry's, and a registries.conf, here sending ghcr.io to the cluster's
// registry.
func (o *OLMv1) writeKustomization(dir, configDir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	cert, err := newServingCert(olmv1ServiceNames...)
	if err != nil {
		return err
	}
	// kustomize loads bases only by relative path.
	config, err := filepath.Rel(dir, configDir)
	if err != nil {
		return err
	}
	var kustomization bytes.Buffer
	if err := olmv1Kustomization.Execute(&kustomization, map[string]string{
		"Config":                 filepath.ToSlash(config),
		"Namespace":              OLMv1Namespace,
		"CatalogdRepo":           strings.TrimSuffix(o.CatalogdImage, ":"+o.Version),
		"OperatorControllerRepo": strings.TrimSuffix(o.OperatorControllerImage, ":"+o.Version),
		"Tag":                    o.Version,
		"CABundle":               base64.StdEncoding.EncodeToString(cert.CA),
	}); err != nil {
		return err
	}
	registryCA, err := os.ReadFile(o.env.Cluster.CACertFile)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"registry-ca.crt":    registryCA,
		"kustomization.yaml": kustomization.Bytes(),
		"deployments.yaml":   []byte(olmv1DeploymentPatches),
		"tls.crt":            cert.Cert,
		"tls.key":            cert.Key,
		"ca.crt":             cert.CA,
		"registries.conf":    []byte(registriesConf(o.PodRegistry)),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// registriesConf has containers/image, which catalogd and
// operator-controller pull with, fetch ghcr.io's images from the cluster's
// registry.
func registriesConf(registry string) string {
	return fmt.Sprintf(`[[registry]]
prefix = %q
location = %q
`, PublicRegistry, registry)
}

// waitWebhook waits until catalogd's webhook admits a ClusterCatalog: it
// fails closed, and a ready pod may not be serving it yet.
func (o *OLMv1) waitWebhook(ctx context.Context) error {
	probe := `apiVersion: olm.operatorframework.io/v1
kind: ClusterCatalog
metadata:
  name: webhook-probe
spec:
  source:
    type: Image
    image:
      ref: ` + PublicRegistry + `/probe/probe:latest
`
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	for {
		if _, last = o.env.Kubectl(probe, "create", "--dry-run=server", "-f", "-"); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("catalogd's webhook never admitted a ClusterCatalog: %w", ctx.Err()), last)
		case <-time.After(time.Second):
		}
	}
}

var olmv1Kustomization = template.Must(template.New("kustomization").Parse(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {{.Namespace}}
resources:
- {{.Config}}/base/common
- {{.Config}}/base/catalogd
- {{.Config}}/base/operator-controller
images:
- name: quay.io/operator-framework/catalogd
  newName: {{.CatalogdRepo}}
  newTag: {{.Tag}}
- name: quay.io/operator-framework/operator-controller
  newName: {{.OperatorControllerRepo}}
  newTag: {{.Tag}}
generatorOptions:
  disableNameSuffixHash: true
secretGenerator:
- name: olmv1-cert
  type: kubernetes.io/tls
  files: [tls.crt, tls.key, ca.crt]
- name: olmv1-pull-cas
  files: [ca.crt=registry-ca.crt]
configMapGenerator:
- name: olmv1-registries-conf
  files: [registries.conf]
patches:
- path: deployments.yaml
# As upstream's TLS component: the catalog server is HTTPS on 443.
- target: {kind: Service, name: catalogd-service}
  patch: |-
    - {op: replace, path: /spec/ports/0/port, value: 443}
    - {op: replace, path: /spec/ports/0/name, value: https}
# What cert-manager's CA injector would write.
- target: {kind: MutatingWebhookConfiguration, name: catalogd-mutating-webhook-configuration}
  patch: |-
    - {op: add, path: /webhooks/0/clientConfig/caBundle, value: {{.CABundle}}}
`))

// olmv1DeploymentPatches are upstream's arguments with its TLS
// component's, which include the CAs to trust for registries
// (--pull-cas-dir), and the registries.conf containers/image reads from
// /etc/containers. The caches stay upstream's emptyDir at /var/cache: in a
// pod, that is under the real node's kubelet directory, in the cluster's.
const olmv1DeploymentPatches = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + CatalogdDeployment + `
  namespace: ` + OLMv1Namespace + `
spec:
  template:
    spec:
      containers:
      - name: manager
        args:
        - --leader-elect
        - --metrics-bind-address=:7443
        - --external-address=catalogd-service.` + OLMv1Namespace + `.svc
        - --tls-cert=/var/certs/tls.crt
        - --tls-key=/var/certs/tls.key
        - --pull-cas-dir=/var/ca-certs
        volumeMounts:
        - {name: olmv1-cert, mountPath: /var/certs, readOnly: true}
        - {name: pull-cas, mountPath: /var/ca-certs, readOnly: true}
        - {name: registries-conf, mountPath: /etc/containers, readOnly: true}
      volumes:
      - {name: olmv1-cert, secret: {secretName: olmv1-cert}}
      - {name: pull-cas, secret: {secretName: olmv1-pull-cas}}
      - {name: registries-conf, configMap: {name: olmv1-registries-conf}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + OperatorControllerDeployment + `
  namespace: ` + OLMv1Namespace + `
spec:
  template:
    spec:
      containers:
      - name: manager
        args:
        - --health-probe-bind-address=:8081
        - --metrics-bind-address=:8443
        - --leader-elect
        - --catalogd-cas-dir=/var/certs
        - --tls-cert=/var/certs/tls.crt
        - --tls-key=/var/certs/tls.key
        - --pull-cas-dir=/var/ca-certs
        volumeMounts:
        - {name: olmv1-cert, mountPath: /var/certs, readOnly: true}
        - {name: pull-cas, mountPath: /var/ca-certs, readOnly: true}
        - {name: registries-conf, mountPath: /etc/containers, readOnly: true}
      volumes:
      - {name: olmv1-cert, secret: {secretName: olmv1-cert}}
      - {name: pull-cas, secret: {secretName: olmv1-pull-cas}}
      - {name: registries-conf, configMap: {name: olmv1-registries-conf}}
`
