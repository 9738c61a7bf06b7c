package release

import (
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// chartByVersion stores each revision with its chart's metadata, default
// values and files, but without the chart's templates and values schema.
//
// Helm puts the whole chart in every revision's record. Nothing reads the
// templates or the schema back: a rollback applies the stored manifest,
// `helm get values --all` merges the stored config over the chart's
// values, and an upgrade renders the chart it is given. This chart is the
// one compiled into the operator, which the chart version in the metadata
// names (and the values digest label, which covers the chart's
// fingerprint, tells apart from another build's). Left out, they make the
// record a quarter of its size (5.7 kB instead of 21.7 kB, for a default
// ModelServer), which every write sends and etcd keeps for each revision,
// and its encoding 1.0 ms of CPU instead of 3.1 ms (BenchmarkEncodeRecord*).
type chartByVersion struct {
	driver.Driver
}

func (d chartByVersion) Create(key string, rls *helmrelease.Release) error {
	return d.Driver.Create(key, withoutTemplates(rls))
}

func (d chartByVersion) Update(key string, rls *helmrelease.Release) error {
	return d.Driver.Update(key, withoutTemplates(rls))
}

// withoutTemplates is rls with a copy of its chart that has no templates
// and no schema; rls itself, which Helm goes on using, is left as it is.
func withoutTemplates(rls *helmrelease.Release) *helmrelease.Release {
	if rls == nil || rls.Chart == nil || (len(rls.Chart.Templates) == 0 && rls.Chart.Schema == nil) {
		return rls
	}
	stored, ch := *rls, *rls.Chart
	ch.Templates, ch.Schema = nil, nil
	stored.Chart = &ch
	return &stored
}
