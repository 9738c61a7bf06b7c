package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/localcluster"
	"github.com/modelserver-dev/modelserver-operator/internal/values"
	"github.com/modelserver-dev/modelserver-operator/test/realenv"
	"github.com/modelserver-dev/modelserver-operator/test/stsserver"
)

// TestAModelIsFetchedWithARoleAssumedWithThePodsServiceAccountToken: a
// ModelServer whose Secret holds no key fetches its model with the role
// its service account is annotated with (spec.model.webIdentity: {}). The token the real kubelet projected into
// the fetch pod reaches an STS that, as AWS's does with the issuer's keys,
// has the apiserver verify it: bound to the fetch pod, for the audience
// asked, of the service account the pods run as. STS gives the store's
// keys for the role; a role the trust policy does not grant fails the
// fetch with AccessDenied, saying what to check.
func TestAModelIsFetchedWithARoleAssumedWithThePodsServiceAccountToken(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)
	const (
		role     = "arn:aws:iam::123456789012:role/model-reader"
		audience = "sts.modelserver.test"
	)
	subject := "system:serviceaccount:" + ns + ":model-reader"
	reviews := e.tokenReviewer(audience)
	sts, err := stsserver.Start(localcluster.HostAddress+":0", func(r stsserver.Request) (stsserver.Credentials, error) {
		user, refused, err := reviews.review(context.Background(), r.Token)
		if err != nil {
			return stsserver.Credentials{}, &stsserver.Refusal{Status: http.StatusBadRequest, Code: "IDPCommunicationError", Message: err.Error()}
		}
		if refused != "" {
			return stsserver.Credentials{}, &stsserver.Refusal{Status: http.StatusBadRequest, Code: "InvalidIdentityToken", Message: refused}
		}
		if r.RoleARN != role || user.Username != subject {
			return stsserver.Credentials{}, &stsserver.Refusal{Status: http.StatusForbidden, Code: "AccessDenied", Message: "Not authorized to perform sts:AssumeRoleWithWebIdentity"}
		}
		return stsserver.Credentials{AccessKeyID: e.S3Creds.AccessKey, SecretAccessKey: e.S3Creds.SecretKey, Expiration: time.Now().Add(time.Hour)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sts.Close)
	// The account is annotated with its role, as eksctl annotates one.
	e.kubectl(t, fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: model-reader
  annotations:
    eks.amazonaws.com/role-arn: %s
    eks.amazonaws.com/audience: %s
`, role, audience), "-n", ns, "apply", "-f", "-")
	e.keylessStore(t, ns, "AWS_ENDPOINT_URL_STS", sts.URL)
	// A role named in the spec; none: the account's.
	manifest := func(name, roleARN string) string {
		identity := "    webIdentity: {}\n"
		if roleARN != "" {
			identity = fmt.Sprintf("    webIdentity:\n      roleArn: %s\n      audience: %s\n", roleARN, audience)
		}
		return strings.Replace(e.modelServer(name, halfPlusTwo, 1, "64Mi", identity),
			"credentialsSecret: s3-creds", "credentialsSecret: store", 1) + "  podTemplate:\n    serviceAccountName: model-reader\n"
	}

	start := time.Now()
	e.kubectl(t, manifest("assumed", ""), "-n", ns, "apply", "-f", "-")
	e.waitReady(t, ns, "assumed", 3*time.Minute)
	t.Logf("kubectl apply to Ready, the role assumed: %.1fs", time.Since(start).Seconds())
	// The session's name is the namespace's and the ModelServer's, cut to
	// STS's 64 characters; this namespace's is long.
	reqs := sts.Requests()
	if len(reqs) != 1 || reqs[0].RoleARN != role || !strings.HasPrefix(reqs[0].SessionName, "modelserver-"+ns[:20]) || len(reqs[0].SessionName) > 64 {
		for i := range reqs {
			reqs[i].Token = "(a token)"
		}
		t.Errorf("STS was asked %+v; want one assumption of %s by a session named after the namespace", reqs, role)
	}
	reviews.wantOneBoundTo(t, "assumed-fetch-")
	if got := e.modelStatus(t, ns, "assumed"); got["123"] != "AVAILABLE" {
		t.Errorf("TF Serving (double) reports %v, want version 123 AVAILABLE", got)
	}
	pods, err := e.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: values.LabelComponent + "=serving"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			if v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool {
				return s.ServiceAccountToken != nil && s.ServiceAccountToken.Audience == audience
			}) {
				t.Errorf("serving pod %s holds the STS token too", p.Name)
			}
		}
	}

	e.kubectl(t, manifest("refused", "arn:aws:iam::123456789012:role/another"), "-n", ns, "apply", "-f", "-")
	msg := e.waitFetchFailed(t, ns, "refused", servingv1alpha1.ReasonAccessDenied)
	t.Logf("a role not granted: %s", msg)
	if !strings.Contains(msg, "STS refused role arn:aws:iam::123456789012:role/another") || !strings.Contains(msg, "trust policy") {
		t.Errorf("ModelFetched says %q; want the role refused, and the trust policy to check", msg)
	}
}

// TestAModelIsFetchedWithTheRoleOfItsServiceAccountsPodIdentityAssociation:
// webIdentity: {eksPodIdentity: true} asks the node's EKS Pod Identity
// Agent (a stand-in here, at the Secret's endpoint) for the role's keys
// with the token the real kubelet projected into the fetch pod, which the
// agent has the apiserver review, as EKS Auth does: bound to the fetch
// pod, for the agent's audience, of the associated service account. The
// token of an account with no association fails the fetch with
// AccessDenied.
func TestAModelIsFetchedWithTheRoleOfItsServiceAccountsPodIdentityAssociation(t *testing.T) {
	t.Parallel()
	e := realNode(t)
	ns := e.namespace(t)
	associated := "system:serviceaccount:" + ns + ":model-reader"
	reviews := e.tokenReviewer(values.EKSPodIdentityAudience)
	l, err := net.Listen("tcp", localcluster.HostAddress+":0")
	if err != nil {
		t.Fatal(err)
	}
	agent := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		user, refused, err := reviews.review(r.Context(), r.Header.Get("Authorization"))
		switch {
		case err != nil:
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(map[string]string{"code": "InternalServerException", "message": err.Error()})
		case refused != "":
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"code": "InvalidTokenException", "message": refused})
		case user.Username != associated:
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]string{"code": "AccessDeniedException", "message": "no pod identity association for " + user.Username})
		default:
			_ = json.NewEncoder(w).Encode(map[string]string{"AccessKeyId": e.S3Creds.AccessKey, "SecretAccessKey": e.S3Creds.SecretKey,
				"AccountId": "123456789012", "Expiration": time.Now().Add(6 * time.Hour).UTC().Format(time.RFC3339)})
		}
	}))
	agent.Listener = l
	agent.Start()
	t.Cleanup(agent.Close)
	for _, account := range []string{"model-reader", "stranger"} {
		e.kubectl(t, "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: "+account+"\n", "-n", ns, "apply", "-f", "-")
	}
	e.keylessStore(t, ns, "AWS_CONTAINER_CREDENTIALS_FULL_URI", agent.URL+"/v1/credentials")
	manifest := func(name, account string) string {
		return e.ModelServerYAML(realenv.ModelServer{Name: name, URI: halfPlusTwo, Secret: "store",
			ModelExtra: "    webIdentity: {eksPodIdentity: true}\n", SpecExtra: "  podTemplate:\n    serviceAccountName: " + account + "\n"})
	}

	start := time.Now()
	e.kubectl(t, manifest("associated", "model-reader"), "-n", ns, "apply", "-f", "-")
	e.waitReady(t, ns, "associated", 3*time.Minute)
	t.Logf("kubectl apply to Ready, the associated role's keys from the agent: %.1fs", time.Since(start).Seconds())
	reviews.wantOneBoundTo(t, "associated-fetch-")

	e.kubectl(t, manifest("stranger", "stranger"), "-n", ns, "apply", "-f", "-")
	msg := e.waitFetchFailed(t, ns, "stranger", servingv1alpha1.ReasonAccessDenied)
	t.Logf("an account with no association: %s", msg)
	if !strings.Contains(msg, "HTTP 403 AccessDeniedException: no pod identity association for system:serviceaccount:"+ns+":stranger") {
		t.Errorf("ModelFetched says %q; want the agent's refusal", msg)
	}
}

// keylessStore applies the Secret "store": the real node's S3 server, with
// no keys, and where the fetch gets them instead (key: value).
func (e *env) keylessStore(t *testing.T, ns, key, value string) {
	t.Helper()
	e.kubectl(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: store
stringData:
  AWS_ENDPOINT_URL: %q
  AWS_S3_FORCE_PATH_STYLE: "true"
  %s: %q
`, e.S3Endpoint, key, value), "-n", ns, "apply", "-f", "-")
}
