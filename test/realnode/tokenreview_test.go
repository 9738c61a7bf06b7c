package realnode

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// tokenReviewer has the apiserver review the service account tokens a
// cloud's stand-in is given, for the cloud's audience, as the cloud does
// with the cluster issuer's keys, and keeps the users of those it
// authenticated.
type tokenReviewer struct {
	e        *env
	audience string
	mu       sync.Mutex
	users    []authenticationv1.UserInfo
}

func (e *env) tokenReviewer(audience string) *tokenReviewer {
	return &tokenReviewer{e: e, audience: audience}
}

// review is the user token authenticates as; refused is the apiserver's
// reason when it does not, err when the apiserver could not be asked.
func (r *tokenReviewer) review(ctx context.Context, token string) (user authenticationv1.UserInfo, refused string, err error) {
	review, err := r.e.cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{r.audience}}}, metav1.CreateOptions{})
	if err != nil {
		return user, "", err
	}
	if !review.Status.Authenticated {
		return user, review.Status.Error, nil
	}
	r.mu.Lock()
	r.users = append(r.users, review.Status.User)
	r.mu.Unlock()
	return review.Status.User, "", nil
}

// wantOneBoundTo checks that one token was authenticated so far, bound
// to a pod whose name begins with pod.
func (r *tokenReviewer) wantOneBoundTo(t *testing.T, pod string) {
	t.Helper()
	r.mu.Lock()
	seen := slices.Clone(r.users)
	r.mu.Unlock()
	if len(seen) != 1 || !strings.HasPrefix(strings.Join(seen[0].Extra["authentication.kubernetes.io/pod-name"], ","), pod) {
		t.Errorf("the tokens reviewed: %+v; want one, bound to the pod %s…", seen, pod)
	}
}
