package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"gocloud.dev/gcerrors"
	"golang.org/x/oauth2"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/fetchcontract"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// Exit codes of `manager fetch`.
const (
	// ExitPermanent is the exit code for a failure that retrying cannot
	// fix: the fetch Job's podFailurePolicy, rendered from the values,
	// fails the Job at once on it.
	ExitPermanent = fetchcontract.PermanentFailureExitCode
	// ExitTransient is the exit code for a failure worth another try.
	ExitTransient = 1
)

// Error is a failed fetch: a reason, a one-line message for the user, and
// whether another try could succeed. Messages never hold credentials.
type Error struct {
	// Reason is one of the fetch failure reasons of api/v1alpha1
	// (servingv1alpha1.ReasonNotFound, ...): the first word of the
	// termination message, which the operator copies into the
	// ModelServer's status as a condition reason.
	Reason    string
	Message   string
	Permanent bool
	// Relist says that the listing the fetch works from is stale: another
	// attempt of the same request gets the same answer, and only a new
	// fetch, which lists again, can succeed. It is still transient.
	Relist bool
	// Err is the underlying error, for errors.Is/As; it is not shown.
	Err error
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

func (e *Error) Unwrap() error { return e.Err }

// ExitCode is the process exit code for err: 0 for nil, ExitPermanent for a
// permanent failure, ExitTransient for any other.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	if AsError(err).Permanent {
		return ExitPermanent
	}
	return ExitTransient
}

// AsError returns err as an *Error, classifying errors that are not one
// yet (a plain error is a transient FetchFailed).
func AsError(err error) *Error {
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	return classify(err, "")
}

func permanentf(reason string, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...), Permanent: true}
}

func transientf(reason string, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// retryable tells whether an operation that failed with err is worth
// another attempt.
func retryable(err error) bool {
	var fe *Error
	if errors.As(err, &fe) {
		return !fe.Permanent && !fe.Relist && fe.Reason != servingv1alpha1.ReasonTimeout
	}
	return true
}

// classify maps an error from a storage SDK, an HTTP exchange or the file
// system to an *Error. what names the object concerned (a redacted URI or
// a path), and prefixes the message.
func classify(err error, what string) *Error {
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	// A transport error quotes its request's URL, whose query may carry a
	// signature: a signed URL's, a SAS (the Secret's, re-encoded by a
	// client, so that Redact would not find it).
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = storageuri.Redact(ue.URL)
	}
	prefix := ""
	if what != "" {
		prefix = what + ": "
	}
	e := func(reason string, permanent bool, format string, args ...any) *Error {
		return &Error{Reason: reason, Message: prefix + fmt.Sprintf(format, args...), Permanent: permanent, Err: err}
	}

	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return e(servingv1alpha1.ReasonTimeout, false, "the fetch did not finish within its time limit")
	case errors.Is(err, context.Canceled):
		return e(servingv1alpha1.ReasonFetchFailed, false, "interrupted")
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return e(servingv1alpha1.ReasonTooLarge, true, "the model does not fit on the model volume (no space left); raise spec.storage.size")
	case errors.Is(err, syscall.EROFS):
		return e(servingv1alpha1.ReasonFetchFailed, true, "the destination is on a read-only file system")
	}

	// S3 (aws-sdk-go-v2): the service's error code first, then the status.
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		detail := code
		if m := ae.ErrorMessage(); m != "" && m != code {
			detail += " (" + m + ")"
		}
		switch code {
		case "NoSuchBucket", "NoSuchKey", "NotFound":
			return e(servingv1alpha1.ReasonNotFound, true, "%s", detail)
		case "AccessDenied", "Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch",
			"ExpiredToken", "InvalidToken", "TokenRefreshRequired", "AllAccessDisabled",
			"AccountProblem", "InvalidSecurity":
			return e(servingv1alpha1.ReasonAccessDenied, true, "access denied: %s; check the keys in the credentials Secret", detail)
		case "SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "RequestTimeTooSkewed", "Throttling":
			return e(servingv1alpha1.ReasonFetchFailed, false, "%s", detail)
		case "InvalidObjectState":
			// GetObject of an object in S3 Glacier Flexible Retrieval or
			// Deep Archive, not restored.
			return e(servingv1alpha1.ReasonFetchFailed, true, "%s: the object is archived (S3 Glacier Flexible Retrieval or Deep Archive); restore it, or copy it to a storage class read at once", detail)
		case "PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException":
			return e(servingv1alpha1.ReasonFetchFailed, true, "%s; set AWS_REGION (or AWS_ENDPOINT_URL) in the credentials Secret to the bucket's", detail)
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return byStatus(re.HTTPStatusCode(), err, prefix, fmt.Sprintf("HTTP %d %s", re.HTTPStatusCode(), http.StatusText(re.HTTPStatusCode())))
	}

	// Plain HTTP: the http(s):// source, Cloud Storage.
	var se *statusError
	if errors.As(err, &se) {
		return byStatus(se.code, err, prefix, se.Error())
	}

	// The local file system (a directory source).
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return e(servingv1alpha1.ReasonNotFound, true, "no such file or directory")
	case errors.Is(err, fs.ErrPermission):
		return e(servingv1alpha1.ReasonAccessDenied, true, "permission denied")
	}

	// A refused service account key (GCS): the token endpoint said no.
	var te *oauth2.RetrieveError
	if errors.As(err, &te) {
		status := 0
		if te.Response != nil {
			status = te.Response.StatusCode
		}
		if status == http.StatusBadRequest || status == http.StatusUnauthorized || status == http.StatusForbidden {
			detail := te.ErrorCode
			if detail == "" {
				detail = fmt.Sprintf("HTTP %d", status)
			}
			return e(servingv1alpha1.ReasonAccessDenied, true, "the service account key was refused (%s); check credentials key %s", detail, KeyGCSServiceAccount)
		}
		return e(servingv1alpha1.ReasonFetchFailed, status < 500 && status != 0 && status != http.StatusTooManyRequests, "getting an access token: HTTP %d %s", status, te.ErrorCode)
	}

	// A TLS setup that retrying cannot fix.
	if untrustedCertificate(err) {
		return e(servingv1alpha1.ReasonFetchFailed, true, "TLS certificate not trusted (%s); set AWS_CA_BUNDLE in the credentials Secret", firstLineOf(err.Error()))
	}

	// gocloud's portable codes, for what the checks above did not name.
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return e(servingv1alpha1.ReasonNotFound, true, "%s", firstLineOf(err.Error()))
	case gcerrors.PermissionDenied:
		return e(servingv1alpha1.ReasonAccessDenied, true, "%s", firstLineOf(err.Error()))
	}

	// Networks fail and recover: resets, refusals, truncated bodies, timeouts.
	var ne net.Error
	switch {
	case errors.As(err, &ne), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return e(servingv1alpha1.ReasonFetchFailed, false, "network error: %s", firstLineOf(err.Error()))
	}
	return e(servingv1alpha1.ReasonFetchFailed, false, "%s", firstLineOf(err.Error()))
}

// untrustedCertificate tells a server certificate the client does not
// trust (an unknown issuer, another name): a setup retrying cannot fix.
func untrustedCertificate(err error) bool {
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var cv *tls.CertificateVerificationError
	return errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &cv)
}

// byStatus maps an HTTP status to a reason: 404 and 410 are NotFound, 401
// and 403 AccessDenied, 408, 429 and 5xx worth a retry, other statuses
// permanent.
func byStatus(code int, err error, prefix, detail string) *Error {
	e := func(reason string, permanent bool, msg string) *Error {
		return &Error{Reason: reason, Message: prefix + msg, Permanent: permanent, Err: err}
	}
	switch {
	case code == http.StatusNotFound || code == http.StatusGone:
		return e(servingv1alpha1.ReasonNotFound, true, detail)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return e(servingv1alpha1.ReasonAccessDenied, true, "access denied ("+detail+"); check the credentials Secret")
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return e(servingv1alpha1.ReasonFetchFailed, false, detail)
	case code >= 400:
		return e(servingv1alpha1.ReasonFetchFailed, true, detail)
	}
	return e(servingv1alpha1.ReasonFetchFailed, false, detail)
}

// statusError is an unexpected HTTP status from the http(s):// source,
// Cloud Storage or a registry's blob range, with the wait its
// Retry-After header asked for, if any.
type statusError struct {
	code       int
	status     string
	retryAfter time.Duration
}

// newStatusError is resp's status as an error.
func newStatusError(resp *http.Response) *statusError {
	return &statusError{code: resp.StatusCode, status: resp.Status, retryAfter: retryAfter(resp.Header, time.Now())}
}

func (e *statusError) Error() string { return "HTTP " + e.status }

// firstLineOf keeps an error's or a message's first line: what follows is
// a stack or a dump, not for a one-line status.
func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
