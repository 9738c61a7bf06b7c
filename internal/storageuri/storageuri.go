// Package storageuri holds the one parser of a model's storage URI. The
// fetcher parses the URI to know where to fetch from; the chart's values
// parse it to refuse, before anything is installed, every URI the fetcher
// would refuse. Both must agree, so both call Parse. It imports the
// standard library only, to keep the pure values package light.
package storageuri

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// Scheme is the kind of place a model is fetched from.
type Scheme string

// The schemes of a model's storage URI.
const (
	SchemeS3    Scheme = "s3"
	SchemeGCS   Scheme = "gs"
	SchemeHTTP  Scheme = "http"
	SchemeHTTPS Scheme = "https"
	SchemePVC   Scheme = "pvc"
	SchemeLocal Scheme = "file"
	SchemeOCI   Scheme = "oci"
	// SchemeAzure is Azure Blob Storage: an https:// URI whose host is a
	// storage account's blob endpoint (azureHost), written as the portal
	// and KServe write it; or its Data Lake Storage Gen2 forms, read
	// through the blob endpoint of the same account (abfss://, wasbs://,
	// the dfs endpoint).
	SchemeAzure Scheme = "azure"
	// SchemeHF is a model repository of the Hugging Face Hub,
	// hf://<owner>/<repo>[@<revision>][/<path>], as huggingface_hub's file
	// system writes it.
	SchemeHF Scheme = "hf"
)

// The Hadoop forms of an Azure URI, <container>@<account host>/<path>, as
// Databricks, Synapse, Azure Machine Learning and Spark write them: ABFS's
// (Data Lake Storage Gen2) and WASB's, over TLS.
const (
	schemeABFSS = "abfss"
	schemeWASBS = "wasbs"
)

// Location is a parsed storage URI.
type Location struct {
	Scheme Scheme
	// Bucket and Prefix for s3://, gs:// and Azure (its container);
	// Prefix has no leading or trailing slash, and is empty for a whole
	// bucket.
	Bucket string
	Prefix string
	// Account is the storage account of an Azure URI.
	Account string
	// Repo (<owner>/<repo>) and Revision (a branch, tag or commit; main
	// where the URI names none) of an hf:// URI, whose Prefix is the path
	// in the repository.
	Repo, Revision string
	// URL is the request URL of an http(s):// source, without fragment;
	// for Azure, the container's URL.
	URL *url.URL
	// Path is the directory of a local source, or the claim's sub-path of
	// a pvc:// one.
	Path string
	// Claim is the claim of a pvc:// source.
	Claim string
	// Reference is the image reference of an oci:// source:
	// registry/repository[:tag][@digest], as written (no tag nor digest
	// means the tag latest, as for any image).
	Reference string
	// SHA256 pins the checksum of a single downloaded file (#sha256=...),
	// in lower-case hex; empty when not pinned.
	SHA256 string

	raw string
}

// String is the URI as it may be shown: user info and query values
// (signed URLs carry signatures there) are left out.
func (l Location) String() string { return Redact(l.raw) }

// Error is a storage URI that Parse refuses. Its fields are kept apart so
// that each caller can word the failure for its reader: the fetcher as a
// termination message, the values as a problem with a spec field.
type Error struct {
	// URI is the refused URI, redacted: it may be shown.
	URI string
	// Problem says what is wrong, e.g. "no bucket".
	Problem string
}

func (e *Error) Error() string { return fmt.Sprintf("%q: ", e.URI) + e.Problem }

// Parse parses a model's storage URI: s3://bucket/prefix,
// gs://bucket/prefix,
// https://<account>.blob.core.windows.net/container/prefix (Azure; or
// abfss://container@<account>.dfs.core.windows.net/prefix, wasbs://...),
// http(s)://host/path[#sha256=hex], pvc://claim/path,
// oci://registry/repository[:tag][@digest],
// hf://owner/repo[@revision][/path], or an absolute directory path. A URI
// it refuses yields an *Error.
func Parse(raw string) (Location, error) {
	raw = strings.TrimSpace(raw)
	invalid := func(format string, args ...any) (Location, error) { return refuse(raw, format, args...) }
	if raw == "" {
		return invalid("empty storage URI")
	}
	if strings.HasPrefix(raw, "/") {
		clean := filepath.Clean(raw)
		return Location{Scheme: SchemeLocal, Path: clean, raw: raw}, nil
	}
	scheme, ref, ok := strings.Cut(raw, "://")
	if ok && strings.EqualFold(scheme, string(SchemeOCI)) {
		if problem := checkReference(ref); problem != "" {
			return invalid("%s", problem)
		}
		return Location{Scheme: SchemeOCI, Reference: ref, raw: raw}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return invalid("not a URI")
	}
	loc := Location{Scheme: Scheme(strings.ToLower(u.Scheme)), raw: raw}
	if loc.SHA256, ok = pinnedChecksum(u.Fragment); !ok {
		return invalid("the fragment must be #sha256=<64 hex digits>")
	}
	switch loc.Scheme {
	case SchemeS3, SchemeGCS:
		if u.Host == "" {
			return invalid("no bucket")
		}
		if u.User != nil || u.RawQuery != "" {
			return invalid("user info and query parameters are not supported; put credentials in the credentials Secret")
		}
		loc.Bucket = u.Host
		loc.Prefix = strings.Trim(u.Path, "/")
		if loc.Prefix != "" && !SafeRelPath(loc.Prefix) {
			return invalid("the object prefix has empty, . or .. segments")
		}
	case schemeABFSS, schemeWASBS:
		return parseHadoopAzure(u, loc)
	case SchemeHTTPS:
		if m := azureHost.FindStringSubmatch(strings.ToLower(u.Host)); m != nil {
			return parseAzure(u, loc, m[1])
		}
		fallthrough
	case SchemeHTTP:
		if u.Host == "" {
			return invalid("no host")
		}
		if u.User != nil {
			return invalid("user info in the URL is not supported; put an Authorization header in the credentials Secret's http-headers")
		}
		if path.Base(u.Path) == "/" || path.Base(u.Path) == "." || strings.HasSuffix(u.Path, "/") {
			return invalid("the URL must name a file or an archive (.tar, .tar.gz, .tgz, .zip)")
		}
		req := *u
		req.Fragment, req.RawFragment = "", ""
		loc.URL = &req
	case SchemeHF:
		return parseHF(u, loc)
	case SchemePVC:
		if u.Host == "" {
			return invalid("no claim name")
		}
		loc.Claim = u.Host
		loc.Path = strings.Trim(u.Path, "/")
		if loc.SHA256 != "" {
			return invalid("#sha256 applies to a download, not to a pvc:// model")
		}
	default:
		return invalid("unsupported scheme %q: want s3://, gs://, http(s)://, abfss://, wasbs://, hf://, pvc://, oci:// or an absolute path", u.Scheme)
	}
	return loc, nil
}

// refuse is the *Error of the URI raw, which Parse refuses for what
// format and args say.
func refuse(raw, format string, args ...any) (Location, error) {
	return Location{}, &Error{URI: Redact(raw), Problem: fmt.Sprintf(format, args...)}
}

// azureHost matches the blob endpoint of a storage account in Azure's
// public, China and US Government clouds, or in an Azure DNS zone, and
// its read-only secondary (<account>-secondary), or the account's Data
// Lake Storage (dfs) endpoint in those places: the account is the first
// group.
var azureHost = regexp.MustCompile(`^([a-z0-9]{3,24})(?:-secondary)?\.(?:(?:blob|dfs)\.core\.(?:windows\.net|chinacloudapi\.cn|usgovcloudapi\.net)|z[0-9]{2}\.(?:blob|dfs)\.storage\.azure\.net)$`)

// isHadoopAzure says that scheme is one of the Hadoop forms of an Azure
// URI, whose user info is the container.
func isHadoopAzure(scheme string) bool {
	scheme = strings.ToLower(scheme)
	return scheme == schemeABFSS || scheme == schemeWASBS
}

// parseHadoopAzure reads an abfss:// or wasbs:// URI,
// <container>@<account host>[/prefix], as the https:// URI of the same
// container and prefix at the account's blob endpoint: an account with a
// hierarchical namespace (Data Lake Storage Gen2) serves its files through
// the Blob API too, and its directories are left out of the listing.
func parseHadoopAzure(u *url.URL, loc Location) (Location, error) {
	invalid := func(format string, args ...any) (Location, error) { return refuse(loc.raw, format, args...) }
	want := fmt.Sprintf("want %s://<container>@<account>.%s.core.windows.net[/path]", loc.Scheme, map[Scheme]string{schemeABFSS: "dfs", schemeWASBS: "blob"}[loc.Scheme])
	host := strings.ToLower(u.Host)
	m := azureHost.FindStringSubmatch(host)
	switch {
	case u.User == nil || u.User.Username() == "":
		return invalid("no container: %s", want)
	case m == nil:
		return invalid("%q is not a storage account's endpoint: %s", u.Host, want)
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		return invalid("a password is not supported; put credentials in the credentials Secret")
	}
	// parseAzure turns a dfs host into its account's blob endpoint.
	endpoint := &url.URL{Scheme: "https", Host: host, Path: "/" + u.User.Username() + u.Path, RawQuery: u.RawQuery}
	return parseAzure(endpoint, loc, m[1])
}

// azureContainer is an Azure container's name: 3 to 63 lower-case
// letters, digits and single hyphens, starting and ending with a letter
// or digit; or $root.
var azureContainer = regexp.MustCompile(`^([a-z0-9]+(-[a-z0-9]+)*|\$root)$`)

// parseAzure reads an Azure Blob Storage URI: the container and the blob
// prefix from its path, the container's URL at the account's blob
// endpoint (a dfs host's too). Credentials, a shared access signature among
// them, are the credentials Secret's: the ModelServer's spec is no place
// for a secret (nor does its schema admit a query's '&').
func parseAzure(u *url.URL, loc Location, account string) (Location, error) {
	invalid := func(format string, args ...any) (Location, error) { return refuse(loc.raw, format, args...) }
	if u.User != nil {
		return invalid("user info is not supported; put credentials in the credentials Secret")
	}
	if u.RawQuery != "" {
		return invalid("an Azure Blob Storage URI takes no query: put a shared access signature in the credentials Secret's AZURE_STORAGE_SAS_TOKEN")
	}
	container, prefix, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if container == "" {
		return invalid("no container: want https://<account>.blob.core.windows.net/<container>[/prefix]")
	}
	if !azureContainer.MatchString(container) || len(container) < 3 || len(container) > 63 {
		return invalid("%q is not a container name: 3 to 63 lower-case letters, digits and single hyphens", container)
	}
	loc.Scheme, loc.Account, loc.Bucket = SchemeAzure, account, container
	loc.Prefix = strings.Trim(prefix, "/")
	if loc.Prefix != "" && !SafeRelPath(loc.Prefix) {
		return invalid("the blob prefix has empty, . or .. segments")
	}
	req := *u
	if host := strings.ToLower(u.Host); strings.Contains(host, ".dfs.") {
		req.Host = strings.Replace(host, ".dfs.", ".blob.", 1)
	}
	req.Path, req.RawPath = "/"+container, ""
	req.Fragment, req.RawFragment = "", ""
	loc.URL = &req
	return loc, nil
}

// pinnedChecksum reads a URI's fragment: none, or #sha256=<hex>, which
// pins the sha256 of a download (returned in lower case).
func pinnedChecksum(fragment string) (string, bool) {
	if fragment == "" {
		return "", true
	}
	sum, ok := strings.CutPrefix(fragment, "sha256=")
	sum = strings.ToLower(sum)
	if b, err := hex.DecodeString(sum); !ok || err != nil || len(b) != 32 {
		return "", false
	}
	return sum, true
}

// The grammar of an image reference (the distribution project's), in
// parts: a registry host with an optional port, path components of
// lower-case letters and digits joined by separators, a tag, a digest.
var (
	registryHost    = regexp.MustCompile(`^([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:.]+\])(:[0-9]{1,5})?$`)
	repositoryPath  = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)
	referenceTag    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	referenceDigest = regexp.MustCompile(`^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$`)
)

// CheckRepository says what is wrong with an image repository,
// registry/repository with neither tag nor digest, or "" when nothing is.
func CheckRepository(repo string) string {
	if problem := checkReference(repo); problem != "" {
		return problem
	}
	if _, path, _ := strings.Cut(repo, "/"); strings.ContainsAny(path, ":@") {
		return "a repository takes neither tag nor digest: want <registry>/<repository>"
	}
	return ""
}

// checkReference says what is wrong with the image reference of an oci://
// URI, or "" when nothing is. The registry is required: an oci:// model
// names where it is, with no default registry to guess.
func checkReference(ref string) string {
	if i := strings.IndexAny(ref, "?#"); i >= 0 {
		return "an oci:// reference takes no query or fragment; pin the model with @sha256:<digest>"
	}
	registry, rest, ok := strings.Cut(ref, "/")
	switch {
	case registry == "":
		return "no registry: want oci://<registry>/<repository>[:tag][@digest]"
	case strings.Contains(registry, "@"):
		return "user info in the reference is not supported; put a .dockerconfigjson in the credentials Secret"
	case !registryHost.MatchString(registry):
		return fmt.Sprintf("%q is not a registry host[:port]", registry)
	case !strings.ContainsAny(registry, ".:") && registry != "localhost":
		// Image tools read a first part without a dot or a port as a
		// Docker Hub repository: the model would come from elsewhere.
		return fmt.Sprintf("%q is not a registry host: a registry's name has a dot or a port (registry.local, registry:5000) or is localhost", registry)
	case !ok || rest == "":
		return "no repository: want oci://<registry>/<repository>[:tag][@digest]"
	}
	name, digest, pinned := strings.Cut(rest, "@")
	if pinned && !referenceDigest.MatchString(digest) {
		return "the digest must be sha256:<64 lower-case hex digits> (or sha512:<128>)"
	}
	repo, tag := name, ""
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		repo, tag = name[:i], name[i+1:]
		if !referenceTag.MatchString(tag) {
			return fmt.Sprintf("%q is not a tag: up to 128 letters, digits, _, . and -, not starting with . or -", tag)
		}
	}
	if !repositoryPath.MatchString(repo) {
		return fmt.Sprintf("%q is not a repository: lower-case letters and digits in /-separated parts, joined by ., _, __ or -", repo)
	}
	return ""
}

// Redact drops user info and query values from a URI before it is shown
// (in a log, a termination message, a status or an Event): credentials
// and the signatures of signed URLs live there. A URI that does not parse
// is cut before its first ? or @, where they would begin, and what comes
// between its scheme and an @ (user info) is left out.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	// An opaque URI (scheme:rest, no //) keeps user info in its opaque part.
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		i := strings.IndexAny(raw, "?@")
		if i < 0 {
			return raw
		}
		head := raw[:i]
		if raw[i] == '@' {
			head = "REDACTED"
			if scheme, _, ok := strings.Cut(raw[:i], "://"); ok {
				head = scheme + "://REDACTED"
			}
		}
		return head + "…"
	}
	switch _, password := u.User.Password(); {
	case u.User == nil:
	case isHadoopAzure(u.Scheme) && !password:
		// The container, not a credential.
	case isHadoopAzure(u.Scheme):
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
	default:
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"REDACTED"}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// SafeRelPath tells whether p is a relative slash-separated path without
// empty, "." or ".." segments: one that stays inside the directory it is
// joined to. The fetcher holds object keys to it as well as prefixes.
func SafeRelPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// Registry is an oci:// source's registry, host[:port]; "" for another
// scheme.
func (l Location) Registry() string {
	registry, _, _ := strings.Cut(l.Reference, "/")
	return registry
}

// googleRegistry is Artifact Registry's Docker hosts, <location>-docker.pkg.dev,
// and Container Registry's, gcr.io and <region>.gcr.io.
var googleRegistry = regexp.MustCompile(`^([a-z0-9-]+-docker\.pkg\.dev|([a-z]+\.)?gcr\.io)$`)

// GoogleRegistry says that registry is Google's (Artifact Registry,
// Container Registry): the only registries a fetch gives the tokens of
// GKE's metadata server to.
func GoogleRegistry(registry string) bool { return googleRegistry.MatchString(registry) }

// hfName is a Hugging Face user's, organization's or repository's name.
var hfName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,94}[A-Za-z0-9])?$`)

// parseHF reads hf://<owner>/<repo>[@<revision>][/<path>]. A revision
// with a slash (refs/pr/1) is written escaped, refs%2Fpr%2F1, as
// huggingface_hub writes it.
func parseHF(u *url.URL, loc Location) (Location, error) {
	invalid := func(format string, args ...any) (Location, error) { return refuse(loc.raw, format, args...) }
	const want = "want hf://<owner>/<repo>[@<revision>][/<path>]"
	switch {
	case u.User != nil || u.RawQuery != "":
		return invalid("user info and query parameters are not supported; put a token in the credentials Secret's HF_TOKEN")
	case loc.SHA256 != "":
		return invalid("#sha256 pins a download, not a repository: pin a commit with @<revision>")
	}
	repoRev, rest, _ := strings.Cut(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	repo, rev, hasRev := strings.Cut(repoRev, "@")
	switch {
	case strings.EqualFold(u.Host, "datasets") || strings.EqualFold(u.Host, "spaces"):
		// huggingface_hub's prefixes of those kinds of repository.
		return invalid("hf://%s/ names a %s repository, not a model's: %s", u.Host, strings.TrimSuffix(strings.ToLower(u.Host), "s"), want)
	case !hfName.MatchString(u.Host) || !hfName.MatchString(repo):
		return invalid("%s (a repository of the Hub has an owner)", want)
	}
	var err error
	loc.Repo, loc.Revision = u.Host+"/"+repo, "main"
	if hasRev {
		if loc.Revision, err = url.PathUnescape(rev); err != nil || loc.Revision == "" {
			return invalid("an empty or badly escaped revision: %s", want)
		}
	}
	if loc.Prefix, err = url.PathUnescape(strings.Trim(rest, "/")); err != nil {
		return invalid("a badly escaped path: %s", want)
	}
	if loc.Prefix != "" && !SafeRelPath(loc.Prefix) {
		return invalid("the path in the repository has empty, . or .. segments")
	}
	return loc, nil
}
