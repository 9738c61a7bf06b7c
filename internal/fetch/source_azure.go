package fetch

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// Keys of the credentials Secret for an Azure Blob Storage model.
const (
	KeyAzureAccessKey     = "AZURE_STORAGE_ACCESS_KEY"
	KeyAzureSASToken      = "AZURE_STORAGE_SAS_TOKEN"
	KeyAzureTenantID      = "AZURE_TENANT_ID"
	KeyAzureClientID      = "AZURE_CLIENT_ID"
	KeyAzureClientSecret  = "AZURE_CLIENT_SECRET"
	KeyAzureAuthorityHost = "AZURE_AUTHORITY_HOST"
	KeyAzureBlobEndpoint  = "AZURE_STORAGE_BLOB_ENDPOINT"
	KeyAzureCABundle      = "AZURE_CA_BUNDLE"
)

// azureSource is an Azure Blob Storage container and a prefix in it, read
// with the container's client: a flat listing, a blob's properties, and
// downloads, whole or as ranges.
type azureSource struct {
	bucketPrefix
	client *container.Client
	// signIn is who signs in at Microsoft Entra ID, and what must hold
	// for it to be let in, for messages; zero when no one does.
	signIn signIn
}

// signIn names an identity that signs in at Microsoft Entra ID, and what
// a refusal should have its user check.
type signIn struct {
	who, check string
}

// newAzureSource opens a container with what the fetch was given: the
// credentials Secret's account key, its shared access signature, a
// service principal's secret, spec.model.webIdentity's federated
// token, or nothing for a public container. The environment, a managed
// identity and the Azure CLI's login are never looked for, so a fetch
// never acts with an identity it was not given.
func newAzureSource(loc storageuri.Location, creds Credentials, federated WebIdentity, transport http.RoundTripper, maxFiles int) (Source, error) {
	containerURL, err := azureContainerURL(loc, creds)
	if err != nil {
		return nil, err
	}
	opts := &container.ClientOptions{ClientOptions: azureClientOptions(transport)}
	auth, err := azureAuth(creds, federated)
	if err != nil {
		return nil, err
	}
	var client *container.Client
	switch {
	case auth.key != "":
		key, err := container.NewSharedKeyCredential(loc.Account, auth.key)
		if err != nil {
			return nil, permanentf(servingv1alpha1.ReasonAccessDenied, "credentials key %s is not an account key (base64)", KeyAzureAccessKey)
		}
		client, err = container.NewClientWithSharedKeyCredential(containerURL.String(), key, opts)
		if err != nil {
			return nil, classify(err, "")
		}
	case auth.token != nil:
		if containerURL.Scheme != "https" {
			// azcore would refuse too, at the first request and less clearly.
			return nil, permanentf(servingv1alpha1.ReasonInvalidURI, "credentials key %s is %s: a bearer token is only sent over https", KeyAzureBlobEndpoint, containerURL.Redacted())
		}
		tokens, err := auth.token(azureCloud(loc, creds), transport)
		if err != nil {
			return nil, err
		}
		if client, err = container.NewClient(containerURL.String(), tokens, opts); err != nil {
			return nil, classify(err, "")
		}
	default:
		if auth.sas != "" {
			containerURL.RawQuery = auth.sas
		}
		if client, err = container.NewClientWithNoCredential(containerURL.String(), opts); err != nil {
			return nil, classify(err, "")
		}
	}
	return &azureSource{bucketPrefix: newBucketPrefix(loc, maxFiles), client: client, signIn: auth.signIn}, nil
}

// azureCredentials are how a container is read: with an account key, a
// shared access signature, a token credential, or anonymously when all
// are empty.
type azureCredentials struct {
	key    string
	sas    string
	token  func(cloud.Configuration, http.RoundTripper) (azcore.TokenCredential, error)
	signIn signIn
}

// azureAuth picks the one identity the fetch was given. Two are refused:
// which the fetch acted as would depend on an order of precedence the
// user would have to know.
func azureAuth(creds Credentials, federated WebIdentity) (azureCredentials, error) {
	var given []string
	var auth azureCredentials
	if key := creds.Get(KeyAzureAccessKey); key != "" {
		given, auth.key = append(given, KeyAzureAccessKey), key
	}
	if sas := strings.TrimPrefix(creds.Get(KeyAzureSASToken), "?"); sas != "" {
		given, auth.sas = append(given, KeyAzureSASToken), sas
	}
	tenant, client := creds.Get(KeyAzureTenantID), creds.Get(KeyAzureClientID)
	if secret := creds.Get(KeyAzureClientSecret); secret != "" {
		if tenant == "" || client == "" {
			return auth, permanentf(servingv1alpha1.ReasonAccessDenied, "credentials key %s needs %s and %s beside it", KeyAzureClientSecret, KeyAzureTenantID, KeyAzureClientID)
		}
		given = append(given, KeyAzureClientSecret)
		auth.signIn = signIn{
			who:   fmt.Sprintf("service principal %s of tenant %s", client, tenant),
			check: fmt.Sprintf("check %s, %s and %s (a client secret expires)", KeyAzureTenantID, KeyAzureClientID, KeyAzureClientSecret),
		}
		auth.token = func(c cloud.Configuration, transport http.RoundTripper) (azcore.TokenCredential, error) {
			cred, err := azidentity.NewClientSecretCredential(tenant, client, secret, &azidentity.ClientSecretCredentialOptions{
				ClientOptions:            azureClientOptions(transport, c),
				DisableInstanceDiscovery: true,
			})
			if err != nil {
				return nil, permanentf(servingv1alpha1.ReasonAccessDenied, "the service principal of %s: %s", KeyAzureClientID, creds.Redact(err.Error()))
			}
			return cred, nil
		}
	}
	if federated.ClientID != "" {
		given = append(given, "spec.model.webIdentity")
		auth.signIn = signIn{
			who:   fmt.Sprintf("application %s of tenant %s with the pod's service account token", federated.ClientID, federated.TenantID),
			check: "the application's federated credential must name this cluster's service account issuer, the subject system:serviceaccount:<namespace>:<spec.podTemplate.serviceAccountName> and the token's audience",
		}
		auth.token = func(c cloud.Configuration, transport http.RoundTripper) (azcore.TokenCredential, error) {
			return workloadIdentity(federated, c, transport)
		}
	}
	if len(given) > 1 {
		return auth, permanentf(servingv1alpha1.ReasonAccessDenied, "the model is read with one identity, and it is given %s", strings.Join(given, " and "))
	}
	return auth, nil
}

// azureContainerURL is the container's URL: at the URI's account, or at
// the Secret's blob endpoint (an emulator's, Azure Stack's, a private
// one's) when it names one.
func azureContainerURL(loc storageuri.Location, creds Credentials) (*url.URL, error) {
	u := *loc.URL
	ep := creds.Get(KeyAzureBlobEndpoint)
	if ep == "" {
		return &u, nil
	}
	base, err := url.Parse(ep)
	if err != nil || base.Host == "" || (base.Scheme != "https" && base.Scheme != "http") || base.RawQuery != "" {
		return nil, permanentf(servingv1alpha1.ReasonInvalidURI, "credentials key %s is not an http(s) URL without a query", KeyAzureBlobEndpoint)
	}
	base.Path = strings.TrimSuffix(base.Path, "/") + "/" + loc.Bucket
	base.RawPath = ""
	return base, nil
}

// azureCloud is the Microsoft Entra authority a service principal signs in
// at: the Secret's, or that of the cloud the account's host is in.
func azureCloud(loc storageuri.Location, creds Credentials) cloud.Configuration {
	c := cloud.AzurePublic
	switch host := strings.ToLower(loc.URL.Host); {
	case strings.HasSuffix(host, ".chinacloudapi.cn"):
		c = cloud.AzureChina
	case strings.HasSuffix(host, ".usgovcloudapi.net"):
		c = cloud.AzureGovernment
	}
	if authority := creds.Get(KeyAzureAuthorityHost); authority != "" {
		c.ActiveDirectoryAuthorityHost = authority
	}
	return c
}

// azureClientOptions are the options of every Azure client of a fetch: the
// fetcher's transport, no retries of the SDK's (the fetcher retries with
// its own policy; the SDK's would multiply its attempts and hide failures),
// and the cloud when a credential signs in.
func azureClientOptions(transport http.RoundTripper, c ...cloud.Configuration) azcore.ClientOptions {
	o := azcore.ClientOptions{
		Transport: &http.Client{Transport: transport},
		Retry:     policy.RetryOptions{MaxRetries: -1},
	}
	if len(c) > 0 {
		o.Cloud = c[0]
	}
	return o
}

func (s *azureSource) List(ctx context.Context) (Listing, error) {
	keys := s.listing()
	opts := &container.ListBlobsFlatOptions{Include: container.ListBlobsInclude{Metadata: true}}
	if p := s.listPrefix(); p != "" {
		opts.Prefix = &p
	}
	var archived []string
	pager := s.client.NewListBlobsFlatPager(opts)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return Listing{}, s.classify(err, "")
		}
		for _, item := range page.Segment.BlobItems {
			if item.Name == nil || item.Properties == nil {
				continue
			}
			name := *item.Name
			if isAzureDirectory(item) {
				// A hierarchical namespace (Data Lake Storage) lists its
				// directories as empty blobs: kept as directories, as an
				// S3 folder marker is, not as files beside their contents.
				name += "/"
			}
			if deref(item.Properties.AccessTier) == container.AccessTierArchive {
				archived = append(archived, strings.TrimPrefix(name, s.listPrefix()))
			}
			if err := keys.add(name, deref(item.Properties.ContentLength), etagOf(item.Properties.ETag)); err != nil {
				return Listing{}, err
			}
		}
	}
	if len(archived) > 0 {
		// Refused now, not after the other blobs' download.
		count := fmt.Sprintf("%d blobs are", len(archived))
		if len(archived) == 1 {
			count = "1 blob is"
		}
		return Listing{}, permanentf(servingv1alpha1.ReasonFetchFailed, "%s: %s in the Archive tier, whose bytes cannot be read (%s); rehydrate them to the Hot or Cool tier", s.Describe(""), count, strings.Join(firstOf(archived, 3), ", "))
	}
	return keys.done(func() (int64, string, bool, error) {
		props, err := s.client.NewBlobClient(s.prefix).GetProperties(ctx, nil)
		switch {
		case err == nil:
			return deref(props.ContentLength), etagOf(props.ETag), true, nil
		case bloberror.HasCode(err, bloberror.BlobNotFound) || isAzureStatus(err, http.StatusNotFound) && !bloberror.HasCode(err, bloberror.ContainerNotFound):
			return 0, "", false, nil
		}
		return 0, "", false, s.classify(err, "")
	})
}

// isAzureDirectory tells a hierarchical namespace's directory from a blob:
// its hdi_isfolder metadata, or the resource type newer versions list.
func isAzureDirectory(item *container.BlobItem) bool {
	if item.Properties.ResourceType != nil && *item.Properties.ResourceType == "directory" {
		return true
	}
	for k, v := range item.Metadata {
		if strings.EqualFold(k, "hdi_isfolder") && v != nil && strings.EqualFold(*v, "true") {
			return true
		}
	}
	return false
}

func (s *azureSource) Open(ctx context.Context, rel string) (io.ReadCloser, objectInfo, error) {
	return s.download(ctx, rel, blob.HTTPRange{})
}

func (s *azureSource) OpenRange(ctx context.Context, rel string, offset, length int64) (io.ReadCloser, objectInfo, error) {
	return s.download(ctx, rel, blob.HTTPRange{Offset: offset, Count: length})
}

func (s *azureSource) download(ctx context.Context, rel string, r blob.HTTPRange) (io.ReadCloser, objectInfo, error) {
	resp, err := s.client.NewBlobClient(s.key(rel)).DownloadStream(ctx, &blob.DownloadStreamOptions{Range: r})
	if err != nil {
		return nil, objectInfo{}, s.classify(err, rel)
	}
	// A blob stored with a Content-Encoding is served as stored, but a
	// transport would decode it: neither its listed size nor its ranges
	// would be what arrives.
	if enc := deref(resp.ContentEncoding); enc != "" && enc != "identity" {
		_ = resp.Body.Close()
		return nil, objectInfo{}, permanentf(servingv1alpha1.ReasonFetchFailed, "%s is stored with Content-Encoding %s; store the model's files without an encoding", s.Describe(rel), enc)
	}
	info := objectInfo{Size: deref(resp.ContentLength), Version: etagOf(resp.ETag)}
	if r.Count > 0 {
		info.Size = -1
		// Content-Range: bytes first-last/size
		if _, size, ok := strings.Cut(deref(resp.ContentRange), "/"); ok {
			_, _ = fmt.Sscan(size, &info.Size)
		}
	}
	return resp.Body, info, nil
}

func (s *azureSource) Close() error { return nil }

// classify words an Azure error for the file rel ("" for the container):
// the service's error code first, then the status.
func (s *azureSource) classify(err error, rel string) *Error {
	what := s.Describe(rel)
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	var auth *azidentity.AuthenticationFailedError
	if errors.As(err, &auth) {
		return s.signIn.refused(auth, err)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return classify(err, what)
	}
	e := func(reason string, permanent bool, format string, args ...any) *Error {
		return &Error{Reason: reason, Message: what + ": " + fmt.Sprintf(format, args...), Permanent: permanent, Err: err}
	}
	switch bloberror.Code(re.ErrorCode) {
	case bloberror.ContainerNotFound:
		return e(servingv1alpha1.ReasonNotFound, true, "the container does not exist")
	case bloberror.BlobNotFound:
		return e(servingv1alpha1.ReasonNotFound, true, "the blob does not exist")
	case bloberror.ResourceNotFound:
		// Azure answers an anonymous read of a private container so.
		return e(servingv1alpha1.ReasonNotFound, true, "not found, or not public (ResourceNotFound); give credentials in the credentials Secret if the container is private")
	case bloberror.AuthenticationFailed, bloberror.InvalidAuthenticationInfo, bloberror.NoAuthenticationInformation:
		return e(servingv1alpha1.ReasonAccessDenied, true, "access denied: %s; check the credentials Secret (a key rotated, a SAS expired)", azureDetail(re))
	case bloberror.AuthorizationPermissionMismatch, bloberror.AuthorizationResourceTypeMismatch, bloberror.InsufficientAccountPermissions:
		return e(servingv1alpha1.ReasonAccessDenied, true, "access denied: %s; the identity must be allowed to list and read blobs (the Storage Blob Data Reader role, or a SAS with sp=rl)", azureDetail(re))
	case bloberror.AuthorizationFailure, bloberror.AuthorizationProtocolMismatch, bloberror.AuthorizationServiceMismatch,
		bloberror.AuthorizationSourceIPMismatch, bloberror.AccountIsDisabled, "PublicAccessNotPermitted":
		return e(servingv1alpha1.ReasonAccessDenied, true, "access denied: %s; the account's network rules and settings must let the cluster in, and the identity read blobs", azureDetail(re))
	case bloberror.ServerBusy, bloberror.InternalError, bloberror.OperationTimedOut:
		return e(servingv1alpha1.ReasonFetchFailed, false, "%s", re.ErrorCode)
	case bloberror.BlobArchived:
		return e(servingv1alpha1.ReasonFetchFailed, true, "the blob is in the Archive tier, whose bytes cannot be read (BlobArchived); rehydrate it to the Hot or Cool tier")
	case bloberror.ConditionNotMet:
		return e(servingv1alpha1.ReasonFetchFailed, false, "the blob changed during the download (%s); the next attempt lists it again", re.ErrorCode)
	}
	detail := fmt.Sprintf("HTTP %d %s", re.StatusCode, http.StatusText(re.StatusCode))
	if re.ErrorCode != "" {
		detail += " (" + re.ErrorCode + ")"
	}
	return byStatus(re.StatusCode, err, what+": ", detail)
}

// refused is the error of a sign-in Microsoft Entra ID refused, with its
// AADSTS error, whose first line says what is wrong (a wrong secret, an
// unknown client, a federated credential that does not match the
// token), and what to check. An answer of 5xx, or none, is transient.
func (si signIn) refused(auth *azidentity.AuthenticationFailedError, err error) *Error {
	status := 0
	detail := "no answer"
	if auth.RawResponse != nil {
		status = auth.RawResponse.StatusCode
		detail = fmt.Sprintf("HTTP %d", status)
		if code := entraErrorOf(auth); code != "" {
			detail += ": " + code
		}
	}
	if status < 400 || status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout {
		return &Error{Reason: servingv1alpha1.ReasonFetchFailed, Message: fmt.Sprintf("signing in at Microsoft Entra ID as %s: %s", si.who, detail), Err: err}
	}
	return &Error{Reason: servingv1alpha1.ReasonAccessDenied, Permanent: true, Err: err,
		Message: fmt.Sprintf("Microsoft Entra ID refused %s: %s; %s", si.who, detail, si.check)}
}

// azureDetail is an Azure error's code and the first line of its message,
// as the service wrote them ("AuthorizationFailure (This request is not
// authorized to perform this operation.)"); the code alone when it sent
// no body, as for a HEAD.
func azureDetail(re *azcore.ResponseError) string {
	if re.RawResponse == nil {
		return re.ErrorCode
	}
	body, err := runtime.Payload(re.RawResponse)
	if err != nil {
		return re.ErrorCode
	}
	var answer struct {
		Message string `xml:"Message"`
	}
	if xml.Unmarshal(body, &answer) != nil || strings.TrimSpace(answer.Message) == "" {
		return re.ErrorCode
	}
	return re.ErrorCode + " (" + strings.TrimSpace(firstLineOf(answer.Message)) + ")"
}

// entraErrorOf is the error code and the first line of the description
// of Entra's answer, as it wrote them in its JSON body.
func entraErrorOf(auth *azidentity.AuthenticationFailedError) string {
	body, err := runtime.Payload(auth.RawResponse)
	if err != nil {
		return ""
	}
	var answer struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(body, &answer) != nil || answer.Error == "" {
		return ""
	}
	if d := firstLineOf(answer.Description); d != "" {
		return answer.Error + " (" + strings.TrimSpace(d) + ")"
	}
	return answer.Error
}

// workloadIdentity signs in as w's application (Microsoft Entra Workload
// ID) with the service account token the kubelet projected for it, read
// again for each new access token: the kubelet renews it.
func workloadIdentity(w WebIdentity, c cloud.Configuration, transport http.RoundTripper) (azcore.TokenCredential, error) {
	assertion := func(context.Context) (string, error) { return tokenFile(w.TokenFile).token() }
	cred, err := azidentity.NewClientAssertionCredential(w.TenantID, w.ClientID, assertion, &azidentity.ClientAssertionCredentialOptions{
		ClientOptions:            azureClientOptions(transport, c),
		DisableInstanceDiscovery: true,
	})
	if err != nil {
		return nil, permanentf(servingv1alpha1.ReasonAccessDenied, "spec.model.webIdentity: %v", err)
	}
	return cred, nil
}

func isAzureStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}

// etagOf is an ETag as a version, "" when the store did not tell it.
func etagOf(e *azcore.ETag) string {
	if e == nil {
		return ""
	}
	return string(*e)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// firstOf is at most the first n of names, and "…" when there are more.
func firstOf(names []string, n int) []string {
	if len(names) <= n {
		return names
	}
	return append(slices.Clone(names[:n]), "…")
}
