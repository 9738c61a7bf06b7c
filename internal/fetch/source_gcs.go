package fetch

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/option"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// newGCSSource opens a Cloud Storage bucket with the service account key
// of the credentials Secret, or anonymously (public buckets) when it has
// none. Application default credentials are never looked for.
func newGCSSource(ctx context.Context, loc storageuri.Location, creds Credentials, transport http.RoundTripper, maxFiles int) (Source, error) {
	var client *gcp.HTTPClient
	if key := creds.values[KeyGCSServiceAccount]; strings.TrimSpace(key) != "" {
		// Tokens are fetched through the same transport (proxy, trust).
		tokenCtx := context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Transport: transport})
		c, err := google.CredentialsFromJSONWithType(tokenCtx, []byte(key), google.ServiceAccount, storage.ScopeReadOnly)
		if err != nil {
			return nil, permanentf(servingv1alpha1.ReasonAccessDenied, "credentials key %s is not a service account key: %s", KeyGCSServiceAccount, creds.Redact(err.Error()))
		}
		if client, err = gcp.NewHTTPClient(transport, c.TokenSource); err != nil {
			return nil, permanentf(servingv1alpha1.ReasonAccessDenied, "credentials key %s: %s", KeyGCSServiceAccount, creds.Redact(err.Error()))
		}
	} else {
		client = gcp.NewAnonymousHTTPClient(transport)
	}
	// The client above authenticates: the storage library must not look
	// for credentials of its own (that would probe a metadata server).
	opts := &gcsblob.Options{ClientOptions: []option.ClientOption{option.WithoutAuthentication()}}
	if ep := creds.Get(KeyGCSEndpointURL); ep != "" {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" {
			return nil, permanentf(servingv1alpha1.ReasonInvalidURI, "credentials key %s is not a URL", KeyGCSEndpointURL)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/storage/v1/"
		}
		opts.ClientOptions = append(opts.ClientOptions, option.WithEndpoint(u.String()))
	}
	bucket, err := gcsblob.OpenBucket(ctx, client, loc.Bucket, opts)
	if err != nil {
		return nil, classify(err, "gs://"+loc.Bucket)
	}
	// The fetcher retries with its own policy; the library's retries would
	// multiply attempts.
	var sc *storage.Client
	if bucket.As(&sc) {
		sc.SetRetry(storage.WithPolicy(storage.RetryNever))
	}
	return &blobSource{bucket: bucket, scheme: storageuri.SchemeGCS, name: loc.Bucket, prefix: loc.Prefix, maxFiles: maxFiles}, nil
}
