// Package names derives the names of the objects a ModelServer owns. Every
// name fits a DNS-1123 label (63 characters); one that would not is cut and
// ends in a hash of the whole, so two long names never collide and the same
// input always gives the same name.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxLength is the length of a DNS-1123 label, the limit for most object
// names and for label values.
const MaxLength = 63

// hashLength is the number of hex digits kept from the hash of a cut name.
const hashLength = 8

// Join returns base-suffix (or base alone for an empty suffix), cut to
// MaxLength with a hash when longer.
func Join(base string, suffix ...string) string {
	name := strings.Join(append([]string{base}, suffix...), "-")
	name = strings.TrimSuffix(name, "-")
	return Truncate(name, MaxLength)
}

// Truncate cuts name to max characters, replacing its end with a hash of the
// whole name when it is longer, and never ends the result on '-' or '.'.
func Truncate(name string, max int) string {
	if len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	hash := hex.EncodeToString(sum[:])[:hashLength]
	head := strings.TrimRight(name[:max-hashLength-1], "-.")
	return head + "-" + hash
}

// Hash returns a short, stable digest of parts, for names that must change
// when their inputs do (the fetch Job of a model generation).
func Hash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:hashLength]
}

// Deployment names the serving Deployment of ModelServer ms. The release
// is named after the ModelServer itself.
func Deployment(ms string) string { return Join(ms) }

// Service names the serving Service of ModelServer ms.
func Service(ms string) string { return Join(ms) }

// ConfigMap names the ConfigMap of ModelServer ms's model config.
func ConfigMap(ms string) string { return Join(ms, "config") }

// GatewayCA names the ConfigMap of the CA certificates a Gateway checks
// the gRPC port's certificate against (a BackendTLSPolicy's).
func GatewayCA(ms string) string { return Join(ms, "backend-tls-ca") }

// Claim names the claim ModelServer ms's models are fetched into.
func Claim(ms string) string { return Join(ms, "model") }

// FetchJob names the model-fetch Job of one model generation: a new
// generation gets a new Job, since a Job's pod template cannot change.
func FetchJob(ms, generation string) string { return Join(ms, "fetch", generation) }
