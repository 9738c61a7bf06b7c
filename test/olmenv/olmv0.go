package olmenv

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

// Where OLM v0 runs, as upstream's install lays it out.
const (
	OLMNamespace = "olm"
	// OperatorsNamespace holds the global OperatorGroup: an operator
	// subscribed there watches every namespace.
	OperatorsNamespace = "operators"
	// CatalogSource is the catalog's name in OLMNamespace.
	CatalogSource = "modelserver-catalog"
)

// StartOLMv0 installs OLM v0 the way its release manifests do: the CRDs of
// the pinned operator-framework/api, the olm and operators namespaces, and
// olm-operator, catalog-operator and packageserver as Deployments of OLM's
// image on the real node, with packageserver behind the aggregated API;
// then the global OperatorGroup and a CatalogSource of the catalog image.
// It returns once packageserver serves the package.
func (e *Env) StartOLMv0(ctx context.Context) error {
	crds, err := e.olmCRDs(ctx)
	if err != nil {
		return err
	}
	args := append([]string{"apply", "--server-side"}, crdArgs(crds)...)
	if _, err := e.Kubectl("", args...); err != nil {
		return err
	}
	if err := e.Cluster.WaitForCRDs(ctx, time.Minute); err != nil {
		return err
	}
	cert, err := newServingCert("packageserver-service." + OLMNamespace + ".svc")
	if err != nil {
		return err
	}
	manifests, err := renderOLM(olmParams{
		Namespace: OLMNamespace, OperatorsNamespace: OperatorsNamespace,
		OLMImage: e.OLMImage, OPMImage: e.OPMImage,
		ServingCert: cert, CatalogSource: CatalogSource, CatalogImage: e.CatalogImage,
	})
	if err != nil {
		return err
	}
	if _, err := e.Kubectl(manifests, "apply", "--server-side", "-f", "-"); err != nil {
		return err
	}
	for _, d := range []string{"olm-operator", "catalog-operator", "packageserver"} {
		if _, err := e.Kubectl("", "-n", OLMNamespace, "rollout", "status", "deployment/"+d, "--timeout=4m"); err != nil {
			return fmt.Errorf("%w\n%s", err, e.Describe(OLMNamespace, "pods"))
		}
	}
	if _, err := e.Kubectl("", "wait", "--for=condition=Available", "--timeout=2m", "apiservice/v1.packages.operators.coreos.com"); err != nil {
		return fmt.Errorf("%w\n%s", err, e.Describe("", "apiservice/v1.packages.operators.coreos.com"))
	}
	// The catalog-operator resolves a namespace against every global
	// catalog, so one not yet serving fails the resolution; when it comes
	// up, only the namespaces whose Subscriptions name it are resolved
	// again. A namespace subscribed to a catalog of its own (operator-sdk
	// run bundle's) would wait for the next resync, minutes later.
	if _, err := e.Kubectl("", "-n", OLMNamespace, "wait", "--for=jsonpath={.status.connectionState.lastObservedState}=READY",
		"--timeout=3m", "catalogsource/"+CatalogSource); err != nil {
		return fmt.Errorf("%w\n%s", err, e.Describe(OLMNamespace, "catalogsource/"+CatalogSource))
	}
	if _, err := e.Kubectl("", "-n", OLMNamespace, "wait", "--for=create", "--timeout=2m", "packagemanifest/"+Package); err != nil {
		return fmt.Errorf("%w\n%s", err, e.Describe(OLMNamespace, "catalogsource/"+CatalogSource))
	}
	return nil
}

// Describe is `kubectl describe` of what, for a failure's message.
func (e *Env) Describe(namespace string, what ...string) string {
	args := []string{"describe"}
	if namespace != "" {
		args = append(args, "-n", namespace)
	}
	out, err := e.Kubectl("", append(args, what...)...)
	if err != nil {
		return err.Error()
	}
	return out
}

// olmCRDs are the CRD files of the operator-framework/api module the
// pinned OLM requires: OLM's release ships the same files.
func (e *Env) olmCRDs(ctx context.Context) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/operator-framework/api")
	cmd.Dir = filepath.Join(e.Root, "hack", "tools", "olm")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("find operator-framework/api in hack/tools/olm: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in operator-framework/api's crds/ (%v)", err)
	}
	return files, nil
}

func crdArgs(files []string) []string {
	var args []string
	for _, f := range files {
		args = append(args, "-f", f)
	}
	return args
}

// servingCert is a serving certificate with the CA that signed it.
type servingCert struct {
	CA, Cert, Key []byte
}

func (c servingCert) CABase64() string { return base64.StdEncoding.EncodeToString(c.CA) }

// newServingCert issues a certificate for host from a new CA: what the
// packageserver serves and its APIService's caBundle.
func newServingCert(hosts ...string) (servingCert, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return servingCert{}, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "olmenv-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return servingCert{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return servingCert{}, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: hosts[0]}, DNSNames: hosts,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return servingCert{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return servingCert{}, err
	}
	return servingCert{
		CA:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

type olmParams struct {
	Namespace, OperatorsNamespace string
	OLMImage, OPMImage            string
	ServingCert                   servingCert
	CatalogSource, CatalogImage   string
	Operators                     []olmOperator
}

// olmOperator is one of OLM's two operators, as its release runs it.
type olmOperator struct {
	Name, Command, Memory string
	Args                  []string
}

// operators are olm-operator and catalog-operator: the catalog-operator
// runs unpack Jobs and registry pods of the opm and OLM images, as a
// non-root user.
func (p olmParams) operators() []olmOperator {
	return []olmOperator{
		{Name: "olm-operator", Command: "/bin/olm", Memory: "160Mi", Args: []string{"--namespace", p.Namespace}},
		{Name: "catalog-operator", Command: "/bin/catalog", Memory: "80Mi", Args: []string{
			"--namespace", p.Namespace, "--configmapServerImage", p.OPMImage, "--opmImage", p.OPMImage,
			"--util-image", p.OLMImage, "--set-workload-user-id=true"}},
	}
}

func renderOLM(p olmParams) (string, error) {
	p.Operators = p.operators()
	t, err := template.New("olm").Funcs(template.FuncMap{
		"b64": func(b []byte) string { return base64.StdEncoding.EncodeToString(b) },
		// JSON is YAML, and quotes what needs it.
		"json": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
	}).Parse(olmManifests)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, p); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// olmManifests follow OLM's release manifests (deploy/chart at the pinned
// version): its namespaces with their Pod Security levels, one
// ServiceAccount for its operators bound to its all-powerful ClusterRole,
// and its Deployments. packageserver, which OLM installs through a CSV of
// its own, is a plain Deployment here behind the same APIService.
const olmManifests = `
apiVersion: v1
kind: Namespace
metadata:
  name: {{.Namespace}}
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: latest
---
apiVersion: v1
kind: Namespace
metadata:
  name: {{.OperatorsNamespace}}
  labels:
    pod-security.kubernetes.io/enforce: baseline
    pod-security.kubernetes.io/enforce-version: latest
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: olm-operator-serviceaccount
  namespace: {{.Namespace}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:controller:operator-lifecycle-manager
rules:
- apiGroups: ["*"]
  resources: ["*"]
  verbs: ["*"]
- nonResourceURLs: ["*"]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: olm-operator-binding-{{.Namespace}}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:controller:operator-lifecycle-manager
subjects:
- kind: ServiceAccount
  name: olm-operator-serviceaccount
  namespace: {{.Namespace}}
{{range .Operators}}---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{.Name}}
  namespace: {{$.Namespace}}
spec:
  replicas: 1
  selector: {matchLabels: {app: {{.Name}}}}
  template:
    metadata: {labels: {app: {{.Name}}}}
    spec:
      serviceAccountName: olm-operator-serviceaccount
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: {{.Name}}
        image: {{$.OLMImage}}
        command: [{{.Command}}]
        args: {{json .Args}}
        ports: [{name: metrics, containerPort: 8080}]
        readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 2}
        livenessProbe: {httpGet: {path: /healthz, port: 8080}}
        resources: {requests: {cpu: 10m, memory: {{.Memory}}}}
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
{{end}}---
apiVersion: v1
kind: Secret
metadata:
  name: packageserver-service-cert
  namespace: {{.Namespace}}
type: kubernetes.io/tls
data:
  tls.crt: {{b64 .ServingCert.Cert}}
  tls.key: {{b64 .ServingCert.Key}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: packageserver
  namespace: {{.Namespace}}
spec:
  replicas: 1
  selector: {matchLabels: {app: packageserver}}
  template:
    metadata: {labels: {app: packageserver}}
    spec:
      serviceAccountName: olm-operator-serviceaccount
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: packageserver
        image: {{.OLMImage}}
        command: [/bin/package-server]
        args: [-v=4, --secure-port=5443, --global-namespace={{.Namespace}},
          --tls-cert-file=/apiserver.local.config/certificates/tls.crt,
          --tls-private-key-file=/apiserver.local.config/certificates/tls.key]
        ports: [{name: https, containerPort: 5443}]
        readinessProbe: {httpGet: {scheme: HTTPS, path: /healthz, port: 5443}, periodSeconds: 2}
        resources: {requests: {cpu: 10m, memory: 50Mi}}
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
        volumeMounts:
        - {name: cert, mountPath: /apiserver.local.config/certificates, readOnly: true}
        - {name: tmp, mountPath: /tmp}
      volumes:
      - {name: cert, secret: {secretName: packageserver-service-cert}}
      - {name: tmp, emptyDir: {}}
---
apiVersion: v1
kind: Service
metadata:
  name: packageserver-service
  namespace: {{.Namespace}}
spec:
  selector: {app: packageserver}
  ports: [{name: https, port: 5443, targetPort: 5443}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1.packages.operators.coreos.com
spec:
  group: packages.operators.coreos.com
  version: v1
  groupPriorityMinimum: 2000
  versionPriority: 15
  caBundle: {{b64 .ServingCert.CA}}
  service: {namespace: {{.Namespace}}, name: packageserver-service, port: 5443}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: global-operators
  namespace: {{.OperatorsNamespace}}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: olm-operators
  namespace: {{.Namespace}}
spec:
  targetNamespaces: [{{.Namespace}}]
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: {{.CatalogSource}}
  namespace: {{.Namespace}}
spec:
  sourceType: grpc
  image: {{.CatalogImage}}
  displayName: ModelServer Operator
  publisher: modelserver-dev
  grpcPodConfig:
    securityContextConfig: restricted
`
