package fetch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// podIdentityAgent plays the EKS Pod Identity Agent: for the token in
// its Authorization header it gives temporary keys, which rs's store
// takes, while answer says 0; another status refuses, in the agent's
// JSON.
func podIdentityAgent(t *testing.T, rs *roleStore, answer *atomic.Int32) *httptest.Server {
	t.Helper()
	var issued atomic.Int32
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if status := int(answer.Load()); status != 0 {
			w.WriteHeader(status)
			_, _ = fmt.Fprintf(w, `{"code":"AccessDeniedException","message":"No association for service account model-reader"}`)
			return
		}
		if r.URL.Path != "/v1/credentials" || r.Header.Get("Authorization") != "token-1" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"code":"InvalidTokenException","message":"the service account token is not valid"}`)
			return
		}
		n := issued.Add(1)
		id, secret, session := fmt.Sprintf("ASIAPOD%d", n), fmt.Sprintf("pod-secret-%d", n), fmt.Sprintf("pod-session-%d", n)
		rs.s3.grant(id, secret, session)
		_ = json.NewEncoder(w).Encode(map[string]string{
			"AccessKeyId": id, "SecretAccessKey": secret, "Token": session, "AccountId": "123456789012",
			"Expiration": time.Now().Add(6 * time.Hour).UTC().Format(time.RFC3339),
		})
	}))
	t.Cleanup(agent.Close)
	return agent
}

// TestTheRoleOfAPodIdentityAssociationReadsTheModel: with eksPodIdentity
// the fetch asks the agent for the role's keys with the projected token
// and reads the store with them; what the agent refuses fails the fetch
// for good, saying what to set up; a busy agent fails it for a retry.
func TestTheRoleOfAPodIdentityAssociationReadsTheModel(t *testing.T) {
	rs := newRoleStore(t)
	files := model(1)
	rs.s3.put(t, "resnet", files)
	var answer atomic.Int32
	agent := podIdentityAgent(t, rs, &answer)
	options := func(t *testing.T, extra map[string]string) Options {
		values := map[string]string{KeyAWSEndpointURL: rs.s3.URL, KeyAWSForcePathStyle: "true", KeyAWSContainerCredentialsURI: agent.URL + "/v1/credentials"}
		for k, v := range extra {
			values[k] = v
		}
		o, _ := testOptions(t, "s3://models/resnet", secretDir(t, values))
		o.WebIdentity = WebIdentity{EKSPodIdentity: true, TokenFile: rs.token}
		return o
	}

	o := options(t, nil)
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	assertTree(t, o.Dest, files)
	if rs.s3.anonymous != 0 {
		t.Errorf("%d anonymous requests to the store", rs.s3.anonymous)
	}

	t.Run("no association", func(t *testing.T) {
		answer.Store(http.StatusForbidden)
		t.Cleanup(func() { answer.Store(0) })
		_, err := Run(context.Background(), options(t, nil))
		fe := wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent)
		for _, want := range []string{"the EKS Pod Identity Agent refused the pod's service account token: HTTP 403 AccessDeniedException: No association for service account model-reader", "needs a pod identity association"} {
			if !strings.Contains(fe.Message, want) {
				t.Errorf("message %q lacks %q", fe.Message, want)
			}
		}
	})
	t.Run("a busy agent", func(t *testing.T) {
		answer.Store(http.StatusServiceUnavailable)
		t.Cleanup(func() { answer.Store(0) })
		o := options(t, nil)
		o.Retry.Attempts = 1
		_, err := Run(context.Background(), o)
		wantFailure(t, err, servingv1alpha1.ReasonFetchFailed, ExitTransient)
	})
	t.Run("another token", func(t *testing.T) {
		o := options(t, nil)
		o.WebIdentity.TokenFile = filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(o.WebIdentity.TokenFile, []byte("token-of-another-account"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Run(context.Background(), o)
		if fe := wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent); !strings.Contains(fe.Message, "InvalidTokenException") {
			t.Errorf("message %q", fe.Message)
		}
	})
	t.Run("keys beside it", func(t *testing.T) {
		_, err := Run(context.Background(), options(t, map[string]string{KeyAWSAccessKeyID: "AKIA", KeyAWSSecretAccessKey: "secret"}))
		if fe := wantFailure(t, err, servingv1alpha1.ReasonAccessDenied, ExitPermanent); !strings.Contains(fe.Message, "EKS Pod Identity association: the credentials Secret must not hold") {
			t.Errorf("message %q", fe.Message)
		}
	})
}
