package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// RetryPolicy says how often and how patiently a failed operation (a
// listing, a file's download) is tried again: exponential backoff with
// jitter, a number of attempts per operation, and a budget of retries for
// the whole fetch so that a broken store fails the fetch early instead of
// every file exhausting its attempts.
type RetryPolicy struct {
	// Attempts per operation, the first included.
	Attempts int
	// Budget is the number of retries all operations may take together.
	Budget int
	// BaseDelay is the wait before the first retry; it doubles with each
	// further one, up to MaxDelay. Each wait is drawn between half and all
	// of that, so that parallel downloads do not retry in step.
	BaseDelay time.Duration
	MaxDelay  time.Duration
}

// DefaultRetryPolicy is the policy of `manager fetch`.
var DefaultRetryPolicy = RetryPolicy{Attempts: 6, Budget: 200, BaseDelay: 500 * time.Millisecond, MaxDelay: 30 * time.Second}

// retrier runs operations under a RetryPolicy.
type retrier struct {
	policy RetryPolicy
	budget atomic.Int64
	log    *slog.Logger
}

func newRetrier(p RetryPolicy, log *slog.Logger) *retrier {
	if p.Attempts < 1 {
		p.Attempts = 1
	}
	r := &retrier{policy: p, log: log}
	r.budget.Store(int64(p.Budget))
	return r
}

// do runs op until it succeeds, fails for good (a permanent error, the
// context's end), or runs out of attempts or budget. The error is op's
// last, classified.
func (r *retrier) do(ctx context.Context, what string, op func(ctx context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return classify(ctx.Err(), what)
		}
		fe := classify(err, what)
		if !retryable(fe) {
			return fe
		}
		if attempt >= r.policy.Attempts {
			return gaveUp(fe, fmt.Sprintf("gave up after %d attempts", attempt))
		}
		if r.budget.Add(-1) < 0 {
			r.log.Warn("retry budget exhausted", "file", what)
			return gaveUp(fe, "gave up: the fetch's retry budget is spent")
		}
		delay := r.delay(attempt)
		if asked := storeRetryAfter(err); asked > delay {
			// A store that throttles says when to come back: sooner
			// would only be refused again, and spend the attempts.
			delay = min(asked, maxRetryAfter)
		}
		r.log.Warn("retrying", "file", what, "attempt", attempt+1, "of", r.policy.Attempts, "in", delay.Round(time.Millisecond).String(), "error", fe.Error())
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return classify(ctx.Err(), what)
		case <-t.C:
		}
	}
}

// gaveUp notes on a transient error why it is final.
func gaveUp(fe *Error, why string) *Error {
	out := *fe
	out.Message += " (" + why + ")"
	return &out
}

// delay is the wait after the attempt-th failure.
func (r *retrier) delay(attempt int) time.Duration {
	d := r.policy.BaseDelay
	for i := 1; i < attempt && d < r.policy.MaxDelay; i++ {
		d *= 2
	}
	if r.policy.MaxDelay > 0 && d > r.policy.MaxDelay {
		d = r.policy.MaxDelay
	}
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// maxRetryAfter bounds the wait a store's Retry-After asks for: a store
// that asks for longer is tried again then, and the fetch's own timeout
// still ends it.
const maxRetryAfter = 2 * time.Minute

// storeRetryAfter is how long the store that answered err asked to be left
// alone (its Retry-After: a 429 or 503 of an http(s):// server, S3, Cloud
// Storage, Azure, a registry's blob range); 0 if it did not say.
func storeRetryAfter(err error) time.Duration {
	var se *statusError
	if errors.As(err, &se) {
		return se.retryAfter
	}
	var s3 *awshttp.ResponseError
	if errors.As(err, &s3) && s3.Response != nil && s3.Response.Response != nil {
		return retryAfter(s3.Response.Header, time.Now())
	}
	var az *azcore.ResponseError
	if errors.As(err, &az) && az.RawResponse != nil {
		return retryAfter(az.RawResponse.Header, time.Now())
	}
	return 0
}

// retryAfter reads a Retry-After header at now: seconds, or an HTTP date;
// 0 if absent, unreadable or past.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(24*time.Hour/time.Second))) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}
