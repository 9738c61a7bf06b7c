package fetch

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// Keys of the credentials Secret, one file each in --credentials-dir.
const (
	KeyAWSAccessKeyID       = "AWS_ACCESS_KEY_ID"
	KeyAWSSecretAccessKey   = "AWS_SECRET_ACCESS_KEY"
	KeyAWSSessionToken      = "AWS_SESSION_TOKEN"
	KeyAWSEndpointURL       = "AWS_ENDPOINT_URL"
	KeyAWSRegion            = "AWS_REGION"
	KeyAWSForcePathStyle    = "AWS_S3_FORCE_PATH_STYLE"
	KeyAWSCABundle          = "AWS_CA_BUNDLE"
	KeyAWSInsecureSkipTLS   = "AWS_INSECURE_SKIP_TLS_VERIFY"
	KeyGCSServiceAccount    = "service-account.json"
	KeyGCSEndpointURL       = "GCS_ENDPOINT_URL"
	KeyHTTPHeaders          = "http-headers"
	maxCredentialFileLength = 1 << 20
)

// secretKeys are the keys whose values must never be shown: in messages,
// logs or the termination message.
var secretKeys = []string{KeyAWSAccessKeyID, KeyAWSSecretAccessKey, KeyAWSSessionToken, KeyGCSServiceAccount, KeyHTTPHeaders, KeyDockerConfigJSON,
	KeyAzureAccessKey, KeyAzureSASToken, KeyAzureClientSecret, KeyHFToken}

// Credentials are the files of a mounted Secret, by key.
type Credentials struct {
	values  map[string]string
	secrets []string
}

// LoadCredentials reads every key of a mounted Secret from dir; an empty
// dir gives no credentials. Kubernetes' own entries (..data and the like)
// are skipped.
func LoadCredentials(dir string) (Credentials, error) {
	c := Credentials{values: map[string]string{}}
	if dir == "" {
		return c, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return c, &Error{Reason: servingv1alpha1.ReasonAccessDenied, Message: fmt.Sprintf("read the credentials directory %s: %v", dir, unwrapPathError(err)), Permanent: true, Err: err}
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..") {
			continue
		}
		p := filepath.Join(dir, name)
		st, err := os.Stat(p) // Secret keys are symbolic links into ..data
		if err != nil || !st.Mode().IsRegular() || st.Size() > maxCredentialFileLength {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return c, &Error{Reason: servingv1alpha1.ReasonAccessDenied, Message: fmt.Sprintf("read the credentials key %s: %v", name, unwrapPathError(err)), Permanent: true, Err: err}
		}
		c.values[name] = string(b)
	}
	c.secrets = secretValues(c.values)
	return c, nil
}

// Get returns a key's value, without surrounding white space.
func (c Credentials) Get(key string) string { return strings.TrimSpace(c.values[key]) }

// Has tells whether the Secret has key.
func (c Credentials) Has(key string) bool { _, ok := c.values[key]; return ok }

// Redact replaces every secret value in s.
func (c Credentials) Redact(s string) string {
	for _, v := range c.secrets {
		s = strings.ReplaceAll(s, v, "REDACTED")
	}
	return s
}

// secretValues lists what Redact hides: each secret key's value, its
// lines, the values of its header lines and of a service account key's
// private fields, longest first so that no part of a longer secret stays.
func secretValues(values map[string]string) []string {
	set := secretSet{}
	for _, k := range secretKeys {
		v, ok := values[k]
		if !ok {
			continue
		}
		set.add(v)
		set.addLines(v)
		switch k {
		case KeyHTTPHeaders:
			set.addHeaderValues(v)
		case KeyGCSServiceAccount:
			set.addServiceAccountFields(v)
		case KeyDockerConfigJSON:
			set.addDockerConfigFields(v, k)
		case KeyAzureSASToken:
			set.addSignature(v)
		}
	}
	return set.longestFirst()
}

func (s secretSet) longestFirst() []string {
	out := make([]string, 0, len(s))
	for v := range s {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// secretSet collects the strings Redact hides. Shorter than 4 characters,
// a string would hide innocent text; a line or word of one must be 8.
type secretSet map[string]bool

func (s secretSet) add(v string) {
	if v = strings.TrimSpace(v); len(v) >= 4 {
		s[v] = true
	}
}

func (s secretSet) addLines(v string) {
	for _, line := range strings.Split(v, "\n") {
		if len(strings.TrimSpace(line)) >= 8 {
			s.add(line)
		}
	}
}

// addHeaderValues adds the value of each "Name: value" line, and each of
// its words: an Authorization header's token without its scheme.
func (s secretSet) addHeaderValues(v string) {
	for _, line := range strings.Split(v, "\n") {
		_, hv, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		s.add(hv)
		for _, f := range strings.Fields(hv) {
			if len(f) >= 8 {
				s.add(f)
			}
		}
	}
}

// addServiceAccountFields adds the private fields of a service account
// key, and their lines (a PEM key is shown line by line in some errors).
func (s secretSet) addServiceAccountFields(v string) {
	var key map[string]any
	if json.Unmarshal([]byte(v), &key) != nil {
		return
	}
	for _, f := range []string{"private_key", "private_key_id", "client_secret", "refresh_token"} {
		field, ok := key[f].(string)
		if !ok {
			continue
		}
		s.add(field)
		for _, line := range strings.Split(field, "\n") {
			if len(line) >= 8 {
				s.add(line)
			}
		}
	}
}

// addSignature adds a SAS's signature as it reads, decoded, and encoded as
// a client re-encodes it in a request's URL.
func (s secretSet) addSignature(sas string) {
	q, err := url.ParseQuery(strings.TrimPrefix(strings.TrimSpace(sas), "?"))
	if err != nil {
		return
	}
	if sig := q.Get("sig"); sig != "" {
		s.add(sig)
		s.add(url.QueryEscape(sig))
	}
}

// hidePullSecrets adds the image pull secrets' docker configs to what
// Redact hides.
func (c *Credentials) hidePullSecrets(pulls []loadedPullSecret) {
	set := secretSet{}
	for _, v := range c.secrets {
		set[v] = true
	}
	for _, p := range pulls {
		set.add(p.raw)
		set.addLines(p.raw)
		set.addDockerConfigFields(p.raw, p.key)
	}
	c.secrets = set.longestFirst()
}

// addDockerConfigFields adds each registry's secret fields: its auth (the
// base64 of user:password), password and tokens. key says the config's
// form: a .dockerconfigjson or a .dockercfg.
func (s secretSet) addDockerConfigFields(v, key string) {
	auths, ok := parseDockerConfig(v, key)
	if !ok {
		return
	}
	for _, a := range auths {
		for _, field := range []string{a.Auth, a.Password, a.IdentityToken, a.RegistryToken} {
			s.add(field)
		}
	}
}

// parseHeaders reads http-headers: lines of "Name: value"; blank lines and
// lines starting with # are skipped.
func parseHeaders(text string) ([][2]string, error) {
	var out [][2]string
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			// The line is not shown: it may hold a secret.
			return nil, permanentf(servingv1alpha1.ReasonFetchFailed, "credentials key %s: line %d is not \"Name: value\"", KeyHTTPHeaders, i+1)
		}
		out = append(out, [2]string{name, strings.TrimSpace(value)})
	}
	return out, nil
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// CheckCredentialKeys says what is wrong with a credentials Secret that has
// keys for fetching from uri, or "" if nothing is: a Secret none of whose
// keys the scheme reads, or an S3 key pair with one half missing, would
// only fail the fetch later with a less clear message, and so is one with
// keys for a model whose fetch assumes a role (webIdentity). It looks at
// key names only, never at values.
func CheckCredentialKeys(uri string, webIdentity bool, keys []string) string {
	has := func(k string) bool { return slices.Contains(keys, k) }
	var read []string
	switch loc, _ := storageuri.Parse(uri); {
	case loc.Scheme == storageuri.SchemeAzure:
		if problem := checkAzureKeys(webIdentity, has); problem != "" {
			return problem
		}
		read = []string{KeyAzureAccessKey, KeyAzureSASToken, KeyAzureTenantID, KeyAzureClientID, KeyAzureClientSecret,
			KeyAzureAuthorityHost, KeyAzureBlobEndpoint, KeyAzureCABundle}
	case strings.HasPrefix(uri, "s3://"):
		if webIdentity && (has(KeyAWSAccessKeyID) || has(KeyAWSSecretAccessKey)) {
			return fmt.Sprintf("spec.model.webIdentity assumes a role with the pods' service account token: the Secret must not hold %s or %s as well", KeyAWSAccessKeyID, KeyAWSSecretAccessKey)
		}
		if has(KeyAWSAccessKeyID) != has(KeyAWSSecretAccessKey) {
			return fmt.Sprintf("for s3:// it needs both %s and %s, or neither", KeyAWSAccessKeyID, KeyAWSSecretAccessKey)
		}
		read = []string{KeyAWSAccessKeyID, KeyAWSSecretAccessKey, KeyAWSSessionToken, KeyAWSEndpointURL, KeyAWSRegion,
			KeyAWSForcePathStyle, KeyAWSCABundle, KeyAWSInsecureSkipTLS, KeyAWSEndpointURLSTS, KeyAWSContainerCredentialsURI}
	case strings.HasPrefix(uri, "gs://"):
		if webIdentity && has(KeyGCSServiceAccount) {
			return fmt.Sprintf("spec.model.webIdentity reads the model without a key: the Secret must not hold %s as well", KeyGCSServiceAccount)
		}
		read = []string{KeyGCSServiceAccount, KeyGCSEndpointURL, KeyGCPSTSEndpointURL, KeyGCPIAMEndpointURL, KeyGCEMetadataHost}
	case strings.HasPrefix(uri, "http://"), strings.HasPrefix(uri, "https://"):
		read = []string{KeyHTTPHeaders}
	case loc.Scheme == storageuri.SchemeHF:
		read = []string{KeyHFToken, KeyHFEndpoint, KeyAWSCABundle}
	case strings.HasPrefix(strings.ToLower(uri), "oci://"):
		read = []string{KeyDockerConfigJSON, KeyCACert, KeyPlainHTTP, KeyGCEMetadataHost}
	default:
		return ""
	}
	if slices.ContainsFunc(read, has) {
		return ""
	}
	shown := slices.Sorted(slices.Values(keys))
	if len(shown) > 10 {
		shown = append(shown[:10], "...")
	}
	return fmt.Sprintf("it has none of the keys read for this URI (%s); its keys: [%s]",
		strings.Join(read, ", "), strings.Join(shown, ", "))
}

// checkAzureKeys says what is wrong with the keys of an Azure model's
// credentials Secret: more than one identity (a key, a SAS, a service
// principal, the webIdentity's application), or a service principal's
// secret without its tenant and client.
func checkAzureKeys(webIdentity bool, has func(string) bool) string {
	var given []string
	for _, k := range []string{KeyAzureAccessKey, KeyAzureSASToken, KeyAzureClientSecret} {
		if has(k) {
			given = append(given, k)
		}
	}
	if webIdentity && len(given) > 0 {
		return fmt.Sprintf("spec.model.webIdentity signs in with the pods' service account token: the model must not be given %s as well", strings.Join(given, " or "))
	}
	if len(given) > 1 {
		return fmt.Sprintf("the model is read with one identity, and it is given %s: keep one", strings.Join(given, " and "))
	}
	if has(KeyAzureClientSecret) && (!has(KeyAzureTenantID) || !has(KeyAzureClientID)) {
		return fmt.Sprintf("%s needs %s and %s beside it", KeyAzureClientSecret, KeyAzureTenantID, KeyAzureClientID)
	}
	return ""
}
