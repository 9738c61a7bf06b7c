package fetch

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// Keys of the credentials Secret for an hf:// model: the Hub's access
// token, and the Hub's address where it is not huggingface.co (a mirror,
// a private Hub), under the names huggingface_hub reads from the
// environment.
const (
	KeyHFToken    = "HF_TOKEN"
	KeyHFEndpoint = "HF_ENDPOINT"
)

// defaultHFEndpoint is the Hub's address.
const defaultHFEndpoint = "https://huggingface.co"

// hfSource is a model repository of the Hugging Face Hub, or a directory
// or file in it. The revision the URI names (a branch, main by default)
// is resolved to its commit first, and every file is listed and
// downloaded at that commit: a push during the fetch does not mix two
// commits' files. A file's version is its Git LFS object's SHA-256, or
// its Git blob's id, so that a refetch takes the files that did not
// change from the copy on the volume.
type hfSource struct {
	// bucketPrefix's name is the repository, <owner>/<repo>.
	bucketPrefix
	client   *http.Client
	endpoint *url.URL
	// revision is what the URI names; commit what it resolved to, once
	// listed.
	revision, commit string
}

func newHFSource(loc storageuri.Location, creds Credentials, transport http.RoundTripper, maxFiles int) (Source, error) {
	ep, err := url.Parse(strings.TrimSuffix(cmp.Or(creds.Get(KeyHFEndpoint), defaultHFEndpoint), "/"))
	if err != nil || (ep.Scheme != "https" && ep.Scheme != "http") || ep.Host == "" {
		return nil, permanentf(servingv1alpha1.ReasonInvalidURI, "credentials key %s is not an http(s) URL", KeyHFEndpoint)
	}
	if token := creds.Get(KeyHFToken); token != "" {
		// To the Hub alone: a large file's download is redirected to a
		// CDN's signed URL, which must not be handed the token.
		transport = &headerTransport{base: transport, host: ep.Host, headers: [][2]string{{"Authorization", "Bearer " + token}}}
	}
	b := bucketPrefix{root: "hf://" + loc.Repo + "@" + loc.Revision, name: loc.Repo, prefix: loc.Prefix, maxFiles: maxFiles}
	return &hfSource{bucketPrefix: b, client: &http.Client{Transport: transport}, endpoint: ep, revision: loc.Revision}, nil
}

// hfEntry is an entry of the Hub's tree listing.
type hfEntry struct {
	Type string `json:"type"` // "file" or "directory"
	Path string `json:"path"`
	Size int64  `json:"size"`
	OID  string `json:"oid"`
	LFS  *struct {
		OID string `json:"oid"`
	} `json:"lfs"`
}

// List resolves the revision to its commit, then lists the tree below the
// prefix at that commit, page by page. A prefix that names a file (an
// archive) is that file alone.
func (s *hfSource) List(ctx context.Context) (Listing, error) {
	var rev struct {
		SHA string `json:"sha"`
	}
	if err := s.getJSON(ctx, s.api("revision", url.PathEscape(s.revision)), &rev, s.Describe("")); err != nil {
		return Listing{}, err
	}
	s.commit = cmp.Or(rev.SHA, s.revision)
	s.root = "hf://" + s.name + "@" + s.commit
	keys := s.listing()
	next := s.api("tree", url.PathEscape(s.commit))
	if s.prefix != "" {
		next += "/" + url.PathEscape(s.prefix)
	}
	next += "?recursive=true"
	for next != "" {
		var page []hfEntry
		link, err := s.getPage(ctx, next, &page)
		if err != nil {
			return Listing{}, err
		}
		for _, e := range page {
			if err := s.add(keys, e); err != nil {
				return Listing{}, err
			}
		}
		next = link
	}
	return keys.done(func() (int64, string, bool, error) {
		return s.lookup(ctx)
	})
}

// add takes one entry of the tree: a file, with its version, or a
// directory, kept as one.
func (s *hfSource) add(keys *keyListing, e hfEntry) error {
	switch {
	case e.Path == s.prefix:
		// The file the URI names: lookup says what it is.
		return nil
	case e.Type == "directory":
		return keys.add(e.Path+"/", 0, "")
	case e.LFS != nil && e.LFS.OID != "":
		return keys.add(e.Path, e.Size, "sha256:"+e.LFS.OID)
	default:
		return keys.add(e.Path, e.Size, e.OID)
	}
}

// lookup asks whether the prefix names one file, as the tree of a path
// that is no directory is empty: its size and version, from the headers of
// the Hub's answer to its download.
func (s *hfSource) lookup(ctx context.Context) (int64, string, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, s.resolveURL(s.prefix), nil)
	if err != nil {
		return 0, "", false, permanentf(servingv1alpha1.ReasonInvalidURI, "%s: %v", s.Describe(""), err)
	}
	// The Hub's own answer, not the CDN's it redirects a large file to:
	// it says the file's size and LFS SHA-256.
	client := *s.client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", false, classify(err, s.Describe(""))
	}
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return 0, "", false, nil
	case resp.StatusCode >= 400:
		return 0, "", false, s.statusError(resp, s.Describe(""))
	}
	var size int64 = -1
	if _, err := fmt.Sscan(cmp.Or(resp.Header.Get("X-Linked-Size"), resp.Header.Get("Content-Length")), &size); err != nil {
		size = -1
	}
	version := strings.Trim(resp.Header.Get("X-Linked-Etag"), `"`)
	if version != "" {
		version = "sha256:" + version
	} else {
		version = strings.Trim(resp.Header.Get("ETag"), `"`)
	}
	return size, version, true, nil
}

// Open downloads the file rel at the commit listed, following the Hub's
// redirect of a large file to its CDN.
func (s *hfSource) Open(ctx context.Context, rel string) (io.ReadCloser, objectInfo, error) {
	resp, err := s.get(ctx, s.resolveURL(s.key(rel)), "", s.Describe(rel))
	if err != nil {
		return nil, objectInfo{}, err
	}
	return resp.Body, objectInfo{Size: resp.ContentLength}, nil
}

// OpenRange downloads n bytes of the file rel from off, so that a large
// file is read in parts, several at once.
func (s *hfSource) OpenRange(ctx context.Context, rel string, off, n int64) (io.ReadCloser, objectInfo, error) {
	resp, err := s.get(ctx, s.resolveURL(s.key(rel)), fmt.Sprintf("bytes=%d-%d", off, off+n-1), s.Describe(rel))
	if err != nil {
		return nil, objectInfo{}, err
	}
	info := objectInfo{Size: -1}
	from, _, size, ok := contentRange(resp)
	if ok {
		info.Size = size
	}
	if resp.StatusCode != http.StatusPartialContent || from != off {
		_ = resp.Body.Close()
		return nil, objectInfo{}, transientf(servingv1alpha1.ReasonFetchFailed, "%s: the Hub did not serve the range asked for (HTTP %d, %q)", s.Describe(rel), resp.StatusCode, resp.Header.Get("Content-Range"))
	}
	return resp.Body, info, nil
}

func (s *hfSource) Close() error {
	s.client.CloseIdleConnections()
	return nil
}

// api is the URL of the Hub's API for the repository: /api/models/<repo>
// and the escaped segments after it.
func (s *hfSource) api(segments ...string) string {
	return s.endpoint.String() + "/api/models/" + s.name + "/" + strings.Join(segments, "/")
}

// resolveURL is the download URL of the file at key, at the commit
// listed.
func (s *hfSource) resolveURL(key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return s.endpoint.String() + "/" + s.name + "/resolve/" + url.PathEscape(cmp.Or(s.commit, s.revision)) + "/" + path.Join(parts...)
}

// getJSON decodes the Hub's 200 answer to target into v.
func (s *hfSource) getJSON(ctx context.Context, target string, v any, what string) error {
	resp, err := s.get(ctx, target, "", what)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(v); err != nil {
		return transientf(servingv1alpha1.ReasonFetchFailed, "%s: the Hub's answer is not the JSON expected: %v", what, err)
	}
	return nil
}

// getPage reads one page of the tree into page, and returns the next
// page's URL from the answer's Link header, "" after the last.
func (s *hfSource) getPage(ctx context.Context, target string, page *[]hfEntry) (string, error) {
	resp, err := s.get(ctx, target, "", s.Describe(""))
	if err != nil {
		if fe := AsError(err); fe.Reason == servingv1alpha1.ReasonNotFound && s.prefix != "" {
			// The prefix names no directory: it may name a file.
			return "", nil
		}
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(page); err != nil {
		return "", transientf(servingv1alpha1.ReasonFetchFailed, "%s: the Hub's tree is not the JSON expected: %v", s.Describe(""), err)
	}
	return nextLink(resp.Header.Get("Link")), nil
}

// nextLink is the URL of a Link header's rel="next", "" if none.
func nextLink(header string) string {
	for _, l := range strings.Split(header, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(l), ";")
		if ok && strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
			return strings.Trim(strings.TrimSpace(target), "<>")
		}
	}
	return ""
}

// get sends a GET to target (a range of it where rng is set) and returns
// the Hub's 200 or 206 answer, or its error worded for the file what.
func (s *hfSource) get(ctx context.Context, target, rng, what string) (*http.Response, error) {
	return getFile(ctx, s.client, target, rng, what, func(resp *http.Response) error { return s.statusError(resp, what) })
}

// statusError words the Hub's refusal: its status, and the reason it
// gives in X-Error-Message. The Hub answers 401 for a repository it does
// not show the caller: one that does not exist, or a private or gated one
// the token does not open.
func (s *hfSource) statusError(resp *http.Response, what string) *Error {
	detail := "HTTP " + resp.Status
	if msg := resp.Header.Get("X-Error-Message"); msg != "" {
		detail += ": " + firstLineOf(msg)
	}
	fe := byStatus(resp.StatusCode, newStatusError(resp), what+": ", detail)
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		fe.Message = fmt.Sprintf("%s: access denied (%s): the repository %s does not exist, or is private or gated and the credentials Secret's %s does not open it", what, detail, s.name, KeyHFToken)
	}
	return fe
}
