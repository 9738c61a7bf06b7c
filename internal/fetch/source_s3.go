package fetch

import (
	"context"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob/s3blob"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// defaultAWSRegion is the region when the Secret names none.
const defaultAWSRegion = "us-east-1"

// newS3Source opens an S3 bucket, or an S3-compatible store's, with a
// client built only from what the fetch was given: the credentials
// Secret's static keys, the role of spec.model.webIdentity assumed with
// the service account token projected for it (or the role of the
// account's EKS Pod Identity association, from the node's agent), or
// anonymous access when neither is. Nothing is read from the environment
// or an instance's metadata, so a fetch never uses credentials it was not
// given.
func newS3Source(ctx context.Context, loc storageuri.Location, creds Credentials, role WebIdentity, transport http.RoundTripper, maxFiles int) (Source, error) {
	id, secret := creds.Get(KeyAWSAccessKeyID), creds.Get(KeyAWSSecretAccessKey)
	var provider aws.CredentialsProvider = aws.AnonymousCredentials{}
	switch {
	case role.RoleARN != "" && (id != "" || secret != ""):
		return nil, permanentf(servingv1alpha1.ReasonAccessDenied, "spec.model.webIdentity assumes role %s: the credentials Secret must not hold %s or %s as well", role.RoleARN, KeyAWSAccessKeyID, KeyAWSSecretAccessKey)
	case role.EKSPodIdentity && (id != "" || secret != ""):
		return nil, permanentf(servingv1alpha1.ReasonAccessDenied, "spec.model.webIdentity takes the role of the service account's EKS Pod Identity association: the credentials Secret must not hold %s or %s as well", KeyAWSAccessKeyID, KeyAWSSecretAccessKey)
	case id != "" && secret != "":
		provider = credentials.NewStaticCredentialsProvider(id, secret, creds.Get(KeyAWSSessionToken))
	case id != "" || secret != "":
		return nil, permanentf(servingv1alpha1.ReasonAccessDenied, "the credentials Secret must hold both %s and %s, or neither for anonymous access", KeyAWSAccessKeyID, KeyAWSSecretAccessKey)
	}
	region := creds.Get(KeyAWSRegion)
	if region == "" {
		region = defaultAWSRegion
	}
	cfg := aws.Config{
		Region:      region,
		Credentials: provider,
		HTTPClient:  &http.Client{Transport: transport},
		// The fetcher retries with its own policy; the SDK's retries (and
		// its retry quota) would multiply attempts and hide failures.
		Retryer: func() aws.Retryer { return aws.NopRetryer{} },
	}
	switch {
	case role.EKSPodIdentity:
		cfg.Credentials = podIdentityCredentials(role, creds.Get(KeyAWSContainerCredentialsURI), &http.Client{Transport: transport})
	case role.RoleARN != "":
		cfg.Credentials = roleCredentials(cfg, role, creds.Get(KeyAWSEndpointURLSTS))
	}
	endpoint := creds.Get(KeyAWSEndpointURL)
	pathStyle := strings.EqualFold(creds.Get(KeyAWSForcePathStyle), "true")
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = pathStyle
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	bucket, err := s3blob.OpenBucket(ctx, client, loc.Bucket, nil)
	if err != nil {
		return nil, classify(err, "s3://"+loc.Bucket)
	}
	return &blobSource{bucketPrefix: newBucketPrefix(loc, maxFiles), bucket: bucket}, nil
}
