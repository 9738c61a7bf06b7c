package fetch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"golang.org/x/oauth2"

	servingv1alpha1 "github.com/modelserver-dev/modelserver-operator/api/v1alpha1"
	"github.com/modelserver-dev/modelserver-operator/internal/storageuri"
)

// KeyDockerCfg is the key of a kubernetes.io/dockercfg Secret, the older
// form of image pull secret: the registries' map without "auths" around
// it.
const KeyDockerCfg = ".dockercfg"

// PullSecret is one of the serving pods' image pull secrets, mounted for
// an oci:// model's fetch: its registry credentials serve the model's
// registry too, as the kubelet's do for the pods' images.
type PullSecret struct {
	// Name is the Secret's, for messages.
	Name string
	// Dir holds the Secret's .dockerconfigjson or .dockercfg; it is
	// missing when the Secret, or both keys, are (the volume's sources
	// are optional, as a pod's image pull secrets are).
	Dir string
}

// registryAuth is one docker config that registry credentials are read
// from, in the order they are looked in.
type registryAuth struct {
	// from names it in messages: the credentials Secret, or an image pull
	// Secret.
	from  string
	auths map[string]authn.AuthConfig
}

// registryKeychain gives each registry the credentials of the first
// docker config naming it: the credentials Secret's, then the image pull
// secrets' in the pod template's order, as the kubelet tries them.
// Elsewhere, anonymous access.
type registryKeychain struct {
	configs []registryAuth
	// google, if set, gives tokens of GKE's metadata server to Google's
	// registries for which no config has credentials.
	google oauth2.TokenSource
	// missing are image pull secrets with no docker config in the pod:
	// not found, or without either key.
	missing []string
}

func (k registryKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if c := k.configFor(r.RegistryStr()); c != nil {
		return authn.FromConfig(c.auths[r.RegistryStr()]), nil
	}
	if k.google != nil && googleRegistry(r.RegistryStr()) {
		return googleToken{k.google}, nil
	}
	return authn.Anonymous, nil
}

// googleRegistry says that a registry is Google's: tests stand one in.
var googleRegistry = storageuri.GoogleRegistry

// googleToken authenticates to Google's registries with an access token,
// as user oauth2accesstoken; a new one when it is about to expire.
type googleToken struct{ tokens oauth2.TokenSource }

func (g googleToken) Authorization() (*authn.AuthConfig, error) {
	t, err := g.tokens.Token()
	if err != nil {
		return nil, err
	}
	return &authn.AuthConfig{Username: "oauth2accesstoken", Password: t.AccessToken}, nil
}

func (k registryKeychain) configFor(registry string) *registryAuth {
	for i, c := range k.configs {
		if _, ok := c.auths[registry]; ok {
			return &k.configs[i]
		}
	}
	return nil
}

// refused words an access denied by registry: whose credentials it
// refused, or where credentials for it would be read.
func (k registryKeychain) refused(registry string) string {
	if c := k.configFor(registry); c != nil {
		return fmt.Sprintf("the registry refused the credentials for %s in %s", registry, c.from)
	}
	if k.google != nil && googleRegistry(registry) {
		return "the registry refused the token of GKE's metadata server: the pods' identity (their service account's principal, or the Google service account it is annotated with) needs roles/artifactregistry.reader on the repository"
	}
	msg := fmt.Sprintf("no credentials for %s were given: put them in the %s of the credentials Secret or of an image pull secret (spec.podTemplate.imagePullSecrets, or the pods' service account's)", registry, KeyDockerConfigJSON)
	if len(k.missing) > 0 {
		msg += fmt.Sprintf("; image pull secrets not found or without %s or %s: %s", KeyDockerConfigJSON, KeyDockerCfg, strings.Join(k.missing, ", "))
	}
	return msg
}

// loadKeychain reads the registry credentials of the credentials Secret
// and of the image pull secrets.
func loadKeychain(creds Credentials, pulls []loadedPullSecret) (registryKeychain, error) {
	var k registryKeychain
	if raw := creds.Get(KeyDockerConfigJSON); raw != "" {
		auths, ok := parseDockerConfig(raw, KeyDockerConfigJSON)
		if !ok {
			// The value is not shown: it holds the credentials.
			return k, permanentf(servingv1alpha1.ReasonFetchFailed, "credentials key %s is not a docker config.json (want {\"auths\": {\"<registry>\": {...}}})", KeyDockerConfigJSON)
		}
		k.configs = append(k.configs, registryAuth{from: "the credentials Secret's " + KeyDockerConfigJSON, auths: auths})
	}
	for _, p := range pulls {
		if p.key == "" {
			k.missing = append(k.missing, p.name)
			continue
		}
		auths, ok := parseDockerConfig(p.raw, p.key)
		if !ok {
			return k, permanentf(servingv1alpha1.ReasonFetchFailed, "image pull secret %q: its %s is not a docker config", p.name, p.key)
		}
		k.configs = append(k.configs, registryAuth{from: fmt.Sprintf("image pull secret %q", p.name), auths: auths})
	}
	return k, nil
}

// parseDockerConfig reads a docker config's credentials by registry host:
// a .dockerconfigjson's "auths", or a .dockercfg's top level.
func parseDockerConfig(raw, key string) (map[string]authn.AuthConfig, bool) {
	var auths map[string]authn.AuthConfig
	if key == KeyDockerCfg {
		if json.Unmarshal([]byte(raw), &auths) != nil {
			return nil, false
		}
	} else {
		var cfg dockerConfig
		if json.Unmarshal([]byte(raw), &cfg) != nil {
			return nil, false
		}
		auths = cfg.Auths
	}
	byHost := make(map[string]authn.AuthConfig, len(auths))
	for k, a := range auths {
		byHost[registryOfConfigKey(k)] = a
	}
	return byHost, true
}

// loadedPullSecret is an image pull secret's docker config as mounted:
// key is "" when neither key is there.
type loadedPullSecret struct {
	name, key, raw string
}

// loadPullSecrets reads each image pull secret's docker config, the
// .dockerconfigjson if it has both.
func loadPullSecrets(pulls []PullSecret) ([]loadedPullSecret, error) {
	out := make([]loadedPullSecret, 0, len(pulls))
	for _, p := range pulls {
		l := loadedPullSecret{name: p.Name}
		for _, key := range []string{KeyDockerConfigJSON, KeyDockerCfg} {
			b, err := readCredentialFile(filepath.Join(p.Dir, key))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			} else if err != nil {
				return nil, &Error{Reason: servingv1alpha1.ReasonAccessDenied, Permanent: true, Err: err,
					Message: fmt.Sprintf("read image pull secret %q's %s: %v", p.Name, key, unwrapPathError(err))}
			}
			l.key, l.raw = key, string(b)
			break
		}
		out = append(out, l)
	}
	return out, nil
}

// readCredentialFile reads a mounted Secret's key, refusing one too long
// to be a credential.
func readCredentialFile(p string) ([]byte, error) {
	st, err := os.Stat(p) // Secret keys are symbolic links into ..data
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxCredentialFileLength {
		return nil, fmt.Errorf("not a regular file of at most %d bytes", maxCredentialFileLength)
	}
	return os.ReadFile(p)
}
