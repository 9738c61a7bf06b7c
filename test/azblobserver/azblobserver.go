// Package azblobserver is a stand-in for Azure Blob Storage and for the
// Microsoft Entra ID token endpoint in front of it: the services the
// fetcher reads a model from when spec.model.storageUri is an Azure blob
// URL. No real Azure is reachable from a test, so the stand-in answers the
// reads the fetcher makes through the official azblob SDK (List Blobs, Get
// Blob, Get Blob Properties) as the REST API documents them, with Azure's
// status codes, x-ms-error-code headers and XML error bodies, and it checks
// each way in: a Shared Key signature, a SAS token, a bearer token, or none
// at all on a public container.
//
// Blobs are addressed path-style as the Azurite emulator does: the service
// endpoint is <scheme>://<host:port>/<account>, so that one listener on
// 127.0.0.1 serves what Azure serves at <account>.blob.core.windows.net.
package azblobserver

import (
	"bytes"
	"crypto/md5" //nolint:gosec // Azure's Content-MD5 is MD5, not a security choice.
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Request is a call as the server received it, and how it answered.
type Request struct {
	Method          string
	Container, Blob string
	// Auth is how the caller proved who it is: "SharedKey", "SAS",
	// "Bearer" or "Anonymous".
	Auth string
	// Range is the x-ms-range header, or Range when that is absent.
	Range  string
	Status int
}

// Server is one storage account, held in memory.
type Server struct {
	// URL is the service endpoint, <scheme>://<host:port>/<account>: a
	// container's URL is URL/<container>.
	URL     string
	Account string
	// Key is the account key, base64, as azblob.NewSharedKeyCredential
	// takes it.
	Key string
	// Tenant is the Entra tenant the account belongs to, named in the
	// challenge a refused bearer token gets.
	Tenant string
	// CAPEM is the certificate of the CA that signed the server's; nil
	// over plain http.
	CAPEM []byte

	key []byte
	srv *http.Server

	mu         sync.Mutex
	containers map[string]*container
	sas        []url.Values
	bearer     map[string]bool // token → whether its principal may read
	pageSize   int
	latency    time.Duration
	lastTick   uint64
	requests   []Request
}

type container struct {
	public string
	blobs  map[string]*blob
}

type blob struct {
	body              []byte
	etag              string // unquoted, as listings carry it
	created, modified time.Time
	md5               []byte
	// tier is the access tier: "" for Hot, inferred from the account's.
	tier string
	// directory marks a hierarchical namespace's directory (PutDirectory).
	directory bool
}

// tierOf is b's access tier as Azure names it, and whether it was
// inferred from the account's default rather than set.
func (b *blob) tierOf() (string, bool) {
	if b.tier == "" {
		return "Hot", true
	}
	return b.tier, false
}

// accountName is Azure's rule for storage account names.
var accountName = regexp.MustCompile(`^[a-z0-9]{3,24}$`)

// Start serves the account over plain http on addr (host:0 for a free
// port) until Close.
func Start(addr, account string) (*Server, error) { return start(addr, account, false) }

// StartTLS is Start over https, with a certificate from a fresh CA (see
// CAPEM). Bearer tokens need it: azcore sends none over plain http.
func StartTLS(addr, account string) (*Server, error) { return start(addr, account, true) }

func start(addr, account string, useTLS bool) (*Server, error) {
	if !accountName.MatchString(account) {
		return nil, fmt.Errorf("account name %q: Azure takes 3 to 24 lower-case letters and digits", account)
	}
	key := make([]byte, 64)
	_, _ = rand.Read(key)
	s := &Server{
		Account:    account,
		Key:        base64.StdEncoding.EncodeToString(key),
		Tenant:     newID(),
		key:        key,
		containers: map[string]*container{},
		bearer:     map[string]bool{},
	}
	l, caPEM, err := listen(addr, useTLS)
	if err != nil {
		return nil, fmt.Errorf("start blob service: %w", err)
	}
	scheme := "http"
	if useTLS {
		scheme = "https"
	}
	s.URL, s.CAPEM = scheme+"://"+l.Addr().String()+"/"+account, caPEM
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() { _ = s.srv.Close() }

// Put stores body as a block blob, creating the container if there is none,
// and returns the blob's new ETag as the ETag header carries it (quoted;
// listings carry it bare).
func (s *Server) Put(containerName, name string, body []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.container(containerName)
	now := time.Now().UTC()
	sum := md5.Sum(body) //nolint:gosec // see the import
	b := &blob{body: bytes.Clone(body), etag: s.nextETag(), created: now, modified: now, md5: sum[:]}
	if old, ok := c.blobs[name]; ok {
		b.created = old.created
	}
	c.blobs[name] = b
	return `"` + b.etag + `"`
}

// PutDirectory stores a directory of a hierarchical namespace (Data Lake
// Storage Gen2) as the Blob API shows one: an empty blob whose metadata
// says hdi_isfolder, listed among the files.
func (s *Server) PutDirectory(containerName, name string) {
	s.Put(containerName, name, nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.container(containerName).blobs[name].directory = true
}

// SetTier sets a blob's access tier: Hot, Cool, Cold or Archive. An
// archived blob's bytes cannot be read until it is rehydrated, as in
// Azure.
func (s *Server) SetTier(containerName, name, tier string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.container(containerName).blobs[name]; ok {
		b.tier = tier
	}
}

// Delete removes a blob, if there is one.
func (s *Server) Delete(containerName, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.containers[containerName]; ok {
		delete(c.blobs, name)
	}
}

// SetPublic sets a container's public access level, creating it if need
// be: "" (private), "blob" (anyone may read a blob whose name they know)
// or "container" (anyone may also list).
func (s *Server) SetPublic(containerName, level string) {
	if level != "" && level != "blob" && level != "container" {
		panic(fmt.Sprintf("azblobserver: public access level %q: Azure has only \"\", \"blob\" and \"container\"", level))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.container(containerName).public = level
}

// AllowSAS accepts a SAS token, the query string without '?' (as
// AZURE_STORAGE_SAS_TOKEN holds it), for reading: a request carrying its
// sig must carry its other fields too, and is refused as Azure refuses it
// once se has passed, over http when spr is "https", or when sp lacks the
// permission (r to read, l to list).
func (s *Server) AllowSAS(token string) {
	q, err := url.ParseQuery(strings.TrimPrefix(token, "?"))
	if err != nil || q.Get("sig") == "" {
		panic(fmt.Sprintf("azblobserver: SAS token %q: want a query string with a sig", token))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sas = append(s.sas, q)
}

// NewSAS makes an account SAS token for AllowSAS that may read and list
// blobs until expiry, over http or https, with a random signature.
func NewSAS(expiry time.Time) string {
	sig := make([]byte, 32)
	_, _ = rand.Read(sig)
	return "sv=2024-08-04&ss=b&srt=co&sp=rl&se=" + expiry.UTC().Format(time.RFC3339) +
		"&spr=https,http&sig=" + url.QueryEscape(base64.StdEncoding.EncodeToString(sig))
}

// AllowBearer accepts an Entra access token; canRead false stands for a
// principal without a role that grants reading blobs (Storage Blob Data
// Reader), whose requests Azure refuses with AuthorizationPermissionMismatch.
func (s *Server) AllowBearer(token string, canRead bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bearer[token] = canRead
}

// SetPageSize caps the blobs a listing returns at once (Azure's cap is
// 5000), so that a test of paging needs a few blobs, not thousands; 0
// lifts the cap.
func (s *Server) SetPageSize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageSize = n
}

// SetLatency delays each blob's download by d before its first byte, as
// a store's time to first byte does (the stand-in answers from memory at
// once): what a sequential copy pays per blob and parallel downloads
// hide.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// Requests are the calls received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *Server) container(name string) *container {
	c, ok := s.containers[name]
	if !ok {
		c = &container{blobs: map[string]*blob{}}
		s.containers[name] = c
	}
	return c
}

// nextETag makes an ETag like Azure's, hex after "0x8D", that no earlier
// one in this server equals, even for two Puts in one clock tick.
func (s *Server) nextETag() string {
	t := uint64(time.Now().UnixNano() / 100)
	s.lastTick = max(t, s.lastTick+1)
	return fmt.Sprintf("0x8D%013X", s.lastTick&(1<<52-1))
}

// reply is an answer decided under the lock and written after it, so that
// a slow reader of a large blob holds no other request up.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	req := Request{Method: r.Method, Range: rangeHeader(r.Header)}
	s.mu.Lock()
	rep := s.answer(r, &req)
	req.Status = rep.status
	s.requests = append(s.requests, req)
	latency := s.latency
	s.mu.Unlock()
	if req.Blob != "" && r.Method == http.MethodGet {
		time.Sleep(latency)
	}

	h := w.Header()
	for k, v := range rep.header {
		h[k] = v
	}
	h.Set("Server", "Windows-Azure-Blob/1.0 Microsoft-HTTPAPI/2.0")
	h.Set("x-ms-request-id", newID())
	// Azure answers in the version asked for; the stand-in speaks them all.
	if v := r.Header.Get("x-ms-version"); v != "" {
		h.Set("x-ms-version", v)
	}
	if id := r.Header.Get("x-ms-client-request-id"); id != "" {
		h.Set("x-ms-client-request-id", id)
	}
	if h.Get("Content-Length") == "" {
		h.Set("Content-Length", strconv.Itoa(len(rep.body)))
	}
	w.WriteHeader(rep.status)
	if r.Method != http.MethodHead && rep.status != http.StatusNotModified {
		_, _ = w.Write(rep.body)
	}
}

// answer routes a request as Azure does: who is asking, then whether the
// verb is served, then whether they may, then whether the resource exists.
func (s *Server) answer(r *http.Request, req *Request) *reply {
	account, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	req.Container, req.Blob, _ = strings.Cut(rest, "/")
	if account != s.Account {
		return fail(http.StatusBadRequest, "InvalidUri", "The requested URI does not represent any resource on the server.")
	}
	q := r.URL.Query()
	who, rep := s.authenticate(r, q)
	req.Auth = who.kind
	if rep != nil {
		return rep
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return fail(http.StatusMethodNotAllowed, "UnsupportedHttpVerb", "The resource doesn't support specified Http Verb.")
	}
	op, rep := operationOf(req, q)
	if rep != nil {
		return rep
	}
	c := s.containers[req.Container]
	if rep := s.authorize(who, op, c); rep != nil {
		return rep
	}
	if c == nil {
		return fail(http.StatusNotFound, "ContainerNotFound", "The specified container does not exist.")
	}
	if op == opList {
		return s.list(req.Container, q)
	}
	b, ok := c.blobs[req.Blob]
	if !ok {
		return fail(http.StatusNotFound, "BlobNotFound", "The specified blob does not exist.")
	}
	return read(r, b)
}

// operationOf tells which read a request asks for, or refuses one the
// stand-in does not serve.
func operationOf(req *Request, q url.Values) (operation, *reply) {
	switch {
	case req.Container == "" || (req.Blob == "") != (q.Get("restype") == "container"):
		return 0, failQuery("restype")
	case req.Blob != "" && !q.Has("comp"):
		return opRead, nil
	case req.Blob == "" && q.Get("comp") == "list":
		return opList, nil
	}
	// Container properties, metadata, tags, block lists, ...
	return 0, failQuery("comp")
}

// failQuery refuses an operation the stand-in does not serve, as Azure
// refuses a query it cannot make sense of.
func failQuery(name string) *reply {
	return fail(http.StatusBadRequest, "InvalidQueryParameterValue",
		"Value for one of the query parameters specified in the request URI is invalid.",
		"QueryParameterName", name)
}

// read answers Get Blob, or Get Blob Properties for HEAD (which takes no
// range).
func read(r *http.Request, b *blob) *reply {
	h := http.Header{}
	h.Set("ETag", `"`+b.etag+`"`)
	h.Set("Last-Modified", b.modified.Format(http.TimeFormat))
	h.Set("x-ms-creation-time", b.created.Format(http.TimeFormat))
	h.Set("Content-Type", "application/octet-stream")
	h.Set("x-ms-blob-type", "BlockBlob")
	h.Set("Accept-Ranges", "bytes")
	h.Set("x-ms-lease-status", "unlocked")
	h.Set("x-ms-lease-state", "available")
	h.Set("x-ms-server-encrypted", "true")
	if rep := precondition(r.Header, b); rep != nil {
		return rep
	}
	size := len(b.body)
	tier, inferred := b.tierOf()
	if r.Method == http.MethodHead {
		h.Set("x-ms-access-tier", tier)
		h.Set("x-ms-access-tier-inferred", strconv.FormatBool(inferred))
		h.Set("Content-MD5", base64.StdEncoding.EncodeToString(b.md5))
		h.Set("Content-Length", strconv.Itoa(size))
		return &reply{status: http.StatusOK, header: h}
	}
	if tier == "Archive" {
		return fail(http.StatusConflict, "BlobArchived", "This operation is not permitted on an archived blob.")
	}
	spec := rangeHeader(r.Header)
	if spec == "" {
		h.Set("Content-MD5", base64.StdEncoding.EncodeToString(b.md5))
		return &reply{status: http.StatusOK, header: h, body: b.body}
	}
	first, last, ok := parseRange(spec)
	if !ok {
		return fail(http.StatusBadRequest, "InvalidHeaderValue", "The value for one of the HTTP headers is not in the correct format.",
			"HeaderName", "x-ms-range", "HeaderValue", spec)
	}
	if first >= size || (last >= 0 && last < first) {
		rep := fail(http.StatusRequestedRangeNotSatisfiable, "InvalidRange", "The range specified is invalid for the current size of the resource.")
		rep.header.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
		return rep
	}
	if last < 0 || last >= size {
		last = size - 1
	}
	h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, size))
	// A range has no Content-MD5 (x-ms-range-get-content-md5, which asks
	// for one, is not served); the whole blob's is in x-ms-blob-content-md5.
	h.Set("x-ms-blob-content-md5", base64.StdEncoding.EncodeToString(b.md5))
	return &reply{status: http.StatusPartialContent, header: h, body: b.body[first : last+1]}
}

// precondition applies If-Match and If-None-Match (the ETag conditions;
// the date ones are not served).
func precondition(req http.Header, b *blob) *reply {
	status := 0
	if v := req.Get("If-Match"); v != "" && !etagIn(v, b.etag) {
		status = http.StatusPreconditionFailed
	} else if v := req.Get("If-None-Match"); v != "" && etagIn(v, b.etag) {
		status = http.StatusNotModified
	} else {
		return nil
	}
	rep := fail(status, "ConditionNotMet", "The condition specified using HTTP conditional header(s) is not met.")
	rep.header.Set("ETag", `"`+b.etag+`"`)
	rep.header.Set("Last-Modified", b.modified.Format(http.TimeFormat))
	if status == http.StatusNotModified {
		rep.body = nil // a 304 has none, but keeps the code
	}
	return rep
}

// etagIn reports whether a conditional header's list names etag. Azure
// takes ETags quoted or bare, and the SDK passes on whichever it was given.
func etagIn(list, etag string) bool {
	for v := range strings.SplitSeq(list, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == "*" || strings.Trim(v, `"`) == etag {
			return true
		}
	}
	return false
}

// rangeHeader is the range asked for: x-ms-range wins over Range, as at
// Azure. (Which one azblob sends depends on its version and client.)
func rangeHeader(h http.Header) string {
	if v := h.Get("x-ms-range"); v != "" {
		return v
	}
	return h.Get("Range")
}

// parseRange reads "bytes=first-last" or "bytes=first-", last -1 for the
// latter; Azure takes no suffix ranges and no lists.
func parseRange(spec string) (first, last int, ok bool) {
	a, b, found := strings.Cut(strings.TrimPrefix(spec, "bytes="), "-")
	if !found || !strings.HasPrefix(spec, "bytes=") {
		return 0, 0, false
	}
	first, err := strconv.Atoi(a)
	if err != nil || first < 0 {
		return 0, 0, false
	}
	if b == "" {
		return first, -1, true
	}
	last, err = strconv.Atoi(b)
	return first, last, err == nil && last >= 0
}

// fail is Azure's error: the code in x-ms-error-code and in an XML body
// whose Message ends with the request id and time, plus the detail
// elements the error has (name, value pairs).
func fail(status int, code, message string, detail ...string) *reply {
	var body bytes.Buffer
	body.WriteString(`<?xml version="1.0" encoding="utf-8"?><Error><Code>` + code + "</Code><Message>")
	body.WriteString(escapeText.Replace(message + "\nRequestId:" + newID() + "\nTime:" + time.Now().UTC().Format("2006-01-02T15:04:05.0000000Z")))
	body.WriteString("</Message>")
	for i := 0; i+1 < len(detail); i += 2 {
		body.WriteString("<" + detail[i] + ">" + escapeText.Replace(detail[i+1]) + "</" + detail[i] + ">")
	}
	body.WriteString("</Error>")
	h := http.Header{}
	h.Set("x-ms-error-code", code)
	h.Set("Content-Type", "application/xml")
	return &reply{status: status, header: h, body: body.Bytes()}
}

// escapeText escapes only what XML text must, leaving the line breaks and
// apostrophes that Azure's messages hold as they are (xml.EscapeText would
// write them as character references).
var escapeText = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// newID is a random GUID, the form of Azure's request ids and tenants.
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func listen(addr string, useTLS bool) (net.Listener, []byte, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil || !useTLS {
		return l, nil, err
	}
	tl, caPEM, err := serveTLS(l)
	if err != nil {
		_ = l.Close()
		return nil, nil, err
	}
	return tl, caPEM, nil
}
