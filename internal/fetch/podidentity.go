package fetch

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/smithy-go"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// KeyAWSContainerCredentialsURI is the credentials Secret's key for
// another EKS Pod Identity Agent than the node's.
const KeyAWSContainerCredentialsURI = "AWS_CONTAINER_CREDENTIALS_FULL_URI"

// eksPodIdentityAgent is where the EKS Pod Identity Agent answers on every
// node of an EKS cluster: a link-local address on the node's network.
const eksPodIdentityAgent = "http://169.254.170.23/v1/credentials"

// podIdentityCredentials are the credentials of the role the pods'
// service account is associated with (EKS Pod Identity), which the agent
// at endpoint (the node's when "") gives for the service account token
// the kubelet projected for it, read again at each renewal.
func podIdentityCredentials(w WebIdentity, endpoint string, client *http.Client) aws.CredentialsProvider {
	agent := cmp.Or(endpoint, eksPodIdentityAgent)
	p := endpointcreds.New(agent, func(o *endpointcreds.Options) {
		o.HTTPClient = client
		o.Retryer = aws.NopRetryer{}
		o.AuthorizationTokenProvider = endpointcreds.TokenProviderFunc(tokenFile(w.TokenFile).token)
	})
	return aws.NewCredentialsCache(explained{p, agentRefused(agent)}, func(o *aws.CredentialsCacheOptions) {
		o.ExpiryWindow = webIdentityExpiryWindow
	})
}

// agentRefused says why the agent at agent gave no credentials: a refusal
// is the cluster's setup (no association for the service account, a
// token it does not accept), which a retry does not change; a busy or
// unreachable agent may answer the next attempt.
func agentRefused(agent string) func(error, smithy.APIError) error {
	return func(err error, ae smithy.APIError) error {
		var hs interface{ HTTPStatusCode() int }
		if ae == nil || !errors.As(err, &hs) {
			return &Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: fmt.Sprintf("asking the EKS Pod Identity Agent at %s for credentials: %v", agent, err), Err: err}
		}
		status := hs.HTTPStatusCode()
		detail := fmt.Sprintf("HTTP %d", status)
		if code := ae.ErrorCode(); code != "" {
			detail += " " + code
		}
		if m := ae.ErrorMessage(); m != "" {
			detail += ": " + firstLineOf(m)
		}
		if status == http.StatusTooManyRequests || status >= 500 {
			return &Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: "the EKS Pod Identity Agent gave no credentials: " + detail, Err: err}
		}
		return permanentf(servingv1alpha1.ReasonAccessDenied,
			"the EKS Pod Identity Agent refused the pod's service account token: %s; the service account spec.podTemplate.serviceAccountName needs a pod identity association with the role, in this cluster and namespace", detail)
	}
}
