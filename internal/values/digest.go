package values

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Digest is the digest of a chart and values: equal digests mean a Helm
// upgrade would change nothing the operator decides. chart names the chart
// by its version and its fingerprint (helmcharts.Fingerprint), so a build
// whose chart changed upgrades each release even if the version was not
// raised. It is 40 hex digits (160 bits of SHA-256), short enough to be a
// label value on the release record. An autoscaled replica count is left
// out: the autoscaler changing it is no reason to upgrade.
func Digest(chart string, v *Values) string {
	if v.Autoscaling != nil {
		c := *v
		c.Serving.Replicas = 0
		v = &c
	}
	h := sha256.New()
	h.Write([]byte(chart))
	h.Write([]byte{0})
	h.Write([]byte(canonical(v)))
	return hex.EncodeToString(h.Sum(nil))[:40]
}

// Map returns the values in the form Helm takes.
func (v *Values) Map() (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// canonical is a stable text form of v for hashing: JSON with map keys
// sorted (encoding/json sorts them).
func canonical(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		// Only channels, funcs and cycles fail to marshal; none are here.
		panic(fmt.Sprintf("values: marshal %T: %v", v, err))
	}
	return string(raw)
}
