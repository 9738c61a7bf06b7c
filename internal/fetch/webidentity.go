package fetch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// WebIdentity is an identity a fetch takes on with a service account
// token (spec.model.webIdentity), instead of keys: an IAM role for s3://,
// a Workload Identity Federation provider for gs:// (federation.go).
type WebIdentity struct {
	// RoleARN is the role; "" for none.
	RoleARN string
	// Provider is the federation provider, projects/<number>/locations/
	// global/workloadIdentityPools/<pool>/providers/<provider>; "" for
	// none. ServiceAccount is the Google service account it impersonates,
	// "" to read as itself (or, with GKEWorkloadIdentity, the one the
	// metadata server impersonates).
	Provider, ServiceAccount string
	// EKSPodIdentity takes the role the pods' service account is
	// associated with (EKS Pod Identity) from the node's agent.
	EKSPodIdentity bool
	// GKEWorkloadIdentity reads a gs:// model with the tokens of the
	// node's GKE metadata server, which must answer as ServiceAccount
	// ("": as no Google service account).
	GKEWorkloadIdentity bool
	// ClientID is the Microsoft Entra application (or user-assigned
	// managed identity) an Azure model's fetch signs in as, in tenant
	// TenantID; "" for none.
	ClientID, TenantID string
	// TokenFile is the token, projected by the kubelet, which renews it:
	// it is read again for each new credential.
	TokenFile string
	// SessionName names the STS session in the store's audit log.
	SessionName string
}

// KeyAWSEndpointURLSTS is the credentials Secret's key for another STS
// endpoint than the region's (an S3-compatible store's own, as MinIO's).
const KeyAWSEndpointURLSTS = "AWS_ENDPOINT_URL_STS"

// webIdentityExpiryWindow renews the role's credentials this long before
// they expire, so that no request is signed with ones about to.
const webIdentityExpiryWindow = time.Minute

// roleCredentials assumes w's role through the STS of cfg's region, or of
// endpoint, and keeps its credentials until shortly before they expire.
func roleCredentials(cfg aws.Config, w WebIdentity, endpoint string) aws.CredentialsProvider {
	// AssumeRoleWithWebIdentity is signed by its token, not by keys.
	cfg.Credentials = nil
	client := sts.NewFromConfig(cfg, func(o *sts.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	p := stscreds.NewWebIdentityRoleProvider(client, w.RoleARN, tokenFile(w.TokenFile), func(o *stscreds.WebIdentityRoleOptions) {
		o.RoleSessionName = cmp.Or(w.SessionName, "modelserver-fetch")
	})
	return aws.NewCredentialsCache(explained{p, assumeRoleRefused(w.RoleARN)}, func(o *aws.CredentialsCacheOptions) {
		o.ExpiryWindow = webIdentityExpiryWindow
	})
}

// tokenFile is the projected token, read at each assumption: the kubelet
// replaces it before it expires.
type tokenFile string

func (f tokenFile) GetIdentityToken() ([]byte, error) {
	b, err := os.ReadFile(string(f))
	if err != nil {
		return nil, permanentf(servingv1alpha1.ReasonAccessDenied, "spec.model.webIdentity: the service account token %s cannot be read: %v", f, unwrapPathError(err))
	}
	return b, nil
}

// token is the projected token as a string, without the white space a
// file may end with: what a client sends in a header or a form.
func (f tokenFile) token() (string, error) {
	b, err := f.GetIdentityToken()
	return strings.TrimSpace(string(b)), err
}

// explained is a credentials provider whose failures explain words in the
// fetch's terms: an *Error the provider met (a token that cannot be read)
// is passed on as it is.
type explained struct {
	aws.CredentialsProvider
	// explain is given the failure, and the service's refusal in it, nil
	// when the service did not answer.
	explain func(err error, refusal smithy.APIError) error
}

func (p explained) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := p.CredentialsProvider.Retrieve(ctx)
	if err == nil {
		return c, nil
	}
	var fe *Error
	if errors.As(err, &fe) {
		return c, fe
	}
	var ae smithy.APIError
	_ = errors.As(err, &ae) // left nil when the service did not answer
	return c, p.explain(err, ae)
}

// assumeRoleRefused says why role arn could not be assumed: what STS
// refused is the role's trust policy or the token, which a retry does not
// change.
func assumeRoleRefused(arn string) func(error, smithy.APIError) error {
	return func(err error, ae smithy.APIError) error {
		if ae == nil {
			return err // a network error: the fetch's retries take it
		}
		detail := ae.ErrorCode()
		if m := ae.ErrorMessage(); m != "" {
			detail += " (" + m + ")"
		}
		switch ae.ErrorCode() {
		case "IDPCommunicationError", "ExpiredTokenException", "Throttling", "ServiceUnavailable", "InternalFailure":
			// The issuer's keys were not reached, or the token ran out
			// between its renewal and its use: another try may do.
			return &Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: fmt.Sprintf("assuming role %s: %s", arn, detail), Err: err}
		}
		return permanentf(servingv1alpha1.ReasonAccessDenied,
			"STS refused role %s for the pod's service account token: %s; the role's trust policy must accept this cluster's service account issuer, the token's audience and the subject system:serviceaccount:<namespace>:<spec.podTemplate.serviceAccountName>", arn, detail)
	}
}
