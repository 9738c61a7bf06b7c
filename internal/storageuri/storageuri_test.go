package storageuri

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseAcceptsEveryScheme(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for raw, want := range map[string]Location{
		"s3://models/resnet/":   {Scheme: SchemeS3, Bucket: "models", Prefix: "resnet"},
		"s3://models":           {Scheme: SchemeS3, Bucket: "models"},
		"  s3://models/r  ":     {Scheme: SchemeS3, Bucket: "models", Prefix: "r"},
		"S3://models/r":         {Scheme: SchemeS3, Bucket: "models", Prefix: "r"},
		"gs://b/a/b/c":          {Scheme: SchemeGCS, Bucket: "b", Prefix: "a/b/c"},
		"pvc://claim/team/m":    {Scheme: SchemePVC, Claim: "claim", Path: "team/m"},
		"pvc://claim":           {Scheme: SchemePVC, Claim: "claim"},
		"/srv/models/../resnet": {Scheme: SchemeLocal, Path: "/srv/resnet"},
		"s3://b/m.tar.gz#sha256=" + strings.ToUpper(sum): {Scheme: SchemeS3, Bucket: "b", Prefix: "m.tar.gz", SHA256: sum},
		"oci://ghcr.io/team/resnet:v3":                   {Scheme: SchemeOCI, Reference: "ghcr.io/team/resnet:v3"},
		"OCI://127.0.0.1:5000/resnet":                    {Scheme: SchemeOCI, Reference: "127.0.0.1:5000/resnet"},
		"oci://[::1]:5000/a/b__c/d-e.f":                  {Scheme: SchemeOCI, Reference: "[::1]:5000/a/b__c/d-e.f"},
		"oci://r.example/m:v1@sha256:" + sum:             {Scheme: SchemeOCI, Reference: "r.example/m:v1@sha256:" + sum},
		"oci://r.example/m@sha256:" + sum:                {Scheme: SchemeOCI, Reference: "r.example/m@sha256:" + sum},
		"hf://keras-io/ocr-for-captcha":                  {Scheme: SchemeHF, Repo: "keras-io/ocr-for-captcha", Revision: "main"},
		"hf://Org_1/m.v2@v1.0/saved/":                    {Scheme: SchemeHF, Repo: "Org_1/m.v2", Revision: "v1.0", Prefix: "saved"},
		"HF://o/r@refs%2Fpr%2F3/a%20b/c":                 {Scheme: SchemeHF, Repo: "o/r", Revision: "refs/pr/3", Prefix: "a b/c"},
		"hf://o/r@" + sum[:40] + "/m.tar.gz":             {Scheme: SchemeHF, Repo: "o/r", Revision: sum[:40], Prefix: "m.tar.gz"},
	} {
		got, err := Parse(raw)
		if err != nil {
			t.Errorf("Parse(%q): %v", raw, err)
			continue
		}
		got.raw = ""
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Parse(%q) = %+v; want %+v", raw, got, want)
		}
	}

	h, err := Parse("https://h.example/m.tgz?X-Amz-Signature=abc#sha256=" + sum)
	if err != nil || h.Scheme != SchemeHTTPS || h.URL.String() != "https://h.example/m.tgz?X-Amz-Signature=abc" || h.SHA256 != sum {
		t.Errorf("https: %+v, %v", h, err)
	}
	if strings.Contains(h.String(), "abc") {
		t.Errorf("String() %q shows a query value", h.String())
	}
	if p, err := Parse("http://h:8080/models/m.zip"); err != nil || p.Scheme != SchemeHTTP || p.URL.Host != "h:8080" {
		t.Errorf("http: %+v, %v", p, err)
	}
}

func TestParseReadsAnAzureBlobStorageURI(t *testing.T) {
	for _, c := range []struct {
		raw, account, container, prefix, url string
	}{
		{"https://models.blob.core.windows.net/team/resnet/", "models", "team", "resnet", "https://models.blob.core.windows.net/team"},
		{"https://Models.Blob.Core.Windows.Net/team", "models", "team", "", "https://Models.Blob.Core.Windows.Net/team"},
		{"https://models.blob.core.windows.net/team/a%20b/c", "models", "team", "a b/c", "https://models.blob.core.windows.net/team"},
		{"https://acct-secondary.blob.core.windows.net/t-1/m", "acct", "t-1", "m", "https://acct-secondary.blob.core.windows.net/t-1"},
		{"https://acct.blob.core.chinacloudapi.cn/t01/m", "acct", "t01", "m", "https://acct.blob.core.chinacloudapi.cn/t01"},
		{"https://acct.blob.core.usgovcloudapi.net/t01/m", "acct", "t01", "m", "https://acct.blob.core.usgovcloudapi.net/t01"},
		{"https://acct.z07.blob.storage.azure.net/t01/m", "acct", "t01", "m", "https://acct.z07.blob.storage.azure.net/t01"},
		{"https://acct.blob.core.windows.net/$root/m.tgz", "acct", "$root", "m.tgz", "https://acct.blob.core.windows.net/$root"},
		// Data Lake Storage Gen2, read at the account's blob endpoint.
		{"https://models.dfs.core.windows.net/team/resnet", "models", "team", "resnet", "https://models.blob.core.windows.net/team"},
		{"abfss://team@models.dfs.core.windows.net/resnet/", "models", "team", "resnet", "https://models.blob.core.windows.net/team"},
		{"abfss://team@models.dfs.core.windows.net", "models", "team", "", "https://models.blob.core.windows.net/team"},
		{"ABFSS://team@Models.DFS.Core.Windows.Net/a%20b", "models", "team", "a b", "https://models.blob.core.windows.net/team"},
		{"abfss://t01@acct.dfs.core.chinacloudapi.cn/m", "acct", "t01", "m", "https://acct.blob.core.chinacloudapi.cn/t01"},
		{"abfss://t01@acct.z07.dfs.storage.azure.net/m", "acct", "t01", "m", "https://acct.z07.blob.storage.azure.net/t01"},
		{"wasbs://team@models.blob.core.windows.net/resnet/v1", "models", "team", "resnet/v1", "https://models.blob.core.windows.net/team"},
		{"wasbs://team@models.blob.core.usgovcloudapi.net/m", "models", "team", "m", "https://models.blob.core.usgovcloudapi.net/team"},
	} {
		got, err := Parse(c.raw)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.raw, err)
			continue
		}
		if got.Scheme != SchemeAzure || got.Account != c.account || got.Bucket != c.container || got.Prefix != c.prefix || got.URL.String() != c.url {
			t.Errorf("Parse(%q) = %s %q %q %q %s; want azure %q %q %q %s", c.raw, got.Scheme, got.Account, got.Bucket, got.Prefix, got.URL, c.account, c.container, c.prefix, c.url)
		}
	}
	// Another host, or a port, is a plain download; so is http://, which
	// Azure refuses where secure transfer is required (the default).
	for _, raw := range []string{"https://acct.blob.core.windows.net.example/t/m.tgz", "https://acct.blob.core.windows.net:8443/t/m.tgz", "http://acct.blob.core.windows.net/t/m.tgz", "https://a.blob.core.windows.net/t/m.tgz"} {
		if got, err := Parse(raw); err != nil || got.Scheme == SchemeAzure {
			t.Errorf("Parse(%q) = %s, %v; want a download", raw, got.Scheme, err)
		}
	}
}

func TestParseRefusesWhatCannotBeFetched(t *testing.T) {
	hex64 := strings.Repeat("0", 64)
	for raw, problem := range map[string]string{
		"":                                          "empty storage URI",
		"  ":                                        "empty storage URI",
		"relative/path":                             "unsupported scheme \"\"",
		"ftp://h/m":                                 "unsupported scheme \"ftp\"",
		"s3://b/%zz":                                "not a URI",
		"https://x/y#sha256=zz":                     "the fragment must be #sha256=<64 hex digits>",
		"https://x/y#sha256=" + hex64[:63]:          "the fragment must be #sha256=<64 hex digits>",
		"https://x/y#sha256=" + hex64 + "0":         "the fragment must be #sha256=<64 hex digits>",
		"https://x/y#sha256=":                       "the fragment must be #sha256=<64 hex digits>",
		"https://x/y#md5=" + hex64[:32]:             "the fragment must be #sha256=<64 hex digits>",
		"s3://":                                     "no bucket",
		"gs:///prefix":                              "no bucket",
		"s3://user:pw@b/p":                          "user info and query parameters are not supported",
		"s3://b/p?versionId=1":                      "user info and query parameters are not supported",
		"s3://b/a/../b":                             "the object prefix has empty, . or .. segments",
		"s3://m/a//b":                               "the object prefix has empty, . or .. segments",
		"gs://m/./b":                                "the object prefix has empty, . or .. segments",
		"https:///m.tgz":                            "no host",
		"https://user:pw@h/m.tgz":                   "user info in the URL is not supported",
		"https://h/dir/":                            "the URL must name a file or an archive",
		"https://h":                                 "the URL must name a file or an archive",
		"http://h/":                                 "the URL must name a file or an archive",
		"pvc://":                                    "no claim name",
		"hf://gpt2":                                 "want hf://<owner>/<repo>[@<revision>][/<path>] (a repository of the Hub has an owner)",
		"hf://o/-r":                                 "want hf://<owner>/<repo>",
		"hf:///r":                                   "want hf://<owner>/<repo>",
		"hf://o/r@":                                 "an empty or badly escaped revision",
		"hf://datasets/o/r":                         "hf://datasets/ names a dataset repository, not a model's",
		"hf://o/r/a/../b":                           "the path in the repository has empty, . or .. segments",
		"hf://tok@o/r":                              "user info and query parameters are not supported; put a token in the credentials Secret's HF_TOKEN",
		"hf://o/r?revision=main":                    "user info and query parameters are not supported; put a token in the credentials Secret's HF_TOKEN",
		"hf://o/r/m.tgz#sha256=" + hex64:            "#sha256 pins a download, not a repository",
		"pvc://claim/m#sha256=" + hex64:             "#sha256 applies to a download, not to a pvc:// model",
		"https://h/m.tgz?sig=secret#md5=abc":        "the fragment must be",
		"oci://":                                    "no registry",
		"oci:///m:v1":                               "no registry",
		"oci://r.example":                           "no repository",
		"oci://r.example/":                          "no repository",
		"oci://user:pw@r.example/m":                 "user info in the reference is not supported",
		"oci://r_x.example/m":                       "\"r_x.example\" is not a registry host[:port]",
		"oci://r.example:port/m":                    "\"r.example:port\" is not a registry host[:port]",
		"oci://r.example/Resnet":                    "\"Resnet\" is not a repository",
		"oci://r.example/a//b":                      "\"a//b\" is not a repository",
		"oci://r.example/m:-v1":                     "\"-v1\" is not a tag",
		"oci://r.example/m:":                        "\"\" is not a tag",
		"oci://r.example/m@sha256:" + hex64[:63]:    "the digest must be sha256:",
		"oci://r.example/m@md5:" + hex64[:32]:       "the digest must be sha256:",
		"oci://r.example/m:v1#sha256=" + hex64:      "an oci:// reference takes no query or fragment",
		"oci://r.example/m?sig=secret":              "an oci:// reference takes no query or fragment",
		"https://acct.blob.core.windows.net":        "no container",
		"https://acct.blob.core.windows.net/":       "no container",
		"https://acct.blob.core.windows.net/Team/m": "\"Team\" is not a container name",
		"https://acct.blob.core.windows.net/a--b/m": "\"a--b\" is not a container name",
		"https://acct.blob.core.windows.net/t01/a/../b":            "the blob prefix has empty, . or .. segments",
		"https://acct.blob.core.windows.net/t01/m?sv=1&sig=secret": "an Azure Blob Storage URI takes no query: put a shared access signature in the credentials Secret's AZURE_STORAGE_SAS_TOKEN",
		"https://acct.blob.core.windows.net/ab/m":                  "\"ab\" is not a container name",
		"https://user:pw@acct.blob.core.windows.net/t01/m":         "user info is not supported",
		"abfss://acct.dfs.core.windows.net/m":                      "no container: want abfss://<container>@<account>.dfs.core.windows.net[/path]",
		"wasbs://@acct.blob.core.windows.net/m":                    "no container: want wasbs://<container>@<account>.blob.core.windows.net[/path]",
		"abfss://t01:key@acct.dfs.core.windows.net/m":              "a password is not supported",
		"abfss://t01@acct.example.com/m":                           "\"acct.example.com\" is not a storage account's endpoint",
		"wasbs://t01@acct.blob.core.windows.net:443/m":             "\"acct.blob.core.windows.net:443\" is not a storage account's endpoint",
		"abfss://Team@acct.dfs.core.windows.net/m":                 "\"Team\" is not a container name",
		"abfss://t01@acct.dfs.core.windows.net/a/../b":             "the blob prefix has empty, . or .. segments",
		"abfss://t01@acct.dfs.core.windows.net/m?sv=1&sig=secret":  "an Azure Blob Storage URI takes no query",
		"abfs://t01@acct.dfs.core.windows.net/m":                   "unsupported scheme \"abfs\"",
	} {
		_, err := Parse(raw)
		var ue *Error
		if !errors.As(err, &ue) {
			t.Errorf("Parse(%q) = %v; want an *Error", raw, err)
			continue
		}
		if !strings.HasPrefix(ue.Problem, problem) {
			t.Errorf("Parse(%q): problem %q; want %q", raw, ue.Problem, problem)
		}
		if want := fmt.Sprintf("%q: %s", ue.URI, ue.Problem); err.Error() != want {
			t.Errorf("Parse(%q): %q; want %q", raw, err, want)
		}
		if strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "secret") {
			t.Errorf("Parse(%q) shows a secret: %v", raw, err)
		}
	}
}

func TestRedactHidesCredentials(t *testing.T) {
	for in, want := range map[string]string{
		"s3://models/resnet": "s3://models/resnet",
		"https://user:pw@host/m.tgz?X-Amz-Signature=abc&X-Amz-Date=1#sha256=00": "https://REDACTED@host/m.tgz?X-Amz-Date=REDACTED&X-Amz-Signature=REDACTED#sha256=00",
		"pvc://claim/path":            "pvc://claim/path",
		"/srv/models":                 "/srv/models",
		"s3://b/%zz?sig=abc":          "s3://b/%zz…",
		"host/m.tgz?sig=abc":          "host/m.tgz…",
		"s3://b@h/%zz":                "s3://REDACTED…",
		"https://user:pw@h/%zz":       "https://REDACTED…",
		"user:pw@h/%zz":               "REDACTED…",
		"https://h/m.tgz?no-value":    "https://h/m.tgz?no-value=REDACTED",
		"https://h/m.tgz?a=1&a=2&b=3": "https://h/m.tgz?a=REDACTED&b=REDACTED",
		// The user info of abfss:// and wasbs:// is the container.
		"abfss://team@acct.dfs.core.windows.net/m":      "abfss://team@acct.dfs.core.windows.net/m",
		"wasbs://team:key@acct.blob.core.windows.net/m": "wasbs://team:REDACTED@acct.blob.core.windows.net/m",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSafeRelPath(t *testing.T) {
	for p, want := range map[string]bool{
		"a": true, "a/b.pb": true, "1/variables/variables.index": true, "..a/b..": true,
		"": false, "/a": false, "a/": false, "a//b": false, "./a": false, "a/..": false, "a/../b": false, "a\x00b": false,
	} {
		if got := SafeRelPath(p); got != want {
			t.Errorf("SafeRelPath(%q) = %v; want %v", p, got, want)
		}
	}
}
