package main

import (
	"errors"
	"fmt"
	"net/http"
)

// code is a canonical error code. TF Serving shows these names to clients
// in three places: the "error_code" of a model version's status, the
// "status" label of its request counter and the "Failed to start server"
// line, so the double keeps them as they are spelled there.
type code int

const (
	codeOK code = iota
	codeCancelled
	codeUnknown
	codeInvalidArgument
	codeDeadlineExceeded
	codeNotFound
	codeAlreadyExists
	codePermissionDenied
	codeResourceExhausted
	codeFailedPrecondition
	codeAborted
	codeOutOfRange
	codeUnimplemented
	codeInternal
	codeUnavailable
	codeDataLoss
	codeUnauthenticated
)

var codeNames = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
	"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
	"INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
}

func (c code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("CODE_%d", int(c))
}

// httpStatus is the status the REST API answers an error with. A client
// tells "no such model or version" (404) from a bad request (400) by it,
// and FAILED_PRECONDITION is a 400, not a 412, in TF Serving.
func (c code) httpStatus() int {
	switch c {
	case codeOK:
		return http.StatusOK
	case codeCancelled:
		return 499 // nginx's "client closed request", which TF Serving uses
	case codeInvalidArgument, codeFailedPrecondition, codeOutOfRange:
		return http.StatusBadRequest
	case codeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case codeNotFound:
		return http.StatusNotFound
	case codeAlreadyExists, codeAborted:
		return http.StatusConflict
	case codePermissionDenied:
		return http.StatusForbidden
	case codeResourceExhausted:
		return http.StatusTooManyRequests
	case codeUnimplemented:
		return http.StatusNotImplemented
	case codeUnavailable:
		return http.StatusServiceUnavailable
	case codeUnauthenticated:
		return http.StatusUnauthorized
	default:
		return http.StatusInternalServerError
	}
}

// statusError is an error with a code.
type statusError struct {
	code code
	msg  string
}

func (e *statusError) Error() string { return e.code.String() + ": " + e.msg }

func errorf(c code, format string, args ...any) error {
	return &statusError{code: c, msg: fmt.Sprintf(format, args...)}
}

// codeOf is UNKNOWN for errors that carry no code.
func codeOf(err error) code {
	if err == nil {
		return codeOK
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.code
	}
	return codeUnknown
}

// messageOf is the error without its code: what TF Serving puts in JSON
// bodies and most log lines.
func messageOf(err error) string {
	if err == nil {
		return ""
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.msg
	}
	return err.Error()
}
