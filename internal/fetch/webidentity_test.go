package fetch

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/test/stsserver"
)

const testRole = "arn:aws:iam::123456789012:role/model-reader"

// roleStore is an S3 store that accepts only the temporary keys its STS
// gives for testRole, and a pod's token file.
type roleStore struct {
	s3     *fakeS3
	sts    *stsserver.Server
	token  string // the token file
	issued atomic.Int32
	// lifetime of the credentials STS gives.
	lifetime atomic.Int64
}

func newRoleStore(t *testing.T) *roleStore {
	t.Helper()
	rs := &roleStore{s3: newFakeS3(t), token: filepath.Join(t.TempDir(), "token")}
	rs.lifetime.Store(int64(time.Hour))
	rs.s3.revoke()
	rs.writeToken(t, "token-1")
	sts, err := stsserver.Start("127.0.0.1:0", rs.grant)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sts.Close)
	rs.sts = sts
	return rs
}

// grant is the STS's decision: temporary keys, which the store takes,
// for testRole alone.
func (rs *roleStore) grant(r stsserver.Request) (stsserver.Credentials, error) {
	if r.RoleARN != testRole {
		return stsserver.Credentials{}, &stsserver.Refusal{Status: http.StatusForbidden, Code: "AccessDenied", Message: "Not authorized to perform sts:AssumeRoleWithWebIdentity"}
	}
	n := rs.issued.Add(1)
	c := stsserver.Credentials{AccessKeyID: fmt.Sprintf("ASIATEMP%d", n), SecretAccessKey: fmt.Sprintf("temporary-secret-%d", n),
		SessionToken: fmt.Sprintf("session-%d-for-%s", n, r.Token), Expiration: time.Now().Add(time.Duration(rs.lifetime.Load()))}
	rs.s3.grant(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)
	return c, nil
}

func (rs *roleStore) writeToken(t *testing.T, v string) {
	t.Helper()
	if err := os.WriteFile(rs.token, []byte(v), 0o600); err != nil {
		t.Fatal(err)
	}
}

// options fetch uri as role, with a Secret that names the store's and
// STS's endpoints, and extra keys.
func (rs *roleStore) options(t *testing.T, uri, role string, extra map[string]string) Options {
	t.Helper()
	values := map[string]string{KeyAWSEndpointURL: rs.s3.URL, KeyAWSForcePathStyle: "true", KeyAWSEndpointURLSTS: rs.sts.URL}
	for k, v := range extra {
		values[k] = v
	}
	o, _ := testOptions(t, uri, secretDir(t, values))
	o.WebIdentity = WebIdentity{RoleARN: role, TokenFile: rs.token, SessionName: "modelserver-team-a-resnet"}
	return o
}

// TestARoleIsAssumedWithTheServiceAccountToken: with webIdentity, the
// fetch sends the token file's content to STS for the role, under its
// session name, and reads the store with the temporary keys and session
// token it gets; the Secret holds no key.
func TestARoleIsAssumedWithTheServiceAccountToken(t *testing.T) {
	rs := newRoleStore(t)
	files := model(1, 2)
	rs.s3.put(t, "resnet", files)
	o := rs.options(t, "s3://models/resnet", testRole, nil)
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	reqs := rs.sts.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d calls to STS for one fetch, want 1: %+v", len(reqs), reqs)
	}
	if r := reqs[0]; r.RoleARN != testRole || r.Token != "token-1" || r.SessionName != "modelserver-team-a-resnet" {
		t.Errorf("STS was asked %+v", r)
	}
	if rs.s3.anonymous != 0 {
		t.Errorf("%d anonymous requests to the store", rs.s3.anonymous)
	}
}

// TestARoleIsAssumedAgainWithTheRenewedTokenBeforeItsKeysExpire: the
// kubelet renews the projected token; credentials about to expire are
// replaced by a new assumption, with the token the file holds then.
func TestARoleIsAssumedAgainWithTheRenewedTokenBeforeItsKeysExpire(t *testing.T) {
	rs := newRoleStore(t)
	// STS says when they expire to the second, as AWS's does.
	rs.lifetime.Store(int64(webIdentityExpiryWindow + 2*time.Second))
	o := rs.options(t, "s3://models/resnet", testRole, nil)
	p := roleCredentials(awsConfigForTest(), o.WebIdentity, rs.sts.URL)
	first, err := p.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The cache gives them as expiring a window before STS said.
	renewal := first.Expires
	if left := time.Until(renewal); left <= 0 || left > 2*time.Second {
		t.Fatalf("credentials STS gives for %v are renewed in %v; want a minute sooner", time.Duration(rs.lifetime.Load()), left)
	}
	if again, err := p.Retrieve(context.Background()); time.Now().Before(renewal) && (err != nil || again.AccessKeyID != first.AccessKeyID) {
		t.Fatalf("credentials to be renewed at %s were replaced before: %v, %v", renewal, again.AccessKeyID, err)
	}
	rs.writeToken(t, "token-2")
	time.Sleep(time.Until(renewal) + 100*time.Millisecond)
	renewed, err := p.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reqs := rs.sts.Requests()
	if renewed.AccessKeyID == first.AccessKeyID || len(reqs) != 2 || reqs[1].Token != "token-2" {
		t.Errorf("within a minute of their expiry: keys %s then %s, STS asked %+v; want new keys for token-2", first.AccessKeyID, renewed.AccessKeyID, reqs)
	}
}

// TestARoleThatCannotBeAssumedSaysWhy: what STS refuses, and a token the
// pod lacks, fail the fetch for good with what to check; an issuer STS
// could not reach fails it for a retry.
func TestARoleThatCannotBeAssumedSaysWhy(t *testing.T) {
	rs := newRoleStore(t)
	rs.s3.put(t, "resnet", model(1))
	refusal := func(code, msg string) func(stsserver.Request) (stsserver.Credentials, error) {
		return func(stsserver.Request) (stsserver.Credentials, error) {
			return stsserver.Credentials{}, &stsserver.Refusal{Status: http.StatusBadRequest, Code: code, Message: msg}
		}
	}
	for _, tc := range []struct {
		name    string
		role    string
		assume  func(stsserver.Request) (stsserver.Credentials, error)
		token   string // the token file, "" for missing
		extra   map[string]string
		reason  string
		exit    int
		message []string
	}{
		{name: "a role the trust policy does not grant", role: "arn:aws:iam::123456789012:role/other", assume: rs.grant, token: "token-1",
			reason: servingv1alpha1.ReasonAccessDenied, exit: ExitPermanent,
			message: []string{"STS refused role arn:aws:iam::123456789012:role/other", "AccessDenied (Not authorized to perform sts:AssumeRoleWithWebIdentity)", "trust policy", "system:serviceaccount:"}},
		{name: "a token of another issuer", role: testRole, assume: refusal("InvalidIdentityToken", "No OpenIDConnect provider found in your account for https://issuer"), token: "token-1",
			reason: servingv1alpha1.ReasonAccessDenied, exit: ExitPermanent, message: []string{"InvalidIdentityToken (No OpenIDConnect provider found"}},
		{name: "an issuer STS did not reach", role: testRole, assume: refusal("IDPCommunicationError", "could not reach the issuer"), token: "token-1",
			reason: servingv1alpha1.ReasonFetchFailed, exit: ExitTransient, message: []string{"assuming role " + testRole + ": IDPCommunicationError"}},
		{name: "no token in the pod", role: testRole, assume: rs.grant,
			reason: servingv1alpha1.ReasonAccessDenied, exit: ExitPermanent, message: []string{"spec.model.webIdentity: the service account token " + rs.token + " cannot be read"}},
		{name: "keys beside the role", role: testRole, assume: rs.grant, token: "token-1",
			extra:  map[string]string{KeyAWSAccessKeyID: testAccessKey, KeyAWSSecretAccessKey: testSecretKey},
			reason: servingv1alpha1.ReasonAccessDenied, exit: ExitPermanent, message: []string{"must not hold AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY as well"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs.sts.Decide(tc.assume)
			_ = os.Remove(rs.token)
			if tc.token != "" {
				rs.writeToken(t, tc.token)
			}
			o := rs.options(t, "s3://models/resnet", tc.role, tc.extra)
			o.Retry.Attempts = 1
			_, err := Run(context.Background(), o)
			fe := wantFailure(t, err, tc.reason, tc.exit)
			for _, m := range tc.message {
				if !strings.Contains(fe.Message, m) {
					t.Errorf("message %q, want %q in it", fe.Message, m)
				}
			}
			if strings.Contains(fe.Message, testSecretKey) {
				t.Errorf("message %q shows the secret key", fe.Message)
			}
		})
	}
}

func awsConfigForTest() aws.Config {
	return aws.Config{Region: defaultAWSRegion, HTTPClient: &http.Client{}, Retryer: func() aws.Retryer { return aws.NopRetryer{} }}
}
