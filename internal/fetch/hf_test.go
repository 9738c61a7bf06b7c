package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
)

// fakeHub plays the Hugging Face Hub for one repository, o/r: its refs,
// its tree API (two entries a page), and its downloads, which it sends for
// a file of lfsMin bytes or more to a CDN of another host, as the Hub
// sends Git LFS files. A private repository answers only the token.
type fakeHub struct {
	*httptest.Server
	cdn     *httptest.Server
	private string // the token a private repository asks for; "" if public

	mu      sync.Mutex
	refs    map[string]string            // branch -> commit
	commits map[string]map[string][]byte // commit -> files
	// seen counts requests by kind: "revision", "tree", "resolve", "cdn";
	// tokenToCDN counts the CDN's requests that carried a token.
	seen       map[string]int
	tokenToCDN int
}

const lfsMin = 2048

func newFakeHub(t *testing.T, private string) *fakeHub {
	t.Helper()
	h := &fakeHub{private: private, refs: map[string]string{}, commits: map[string]map[string][]byte{}, seen: map[string]int{}}
	h.cdn = httptest.NewServer(http.HandlerFunc(h.serveCDN))
	t.Cleanup(h.cdn.Close)
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.Close)
	return h
}

// push makes a commit of files the head of main.
func (h *fakeHub) push(commit string, files map[string][]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.commits[commit], h.refs["main"] = files, commit
}

func (h *fakeHub) count(kind string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[kind]
}

func (h *fakeHub) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.private != "" && r.Header.Get("Authorization") != "Bearer "+h.private {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		w.Header().Set("X-Error-Message", "Repository not found")
		http.Error(w, "", http.StatusUnauthorized)
		return
	}
	p := r.URL.EscapedPath()
	switch {
	case strings.HasPrefix(p, "/api/models/o/r/revision/"):
		h.seen["revision"]++
		rev, _ := url.PathUnescape(strings.TrimPrefix(p, "/api/models/o/r/revision/"))
		commit, ok := h.refs[rev]
		if _, isCommit := h.commits[rev]; isCommit {
			commit, ok = rev, true
		}
		if !ok {
			w.Header().Set("X-Error-Code", "RevisionNotFound")
			w.Header().Set("X-Error-Message", "Invalid rev id: "+rev)
			http.Error(w, "", http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"id": "o/r", "sha": commit})
	case strings.HasPrefix(p, "/api/models/o/r/tree/"):
		h.seen["tree"]++
		h.serveTree(w, r, strings.TrimPrefix(p, "/api/models/o/r/tree/"))
	case strings.HasPrefix(p, "/o/r/resolve/"):
		h.seen["resolve"]++
		commit, file, _ := strings.Cut(strings.TrimPrefix(p, "/o/r/resolve/"), "/")
		file, _ = url.PathUnescape(file)
		body, ok := h.commits[commit][file]
		if !ok {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, "", http.StatusNotFound)
			return
		}
		if len(body) >= lfsMin {
			sum := sha256.Sum256(body)
			w.Header().Set("X-Linked-Size", strconv.Itoa(len(body)))
			w.Header().Set("X-Linked-Etag", `"`+hex.EncodeToString(sum[:])+`"`)
			http.Redirect(w, r, h.cdn.URL+"/"+commit+"/"+url.PathEscape(file), http.StatusFound)
			return
		}
		w.Header().Set("ETag", `"`+gitOID(body)+`"`)
		http.ServeContent(w, r, file, time.Time{}, bytes.NewReader(body))
	default:
		http.NotFound(w, r)
	}
}

// serveTree lists commit's files below the path after it, two a page.
func (h *fakeHub) serveTree(w http.ResponseWriter, r *http.Request, rest string) {
	commit, dir, _ := strings.Cut(rest, "/")
	dir, _ = url.PathUnescape(dir)
	files, ok := h.commits[commit]
	if !ok {
		http.Error(w, "", http.StatusNotFound)
		return
	}
	type entry struct {
		Type string `json:"type"`
		OID  string `json:"oid"`
		Size int    `json:"size"`
		Path string `json:"path"`
		LFS  any    `json:"lfs,omitempty"`
	}
	var all []entry
	dirs := map[string]bool{}
	for name, body := range files {
		if dir != "" && !strings.HasPrefix(name, dir+"/") {
			continue
		}
		for d := path.Dir(name); d != "." && d != dir && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			all = append(all, entry{Type: "directory", OID: gitOID([]byte(d)), Path: d})
		}
		e := entry{Type: "file", OID: gitOID(body), Size: len(body), Path: name}
		if len(body) >= lfsMin {
			sum := sha256.Sum256(body)
			e.LFS = map[string]any{"oid": hex.EncodeToString(sum[:]), "size": len(body), "pointerSize": 134}
		}
		all = append(all, e)
	}
	if len(all) == 0 {
		http.Error(w, "", http.StatusNotFound)
		return
	}
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.Path, b.Path) })
	from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	to := min(from+2, len(all))
	if to < len(all) {
		next := *r.URL
		q := next.Query()
		q.Set("cursor", strconv.Itoa(to))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, h.URL, next.RequestURI()))
	}
	_ = json.NewEncoder(w).Encode(all[from:to])
}

// serveCDN serves a large file's bytes at its signed URL, ranges included.
func (h *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen["cdn"]++
	if r.Header.Get("Authorization") != "" {
		h.tokenToCDN++
	}
	commit, file, _ := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	file, _ = url.PathUnescape(file)
	body, ok := h.commits[commit][file]
	h.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, file, time.Time{}, bytes.NewReader(body))
}

// gitOID stands in for a Git blob's id: it changes with the content.
func gitOID(b []byte) string {
	sum := sha256.Sum256(append([]byte("blob "), b...))
	return hex.EncodeToString(sum[:20])
}

// TestAHubRepositoryIsFetchedAtTheCommitItsRevisionNames: a private
// repository's main is resolved to its commit, listed page by page, and
// each file downloaded at that commit, its large files from the CDN the
// Hub redirects to, which is never sent the token; the SavedModel at its
// top becomes version 1. A commit pushed later is fetched with the files
// it did not change taken from the copy on the volume.
func TestAHubRepositoryIsFetchedAtTheCommitItsRevisionNames(t *testing.T) {
	hub := newFakeHub(t, "hf_secret")
	first := map[string][]byte{
		"README.md":                               []byte("# a model\n"),
		"saved_model.pb":                          []byte("graph"),
		"variables/variables.index":               []byte("index"),
		"variables/variables.data-00000-of-00001": bytes.Repeat([]byte{1}, 3*lfsMin),
	}
	hub.push("c1", first)
	creds := secretDir(t, map[string]string{KeyHFToken: "hf_secret\n", KeyHFEndpoint: hub.URL})
	models := t.TempDir()
	fetch := func(uri, gen string) Summary {
		t.Helper()
		o, logs := testOptions(t, uri, creds)
		o.Dest = filepath.Join(models, gen)
		sum, err := Run(context.Background(), o)
		if err != nil {
			t.Fatalf("%s: %v\n%s", uri, err, logs)
		}
		if strings.Contains(logs.String(), "hf_secret") {
			t.Errorf("the token is in the fetch's log:\n%s", logs)
		}
		return sum
	}
	sum := fetch("hf://o/r", "0000000a")
	assertTree(t, filepath.Join(models, "0000000a"), prefixed("1/", first))
	if hub.count("tree") < 3 || hub.count("cdn") == 0 || hub.tokenToCDN != 0 {
		t.Errorf("%d pages of the tree read, %d CDN downloads, %d of them with the token; want every page, the large file from the CDN, never the token", hub.count("tree"), hub.count("cdn"), hub.tokenToCDN)
	}
	if !slices.Equal(sum.Versions, []int64{1}) {
		t.Errorf("versions %v; want [1]", sum.Versions)
	}

	// A new commit changes the index alone: the large file is not
	// downloaded again. The URI names a directory of it, at a tag.
	second := map[string][]byte{"m/saved_model.pb": first["saved_model.pb"], "m/variables/variables.index": []byte("index 2"),
		"m/variables/variables.data-00000-of-00001": first["variables/variables.data-00000-of-00001"]}
	hub.push("c2", second)
	hub.mu.Lock()
	hub.refs["v2"] = "c2"
	hub.mu.Unlock()
	cdn := hub.count("cdn")
	fetch("hf://o/r@v2/m", "0000000b")
	fetch("hf://o/r@v2/m", "0000000c")
	assertTree(t, filepath.Join(models, "0000000c"), map[string][]byte{"1/saved_model.pb": []byte("graph"), "1/variables/variables.index": []byte("index 2"),
		"1/variables/variables.data-00000-of-00001": first["variables/variables.data-00000-of-00001"]})
	if n := hub.count("cdn") - cdn; n != 1 {
		t.Errorf("the large file was downloaded %d times for two fetches of a commit; want once, then taken from the copy", n)
	}
}

// TestAHubFetchThatCannotBeMadeSaysWhy: a private repository without the
// token, a revision that does not exist, a path that names nothing.
func TestAHubFetchThatCannotBeMadeSaysWhy(t *testing.T) {
	hub := newFakeHub(t, "hf_secret")
	hub.push("c1", map[string][]byte{"saved_model.pb": []byte("graph")})
	for _, c := range []struct {
		uri, token, reason, says string
	}{
		{"hf://o/r", "", servingv1alpha1.ReasonAccessDenied, "the repository o/r does not exist, or is private or gated and the credentials Secret's HF_TOKEN does not open it"},
		{"hf://o/r", "hf_other", servingv1alpha1.ReasonAccessDenied, "Repository not found"},
		{"hf://o/r@v9", "hf_secret", servingv1alpha1.ReasonNotFound, "Invalid rev id: v9"},
		{"hf://o/r/nothing", "hf_secret", servingv1alpha1.ReasonNotFound, "hf://o/r@c1/nothing/"},
	} {
		keys := map[string]string{KeyHFEndpoint: hub.URL}
		if c.token != "" {
			keys[KeyHFToken] = c.token
		}
		o, _ := testOptions(t, c.uri, secretDir(t, keys))
		_, err := Run(context.Background(), o)
		fe := wantFailure(t, err, c.reason, ExitCode(err))
		if !strings.Contains(fe.Message, c.says) || strings.Contains(fe.Message, "hf_secret") {
			t.Errorf("%s with token %q: %q; want it to say %q", c.uri, c.token, fe.Message, c.says)
		}
	}
}

// TestAnArchiveInAHubRepositoryIsExtracted: a path that names a file is
// that file alone, here an archive, read in ranges from the CDN.
func TestAnArchiveInAHubRepositoryIsExtracted(t *testing.T) {
	hub := newFakeHub(t, "")
	files := largeModel()
	archive := tarball(t, false, entries(files))
	hub.push("c1", map[string][]byte{"README.md": []byte("x"), "export/m.tar": archive})
	o, logs := testOptions(t, "hf://o/r/export/m.tar", secretDir(t, map[string]string{KeyHFEndpoint: hub.URL}))
	o.partSize = testPartSize
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	assertTree(t, o.Dest, files)
	if n := hub.count("cdn"); n < 2 {
		t.Errorf("%d requests to the CDN; want the archive read in ranges", n)
	}
}

func TestALinkHeaderNamesTheNextPage(t *testing.T) {
	for header, want := range map[string]string{
		`<https://huggingface.co/api/models/o/r/tree/c?cursor=abc>; rel="next"`: "https://huggingface.co/api/models/o/r/tree/c?cursor=abc",
		`<https://h/a>; rel="prev", <https://h/b>; rel="next"`:                  "https://h/b",
		`<https://h/a>; rel = "next"`:                                           "https://h/a",
		`<https://h/a>; rel="prev"`:                                             "",
		"":                                                                      "",
	} {
		if got := nextLink(header); got != want {
			t.Errorf("nextLink(%q) = %q; want %q", header, got, want)
		}
	}
}
