package helmcharts

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
	"slices"

	"helm.sh/helm/v3/pkg/chart"
)

// Fingerprint is a digest of everything in c that can change what it
// renders: its metadata, templates, default values, values schema and
// files. Two builds of the operator whose charts differ in any of these
// have different fingerprints, whether or not the chart's version was
// raised; a release made from one is upgraded by the other.
func Fingerprint(c *chart.Chart) string {
	h := sha256.New()
	md, err := json.Marshal(c.Metadata)
	if err != nil {
		// Metadata is strings, lists and maps of them.
		panic("helmcharts: marshal chart metadata: " + err.Error())
	}
	field(h, md)
	field(h, []byte(c.Schema))
	// encoding/json sorts map keys, so equal values marshal equally.
	vals, err := json.Marshal(c.Values)
	if err != nil {
		panic("helmcharts: marshal chart values: " + err.Error())
	}
	field(h, vals)
	for _, files := range [][]*chart.File{c.Templates, c.Files} {
		sorted := slices.SortedFunc(slices.Values(files), func(a, b *chart.File) int { return cmp.Compare(a.Name, b.Name) })
		field(h, binary.BigEndian.AppendUint64(nil, uint64(len(sorted))))
		for _, f := range sorted {
			field(h, []byte(f.Name))
			field(h, f.Data)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// field writes b with its length first, so that no two sequences of fields
// hash alike.
func field(h hash.Hash, b []byte) {
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b))))
	h.Write(b)
}
