package azblobserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// principal is who a request proved itself to be.
type principal struct {
	kind    string     // as Request.Auth
	sas     url.Values // the token, for "SAS"
	canRead bool       // for "Bearer"
}

type operation int

const (
	opRead operation = iota // Get Blob, Get Blob Properties
	opList                  // List Blobs
)

// authenticate tells who is asking, or refuses a request whose proof does
// not hold, before anything about the resource is looked at.
func (s *Server) authenticate(r *http.Request, q url.Values) (principal, *reply) {
	auth := r.Header.Get("Authorization")
	switch {
	case strings.HasPrefix(auth, "SharedKey "):
		return principal{kind: "SharedKey"}, s.checkSharedKey(r, strings.TrimPrefix(auth, "SharedKey "))
	case strings.HasPrefix(auth, "Bearer "):
		canRead, ok := s.bearer[strings.TrimPrefix(auth, "Bearer ")]
		if !ok {
			rep := fail(http.StatusUnauthorized, "InvalidAuthenticationInfo",
				"Server failed to authenticate the request. Please refer to the information in the www-authenticate header.",
				"AuthenticationErrorDetail", "Signature validation failed. Signature is invalid.")
			rep.header.Set("WWW-Authenticate", "Bearer authorization_uri=https://login.microsoftonline.com/"+s.Tenant+
				"/oauth2/authorize resource_id=https://storage.azure.com")
			return principal{kind: "Bearer"}, rep
		}
		return principal{kind: "Bearer", canRead: canRead}, nil
	case auth != "":
		return principal{kind: "Anonymous"}, fail(http.StatusBadRequest, "InvalidAuthenticationInfo",
			"Authentication information is not given in the correct format. Check the value of Authorization header.")
	case q.Has("sig"):
		return s.checkSAS(r, q)
	}
	return principal{kind: "Anonymous"}, nil
}

// authorize decides whether who may do op on c (nil when there is no such
// container). An anonymous caller learns nothing of what it may not read:
// a private container is as absent to it as a missing one.
func (s *Server) authorize(who principal, op operation, c *container) *reply {
	switch who.kind {
	case "Anonymous":
		if c == nil || c.public == "" || (op != opRead && c.public != "container") {
			return fail(http.StatusNotFound, "ResourceNotFound", "The specified resource does not exist.")
		}
	case "Bearer":
		if !who.canRead {
			return permissionMismatch()
		}
	case "SAS":
		permission := "r"
		if op == opList {
			permission = "l"
		}
		if !strings.Contains(who.sas.Get("sp"), permission) {
			return permissionMismatch()
		}
	}
	return nil
}

func permissionMismatch() *reply {
	return fail(http.StatusForbidden, "AuthorizationPermissionMismatch", "This request is not authorized to perform this operation using this permission.")
}

func authenticationFailed(detail string) *reply {
	return fail(http.StatusForbidden, "AuthenticationFailed",
		"Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.",
		"AuthenticationErrorDetail", detail)
}

// checkSharedKey verifies "<account>:<signature>", the HMAC-SHA256 of the
// string to sign under the account key.
func (s *Server) checkSharedKey(r *http.Request, credential string) *reply {
	account, signature, _ := strings.Cut(credential, ":")
	toSign := stringToSign(r, s.Account)
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(toSign))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if account != s.Account || !hmac.Equal([]byte(signature), []byte(want)) {
		return authenticationFailed(fmt.Sprintf("The MAC signature found in the HTTP request '%s' is not the same as any computed signature. Server used following string to sign: '%s'.", signature, toSign))
	}
	return nil
}

// stringToSign is the Blob service's Shared Key string to sign, as
// "Authorize with Shared Key" in the Azure Storage REST reference defines
// it for version 2009-09-19 and later.
func stringToSign(r *http.Request, account string) string {
	h := r.Header
	length := h.Get("Content-Length")
	if length == "0" {
		length = "" // since version 2015-02-21
	}
	var b strings.Builder
	for _, v := range []string{r.Method, h.Get("Content-Encoding"), h.Get("Content-Language"), length,
		h.Get("Content-MD5"), h.Get("Content-Type"), h.Get("Date"), h.Get("If-Modified-Since"), h.Get("If-Match"),
		h.Get("If-None-Match"), h.Get("If-Unmodified-Since"), h.Get("Range")} {
		b.WriteString(v + "\n")
	}

	// Canonicalized headers: the x-ms- ones, names lower-cased and sorted,
	// each value's runs of white space made one space.
	var names []string
	for name := range h {
		if n := strings.ToLower(name); strings.HasPrefix(n, "x-ms-") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		b.WriteString(n + ":" + strings.Join(strings.Fields(strings.Join(h.Values(n), ",")), " ") + "\n")
	}

	// Canonicalized resource: "/<account>", the path encoded exactly as in
	// the request URI, then each query parameter, lower-cased and sorted,
	// on its own line with its decoded values sorted and comma-joined.
	path, _, _ := strings.Cut(r.RequestURI, "?")
	if path == "" {
		path = "/"
	}
	b.WriteString("/" + account + path)
	params := map[string][]string{}
	for name, vs := range r.URL.Query() {
		n := strings.ToLower(name)
		params[n] = append(params[n], vs...)
	}
	for _, n := range slices.Sorted(maps.Keys(params)) {
		vs := params[n]
		slices.Sort(vs)
		b.WriteString("\n" + n + ":" + strings.Join(vs, ","))
	}
	return b.String()
}

// checkSAS finds the allowed token whose sig the request carries and
// refuses the request as Azure does when the rest of the token was changed,
// has expired, or asks for https.
func (s *Server) checkSAS(r *http.Request, q url.Values) (principal, *reply) {
	who := principal{kind: "SAS"}
	for _, t := range s.sas {
		if t.Get("sig") == q.Get("sig") && sameFields(t, q) {
			who.sas = t
		}
	}
	if who.sas == nil {
		// The signature covers the token's fields, so a token that was
		// altered is one whose signature does not match.
		return who, authenticationFailed("Signature did not match. String to sign used was " +
			strings.Join([]string{q.Get("sp"), q.Get("st"), q.Get("se"), "/blob/" + s.Account + strings.TrimPrefix(r.URL.Path, "/"+s.Account)}, "\n"))
	}
	if who.sas.Get("spr") == "https" && r.TLS == nil {
		return who, fail(http.StatusForbidden, "AuthorizationProtocolMismatch", "This request is not authorized to perform this operation using this protocol.")
	}
	now := time.Now().UTC()
	expiry, ok := sasTime(who.sas.Get("se"))
	if !ok {
		return who, authenticationFailed("se is mandatory. Cannot be empty")
	}
	if start, ok := sasTime(who.sas.Get("st")); ok && (now.Before(start) || now.After(expiry)) {
		return who, authenticationFailed(fmt.Sprintf("Signature not valid in the specified time frame: Start [%s] - Expiry [%s] - Current [%s]",
			start.Format(http.TimeFormat), expiry.Format(http.TimeFormat), now.Format(http.TimeFormat)))
	}
	if now.After(expiry) {
		return who, authenticationFailed(fmt.Sprintf("Signed expiry time [%s] must be after signed start time [%s]",
			expiry.Format(http.TimeFormat), now.Format(http.TimeFormat)))
	}
	return who, nil
}

func sameFields(token, q url.Values) bool {
	for name, vs := range token {
		if !slices.Equal(vs, q[name]) {
			return false
		}
	}
	return true
}

// sasTime reads st or se, which Azure takes in ISO 8601 with or without
// seconds or time of day, in UTC.
func sasTime(v string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04Z", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
