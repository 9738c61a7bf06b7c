package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
)

// msYAML is a ModelServer manifest with spec (indented YAML, under spec:).
func msYAML(name, spec string) string {
	return fmt.Sprintf("apiVersion: serving.modelserver.dev/v1alpha1\nkind: ModelServer\nmetadata:\n  name: %s\nspec:\n%s\n", name, spec)
}

const validModel = "  model:\n    storageUri: s3://models/resnet\n"

// uriYAML is a ModelServer manifest whose one model is at uri.
func uriYAML(name, uri string) string {
	return msYAML(name, "  model:\n    storageUri: '"+uri+"'\n")
}

// sha256Hex is 64 hex digits, the length of a #sha256= checksum.
var sha256Hex = strings.Repeat("0123456789abcdef", 4)

// TestMalformedAndHostileSpecsAreRefusedAtAdmission submits specs that are
// wrong or try to smuggle something into TF Serving's config or command
// line. The apiserver must refuse each with a message naming the field,
// and nothing is created.
func TestMalformedAndHostileSpecsAreRefusedAtAdmission(t *testing.T) {
	c, _ := runningOperator(t)
	ns := kubectlNamespace(t, c)
	long := strings.Repeat("a", 54)
	cases := []struct{ what, manifest, want string }{
		{"name longer than a Helm release name", msYAML(long, validModel), "at most 53 characters"},
		{"unicode name", msYAML("modèle", validModel), "RFC 1123"},
		{"upper-case name", msYAML("ResNet", validModel), "RFC 1123"},
		{"name with a dot (not a Service name)", msYAML("res.net", validModel), "DNS-1035"},
		{"model name with a quote and a shell command", msYAML("a1", "  model:\n    name: 'x\"; rm -rf /'\n    storageUri: s3://m/r\n"), "spec.model.name"},
		{"model name breaking out of the model config", msYAML("a2", "  model:\n    name: \"x\\\"\\n  base_path: \\\"/etc\"\n    storageUri: s3://m/r\n"), "spec.model.name"},
		{"unicode model name", msYAML("a3", "  model:\n    name: модель\n    storageUri: s3://m/r\n"), "spec.model.name"},
		{"model name over 63 characters", msYAML("a4", "  model:\n    name: "+strings.Repeat("m", 64)+"\n    storageUri: s3://m/r\n"), "spec.model.name"},
		{"storage URI with $(command)", msYAML("b1", "  model:\n    storageUri: 's3://m/$(reboot)'\n"), "spec.model.storageUri"},
		{"storage URI with a backtick", msYAML("b2", "  model:\n    storageUri: 's3://m/`id`'\n"), "spec.model.storageUri"},
		{"storage URI with ; and a second flag", msYAML("b3", "  model:\n    storageUri: 's3://m/r;--dest=/'\n"), "spec.model.storageUri"},
		{"storage URI with a newline", msYAML("b4", "  model:\n    storageUri: \"s3://m/r\\n--dest=/\"\n"), "spec.model.storageUri"},
		{"storage URI with a space and a flag", msYAML("b5", "  model:\n    storageUri: 's3://m/r --max-bytes=1'\n"), "spec.model.storageUri"},
		{"storage URI of an unknown scheme", msYAML("b6", "  model:\n    storageUri: ftp://host/m\n"), "must start with s3://"},
		{"storage URI file:///etc/passwd", msYAML("b7", "  model:\n    storageUri: file:///etc/passwd\n"), "must start with s3://"},
		{"relative storage path", msYAML("b8", "  model:\n    storageUri: models/resnet\n"), "must start with s3://"},
		{"storage path climbing out with ..", msYAML("b9", "  model:\n    storageUri: /models/../etc\n"), "must not contain '..'"},
		{"storage URI over 2048 characters", msYAML("b10", "  model:\n    storageUri: s3://m/"+strings.Repeat("x", 2100)+"\n"), "spec.model.storageUri"},
		{"pvc:// URI with an invalid claim name", msYAML("b11", "  model:\n    storageUri: pvc://Bad_Claim/m\n"), "must name a claim"},
		{"credentials for a pvc:// model", msYAML("b12", "  model:\n    storageUri: pvc://claim/m\n    credentialsSecret: creds\n"), "does not apply to a pvc://"},
		{"refresh of a pvc:// model", msYAML("b25", "  model:\n    storageUri: pvc://claim/m\n    refreshInterval: 1h\n"), "spec.model.refreshInterval does not apply to a pvc://"},
		{"refresh of a pinned archive", msYAML("b29", "  model:\n    storageUri: https://h/m.tgz#sha256="+sha256Hex+"\n    refreshInterval: 1h\n"), "does not apply to a storageUri that pins the model's digest"},
		{"refresh of an image by digest", msYAML("b30", "  model:\n    storageUri: oci://r.example/m@sha256:"+sha256Hex+"\n    refreshInterval: 1h\n"), "does not apply to a storageUri that pins the model's digest"},
		{"refresh every 30 s", msYAML("b26", validModel+"    refreshInterval: 30s\n"), "spec.model.refreshInterval must be at least 1m"},
		{"refresh interval in days", msYAML("b27", validModel+"    refreshInterval: 1d\n"), "spec.model.refreshInterval"},
		{"refresh interval of a fraction", msYAML("b28", validModel+"    refreshInterval: 1.5h\n"), "spec.model.refreshInterval"},
		{"fetch timeout of 30 s", msYAML("b31", validModel+"  fetch: {timeout: 30s}\n"), "spec.fetch.timeout must be from 1m to 168h"},
		{"fetch timeout over a week", msYAML("b32", validModel+"  fetch: {timeout: 169h}\n"), "spec.fetch.timeout must be from 1m to 168h"},
		{"fetch timeout in days", msYAML("b33", validModel+"  fetch: {timeout: 2d}\n"), "spec.fetch.timeout"},
		{"latency objective of 0", msYAML("b90", validModel+"  monitoring: {p99Latency: 0s}\n"), "spec.monitoring.p99Latency must be from 1ms to 1h"},
		{"latency objective of 2 h", msYAML("b91", validModel+"  monitoring: {p99Latency: 2h}\n"), "spec.monitoring.p99Latency must be from 1ms to 1h"},
		{"latency objective with TF Serving's metrics off", msYAML("b92", validModel+"  monitoring: {enabled: false, p99Latency: 250ms}\n"), "spec.monitoring.p99Latency needs spec.monitoring.enabled"},
		{"availability of 89%", msYAML("b93", validModel+"  monitoring: {availability: \"89\"}\n"), "spec.monitoring.availability must be from 90 to 99.999"},
		{"availability of 100%", msYAML("b94", validModel+"  monitoring: {availability: \"100\"}\n"), "spec.monitoring.availability"},
		{"availability of 99.9999%", msYAML("b95", validModel+"  monitoring: {availability: \"99.9999\"}\n"), "spec.monitoring.availability"},
		{"availability with TF Serving's metrics off", msYAML("b96", validModel+"  monitoring: {enabled: false, availability: \"99.9\"}\n"), "spec.monitoring.availability needs spec.monitoring.enabled"},
		{"credentials Secret name with a path", msYAML("b13", "  model:\n    storageUri: s3://m/r\n    credentialsSecret: ../admin\n"), "spec.model.credentialsSecret"},
		{"fragment that is not a checksum", uriYAML("b14", "https://x/y#sha256=zz"), "the only fragment is #sha256=<64 hex digits>"},
		{"checksum of 63 hex digits", uriYAML("b15", "https://x/m.tgz#sha256="+sha256Hex[:63]), "the only fragment is #sha256=<64 hex digits>"},
		{"checksum of 65 hex digits", uriYAML("b16", "https://x/m.tgz#sha256="+sha256Hex+"0"), "the only fragment is #sha256=<64 hex digits>"},
		{"empty checksum", uriYAML("b17", "https://x/m.tgz#sha256="), "the only fragment is #sha256=<64 hex digits>"},
		{"md5 checksum", uriYAML("b18", "https://x/m.tgz#md5="+sha256Hex[:32]), "the only fragment is #sha256=<64 hex digits>"},
		{"checksum on a pvc:// model", uriYAML("b19", "pvc://claim/m#sha256="+sha256Hex), "a pvc:// URI takes no fragment"},
		{"s3:// URI without a bucket", uriYAML("b20", "s3:///models/r"), "must name a bucket"},
		{"s3:// URI with user info", uriYAML("b21", "s3://AKIAKEY:secret@m/r"), "takes no user info or query parameters"},
		{"s3:// URI with a query", uriYAML("b22", "s3://m/r?versionId=1"), "takes no user info or query parameters"},
		{"https:// URL with user info", uriYAML("b23", "https://user:pw@h/m.tgz"), "must name a host and take no user info"},
		{"https:// URL naming a directory", uriYAML("b24", "https://h/models/"), "must name a file or an archive"},
		{"replicas over 1000", msYAML("c1", validModel+"  replicas: 1001\n"), "spec.replicas"},
		{"replicas past int32", msYAML("c2", validModel+"  replicas: 2147483648\n"), "spec.replicas"},
		{"negative replicas", msYAML("c3", validModel+"  replicas: -1\n"), "spec.replicas"},
		{"replicas as a string", msYAML("c4", validModel+"  replicas: \"3\"\n"), "spec.replicas"},
		{"equal gRPC and REST ports", msYAML("d1", validModel+"  ports: {grpc: 9000, rest: 9000}\n"), "must differ"},
		{"privileged port", msYAML("d2", validModel+"  ports: {grpc: 80}\n"), "spec.ports.grpc"},
		{"port past 65535", msYAML("d3", validModel+"  ports: {rest: 70000}\n"), "spec.ports.rest"},
		{"image with a space and extra arguments", msYAML("e1", validModel+"  image: 'tensorflow/serving:2 --model_base_path=/'\n"), "spec.image"},
		{"image over 512 characters", msYAML("e2", validModel+"  image: r.io/"+strings.Repeat("i", 520)+"\n"), "spec.image"},
		{"unknown pull policy", msYAML("e3", validModel+"  imagePullPolicy: Sometimes\n"), "spec.imagePullPolicy"},
		{"two version policies", msYAML("f1", "  model:\n    storageUri: s3://m/r\n    versionPolicy: {latest: {numVersions: 1}, all: {}}\n"), "exactly one of latest, specific or all"},
		{"no specific versions", msYAML("f2", "  model:\n    storageUri: s3://m/r\n    versionPolicy: {specific: {versions: []}}\n"), "spec.model.versionPolicy.specific.versions"},
		{"version label key breaking out of the config", msYAML("f3", "  model:\n    storageUri: s3://m/r\n    versionLabels: {\"a\\\" } x {\": 1}\n"), "versionLabels keys"},
		{"version label on version 0", msYAML("f4", "  model:\n    storageUri: s3://m/r\n    versionLabels: {stable: 0}\n"), "versionLabels values"},
		{"17 version labels", msYAML("f5", "  model:\n    storageUri: s3://m/r\n    versionLabels: {"+labels17()+"}\n"), "spec.model.versionLabels"},
		{"ExternalName Service", msYAML("g1", validModel+"  service: {type: ExternalName}\n"), "spec.service.type"},
		{"a command for the serving container", msYAML("g2", validModel+"  command: [/bin/sh, -c, id]\n"), "unknown field \"spec.command\""},
		{"storage class for a pvc:// model", msYAML("g3", "  model:\n    storageUri: pvc://claim/m\n  storage: {storageClassName: fast}\n"), "spec.storage does not apply"},
		{"a Gateway's request timeout of a fraction", msYAML("g4", validModel+"  gateway: {parentRefs: [{name: gw}], requestTimeout: 1.5s}\n"), "spec.gateway.requestTimeout"},
		{"a Gateway's request timeout in days", msYAML("g5", validModel+"  gateway: {parentRefs: [{name: gw}], requestTimeout: 2d}\n"), "spec.gateway.requestTimeout"},
		{"a Gateway's request timeout past the API's", msYAML("g6", validModel+"  gateway: {parentRefs: [{name: gw}], requestTimeout: 99999h99999m}\n"), "spec.gateway.requestTimeout must be under 100000h"},
		{"a request timeout of no REST route", msYAML("g7", validModel+"  gateway: {parentRefs: [{name: gw}], rest: false, requestTimeout: 90s}\n"), "spec.gateway.requestTimeout bounds the REST API's requests"},
	}
	for _, tc := range cases {
		out, err := kubectlStdinWith(c, tc.manifest, "create", "-n", ns, "-f", "-")
		if err == nil {
			t.Errorf("%s: admitted:\n%s", tc.what, out)
			continue
		}
		if !strings.Contains(out, tc.want) {
			t.Errorf("%s: refused, but the message lacks %q:\n%s", tc.what, tc.want, out)
		}
	}
	// The storage URI rules refuse the malformed URIs above, not their
	// well-formed neighbours (a server-side dry run creates nothing).
	for i, uri := range []string{
		"https://h/m.tgz#sha256=" + sha256Hex, "https://h/m.tgz#sha256=" + strings.ToUpper(sha256Hex),
		"http://h:8080/models/m.zip?X-Amz-Signature=abc", "https://h/a@b/.m.tar", "s3://b/m.tar.gz#sha256=" + sha256Hex,
		"s3://b", "gs://b/a/b/", "pvc://claim/team/m", "/srv/models/resnet",
		"https://models.blob.core.windows.net/team/resnet/", "https://Models.Blob.Core.ChinaCloudAPI.cn/team",
		"https://models.z01.blob.storage.azure.net/team/resnet.tar.gz#sha256=" + sha256Hex,
	} {
		if out, err := kubectlStdinWith(c, uriYAML(fmt.Sprintf("ok%d", i), uri), "create", "--dry-run=server", "-n", ns, "-f", "-"); err != nil {
			t.Errorf("storage URI %s: refused, want it admitted:\n%s", uri, out)
		}
	}
	for i, timeout := range []string{"1m", "90s", "6h", "168h"} {
		manifest := msYAML(fmt.Sprintf("timeout%d", i), validModel+"  fetch: {timeout: "+timeout+"}\n")
		if out, err := kubectlStdinWith(c, manifest, "create", "--dry-run=server", "-n", ns, "-f", "-"); err != nil {
			t.Errorf("spec.fetch.timeout %s: refused, want it admitted:\n%s", timeout, out)
		}
	}
	for i, interval := range []string{"1m", "90s", "1h30m", "24h", "1h0m0s"} {
		manifest := msYAML(fmt.Sprintf("refresh%d", i), validModel+"    refreshInterval: "+interval+"\n")
		if out, err := kubectlStdinWith(c, manifest, "create", "--dry-run=server", "-n", ns, "-f", "-"); err != nil {
			t.Errorf("refreshInterval %s: refused, want it admitted:\n%s", interval, out)
		}
	}
	if out := kubectl(t, c, "get", "ms,deployments,jobs,services,configmaps,pvc,secrets", "-n", ns, "-o", "name"); strings.Contains(out, "/") &&
		strings.TrimSpace(strings.ReplaceAll(out, "configmap/kube-root-ca.crt", "")) != "" {
		t.Errorf("objects exist after only refused requests:\n%s", out)
	}
	report(t, "malformed or hostile spec submitted (admission)", len(cases),
		"every one refused by the apiserver with a message naming the field; nothing created")
}

// TestTheModelVolumesClassAndAccessModeCannotChange: a claim's class and
// access mode cannot change, nor can the pods move between the claim and
// copies of their own (storage mode), so a change of them is refused at admission,
// with the field named, rather than failing the release. Its size is the
// claim's to judge (TestAModelVolumeItsClassCannotGrowIsRefusedInTheApiserversWords
// in controllers): it may grow where the class allows it.
func TestTheModelVolumesClassAndAccessModeCannotChange(t *testing.T) {
	c, _ := runningOperator(t)
	ns := kubectlNamespace(t, c)
	kubectlStdin(t, c, msYAML("vol", validModel+"  storage: {size: 2Gi, storageClassName: standard, accessMode: ReadWriteOnce}\n"),
		"create", "-n", ns, "-f", "-")
	for _, tc := range []struct {
		what, storage, refusal string
	}{
		{"grow", `{"size": "3Gi"}`, ""},
		{"grow, in bytes", `{"size": 4294967296}`, ""},
		{"the same class and access mode", `{"storageClassName": "standard", "accessMode": "ReadWriteOnce"}`, ""},
		{"another class", `{"storageClassName": "fast"}`, "spec.storage.storageClassName is immutable"},
		{"no class (the default one)", `{"storageClassName": null}`, "spec.storage.storageClassName is immutable"},
		{"another access mode", `{"accessMode": "ReadWriteMany"}`, "spec.storage.accessMode is immutable"},
		{"the same mode, named", `{"mode": "Shared"}`, ""},
		{"copies of each pod's own", `{"mode": "PerPod"}`, "spec.storage.mode is immutable"},
	} {
		out, err := kubectlWith(c, "patch", "-n", ns, "ms/vol", "--type", "merge", "--dry-run=server",
			"-p", `{"spec": {"storage": `+tc.storage+`}}`)
		switch {
		case tc.refusal == "" && err != nil:
			t.Errorf("%s: refused, want it admitted:\n%s", tc.what, out)
		case tc.refusal != "" && err == nil:
			t.Errorf("%s: admitted, want it refused with %q", tc.what, tc.refusal)
		case tc.refusal != "" && !strings.Contains(out, tc.refusal):
			t.Errorf("%s: refused, but the message lacks %q:\n%s", tc.what, tc.refusal, out)
		}
	}
}

func labels17() string {
	var l []string
	for i := range 17 {
		l = append(l, fmt.Sprintf("l%d: 1", i))
	}
	return strings.Join(l, ", ")
}

// TestSpecsTheSchemaAdmitsButCannotWorkAreReportedAndChangeNothing covers
// what only the operator can see: Secrets that are missing or lack the
// keys, pod settings the apiserver would refuse on a pod, an autoscaler's
// behavior it would refuse, a server flag TF Serving would refuse at
// start, and a fetch pod the apiserver refuses. Each is reported in status with a reason and a message, and
// nothing is installed (or, for the refused pod, nothing serves).
func TestSpecsTheSchemaAdmitsButCannotWorkAreReportedAndChangeNothing(t *testing.T) {
	c, _ := runningOperator(t)
	ns := kubectlNamespace(t, c)
	kubectlStdin(t, c, `
apiVersion: v1
kind: Secret
metadata: {name: wrong-keys}
stringData: {username: admin, password: hunter2-canary}
---
apiVersion: v1
kind: Secret
metadata: {name: half-pair}
stringData: {AWS_ACCESS_KEY_ID: AKIAHALFPAIR}
---
apiVersion: v1
kind: Secret
metadata: {name: two-azure-identities}
stringData: {AZURE_STORAGE_ACCESS_KEY: a2V5, AZURE_STORAGE_SAS_TOKEN: "sv=2024-08-04&sp=rl&sig=c2ln"}
`, "apply", "-n", ns, "-f", "-")
	cases := []struct {
		what, name, spec, reason, message string
		installs                          bool
	}{
		{"missing credentials Secret", "s1", "  model:\n    storageUri: s3://m/r\n    credentialsSecret: not-there\n",
			"SecretNotFound", `Secret "not-there" not found`, false},
		{"credentials Secret with none of the scheme's keys", "s2", "  model:\n    storageUri: s3://m/r\n    credentialsSecret: wrong-keys\n",
			"InvalidSecret", "its keys: [password, username]", false},
		{"S3 credentials with half the key pair", "s3", "  model:\n    storageUri: s3://m/r\n    credentialsSecret: half-pair\n",
			"InvalidSecret", "needs both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", false},
		{"GCS URI with S3 keys", "s4", "  model:\n    storageUri: gs://m/r\n    credentialsSecret: half-pair\n",
			"InvalidSecret", "service-account.json", false},
		{"Azure credentials with a key and a SAS", "s21", "  model:\n    storageUri: https://models.blob.core.windows.net/team/r\n    credentialsSecret: two-azure-identities\n",
			"InvalidSecret", "the model is read with one identity, and it is given AZURE_STORAGE_ACCESS_KEY and AZURE_STORAGE_SAS_TOKEN: keep one", false},
		{"Azure container name with upper-case letters", "s22", "  model:\n    storageUri: https://models.blob.core.windows.net/Team/r\n",
			"InvalidSpec", `spec.model.storageUri: "Team" is not a container name`, false},
		{"pod label key with a space", "s5", validModel + "  podTemplate: {labels: {\"team name\": a}}\n",
			"InvalidSpec", "spec.podTemplate.labels", false},
		{"pod label taking over the operator's selector", "s6", validModel + "  podTemplate: {labels: {app.kubernetes.io/instance: other}}\n",
			"InvalidSpec", "is set by the operator", false},
		{"pod annotations over 256 KiB", "s7", validModel + "  podTemplate: {annotations: {big: " + strings.Repeat("x", 300<<10) + "}}\n",
			"InvalidSpec", "spec.podTemplate.annotations", false},
		{"environment variable name with '='", "s8", validModel + "  podTemplate: {env: [{name: \"A=B\", value: c}]}\n",
			"InvalidSpec", "spec.podTemplate.env[0].name", false},
		{"node selector value with a slash", "s9", validModel + "  podTemplate: {nodeSelector: {zone: a/b}}\n",
			"InvalidSpec", "spec.podTemplate.nodeSelector", false},
		{"memory request over its limit", "s15", validModel + "  resources: {limits: {memory: 1Gi}, requests: {memory: 2Gi}}\n",
			"InvalidSpec", "spec.resources.requests[memory]: 2Gi: must not exceed the limit, 1Gi", false},
		{"fetch memory request over its limit", "s20", validModel + "  fetch: {resources: {limits: {memory: 256Mi}, requests: {memory: 1Gi}}}\n",
			"InvalidSpec", "spec.fetch.resources.requests[memory]: 1Gi: must not exceed the limit, 256Mi", false},
		{"toleration of Exists with a value", "s16", validModel + "  podTemplate: {tolerations: [{key: dedicated, operator: Exists, value: ml}]}\n",
			"InvalidSpec", "spec.podTemplate.tolerations[0].value", false},
		{"node affinity of In without values", "s17", validModel + "  podTemplate: {affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: example.com/pool, operator: In}]}]}}}}\n",
			"InvalidSpec", "matchExpressions[0].values: must name at least one value when operator is In", false},
		{"autoscaler policy of no pods", "s19", "  model:\n    storageUri: s3://m/r\n  autoscaling: {maxReplicas: 3, targetCPUUtilizationPercentage: 60, behavior: {scaleUp: {policies: [{type: Pods, value: 0, periodSeconds: 60}]}}}\n",
			"InvalidSpec", "spec.autoscaling.behavior.scaleUp.policies[0].value: 0: must be greater than zero", false},
		{"server flag of the wrong type", "s18", validModel + "  extraArgs: [--rest_api_timeout_in_ms=5s]\n",
			"InvalidSpec", `spec.extraArgs[0]: --rest_api_timeout_in_ms takes a whole number (32 bits), not "5s"`, false},
		// The fetcher refuses these URIs; the schema cannot say why, so
		// the operator does, before installing anything.
		{"s3:// prefix with an empty segment", "s11", "  model:\n    storageUri: s3://m/a//b\n",
			"InvalidSpec", "spec.model.storageUri", false},
		{"s3:// prefix climbing out with ..", "s12", "  model:\n    storageUri: s3://m/a/../b\n",
			"InvalidSpec", "spec.model.storageUri", false},
		{"gs:// prefix with a . segment", "s13", "  model:\n    storageUri: gs://m/./b\n",
			"InvalidSpec", "spec.model.storageUri", false},
		{"storage URI that is not a URI", "s14", "  model:\n    storageUri: s3://m/r%zz\n",
			"InvalidSpec", "spec.model.storageUri", false},
		{"ServiceAccount that does not exist", "s10", validModel + "  podTemplate: {serviceAccountName: not-there}\n",
			"FetchPodRejected", `serviceaccount "not-there" not found`, true},
	}
	for _, tc := range cases {
		// create, not apply: apply would copy the spec into an annotation.
		if out, err := kubectlStdinWith(c, msYAML(tc.name, tc.spec), "create", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("%s: refused at admission, want it admitted: %s", tc.what, out)
		}
	}
	for _, tc := range cases {
		cond := "Deployed"
		if tc.reason == "FetchPodRejected" {
			cond = "ModelFetched"
		}
		waitForCondition(t, c, ns, tc.name, cond, tc.reason, 60*time.Second)
		msg := kubectl(t, c, "get", "-n", ns, "ms/"+tc.name, "-o", "jsonpath={.status.message}")
		if !strings.Contains(msg, tc.message) {
			t.Errorf("%s: status.message %q lacks %q", tc.what, msg, tc.message)
		}
		if phase := kubectl(t, c, "get", "-n", ns, "ms/"+tc.name, "-o", "jsonpath={.status.phase}"); phase != "Failed" {
			t.Errorf("%s: phase %s, want Failed", tc.what, phase)
		}
		owned := kubectl(t, c, "get", "deployments,jobs,services,configmaps,pvc,secrets", "-n", ns,
			"-l", "serving.modelserver.dev/modelserver="+tc.name, "-o", "name")
		records := kubectl(t, c, "get", "secrets", "-n", ns, "-l", "owner=helm,name="+tc.name, "-o", "name")
		switch {
		case !tc.installs && (owned != "" || records != ""):
			t.Errorf("%s: objects were created:\n%s\n%s", tc.what, owned, records)
		case tc.installs:
			if pods := kubectl(t, c, "get", "pods", "-n", ns, "-l", "app.kubernetes.io/instance="+tc.name, "-o", "name"); pods != "" {
				t.Errorf("%s: pods exist: %s", tc.what, pods)
			}
		}
	}
	if msg := kubectl(t, c, "get", "ms", "-n", ns, "-o", "jsonpath={.items[*].status}"); strings.Contains(msg, "hunter2") {
		t.Errorf("a Secret's value reached a status: %s", msg)
	}
	report(t, "spec admitted but unusable (missing or wrong Secret, pod settings or autoscaler behavior the apiserver refuses, a server flag TF Serving would refuse, refused fetch pod)", len(cases),
		"each reported in status (SecretNotFound, InvalidSecret, InvalidSpec, FetchPodRejected) with the field or key; nothing installed, or for the refused pod nothing serving")
}

func kubectlStdinWith(c *localcluster.Cluster, stdin string, args ...string) (string, error) {
	cmd := exec.Command(repoPath("bin/kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
