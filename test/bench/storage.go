package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What a platform team sizes etcd by (its quota, its disk, how long a
// defragmentation takes): the keys and the bytes the ModelServers and
// everything made for them leave in it. Read from etcd's own metrics.
const (
	metricKeys     = "etcd_debugging_mvcc_keys_total"
	metricInUse    = "etcd_mvcc_db_total_size_in_use_in_bytes"
	metricFile     = "etcd_mvcc_db_total_size_in_bytes"
	metricRevision = "etcd_debugging_mvcc_current_revision"
)

// storage is what the N ModelServers added to etcd, per ModelServer.
type storage struct {
	// KeysPerCR are live keys: objects, Events and Helm's records.
	KeysPerCR float64 `json:"keysPerCR"`
	// BytesPerCR is the database in use once the history before the
	// current revision is compacted away: what the live objects take.
	BytesPerCR float64 `json:"bytesPerCR"`
	// WithHistoryBytesPerCR is the same before that compaction: the
	// revisions written since the apiserver last compacted (it does every
	// 5 minutes by default), each status patch storing the whole object
	// again. In a run shorter than that, everything written since the start.
	WithHistoryBytesPerCR float64 `json:"withHistoryBytesPerCR"`
	// FileBytesPerCR is how much the database's file grew, which is what
	// etcd's quota (2 GiB by default) is checked against. A compaction
	// frees pages inside the file but does not shrink it; only a
	// defragmentation does. So the file keeps the run's high-water mark:
	// the live objects and the history not yet compacted at that moment.
	FileBytesPerCR float64 `json:"fileBytesPerCR"`
	// ByResource splits the live keys by the resource they store, with
	// the bytes of their values (the pages' own room not counted).
	ByResource map[string]resourceUse `json:"byResource,omitempty"`
}

// resourceUse is one resource's share of what a ModelServer left in etcd.
type resourceUse struct {
	KeysPerCR  float64 `json:"keysPerCR"`
	BytesPerCR float64 `json:"bytesPerCR"`
}

// keysAndBytes is what etcd holds of one resource, in all.
type keysAndBytes struct{ keys, bytes float64 }

// liveUse is what etcd holds once its history is compacted: its metrics,
// and its keys and bytes by resource.
type liveUse struct {
	metrics    map[string]float64
	byResource map[string]keysAndBytes
}

// live and withHistory are the report's cells; "-" for a run without
// the figures (results from before they were read).
func (s *storage) live() string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("%g / %g", s.KeysPerCR, s.BytesPerCR)
}

func (s *storage) withHistory() string {
	if s == nil {
		return "-"
	}
	return fmt.Sprint(s.WithHistoryBytesPerCR)
}

func (s *storage) file() string {
	if s == nil || s.FileBytesPerCR == 0 {
		return "-"
	}
	return fmt.Sprint(s.FileBytesPerCR)
}

func (s *storage) resource(name string) string {
	if s == nil {
		return "-"
	}
	u, ok := s.ByResource[name]
	if !ok {
		return "0"
	}
	return fmt.Sprintf("%g / %g", u.KeysPerCR, u.BytesPerCR)
}

// storedResources are the resources any run of r left keys of in etcd,
// the largest first (by the most bytes per CR of any run).
func storedResources(r *report) []string {
	most := map[string]float64{}
	add := func(s *storage) {
		if s == nil {
			return
		}
		for name, u := range s.ByResource {
			most[name] = max(most[name], u.BytesPerCR)
		}
	}
	for _, o := range []*operatorRun{r.Ours, r.Peer} {
		if o != nil {
			add(o.Etcd)
		}
	}
	if r.Floor != nil {
		add(r.Floor.Etcd)
	}
	names := slices.Collect(maps.Keys(most))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(most[b], most[a]), cmp.Compare(a, b)) })
	return names
}

// etcdStore reads etcd's figures at its client URL.
type etcdStore struct {
	url    string
	client *http.Client
}

func newEtcdStore(url string) etcdStore {
	return etcdStore{url: url, client: &http.Client{Timeout: 30 * time.Second}}
}

// baseline is what etcd holds before the first create, to subtract: its
// history compacted and its file defragmented, so that the file's growth
// from here is the run's alone, not pages freed before it and reused.
func (s etcdStore) baseline(ctx context.Context) (liveUse, error) {
	if err := s.compact(ctx); err != nil {
		return liveUse{}, err
	}
	if _, err := s.do(ctx, http.MethodPost, "/v3/maintenance/defragment", []byte("{}")); err != nil {
		return liveUse{}, fmt.Errorf("defragment etcd: %w", err)
	}
	return s.read(ctx)
}

// live compacts etcd's history and reads what is then in use: the live
// keys alone.
func (s etcdStore) live(ctx context.Context) (liveUse, error) {
	if err := s.compact(ctx); err != nil {
		return liveUse{}, err
	}
	return s.read(ctx)
}

// read reads etcd's metrics and its keys by resource.
func (s etcdStore) read(ctx context.Context) (liveUse, error) {
	m, err := s.metrics(ctx)
	if err != nil {
		return liveUse{}, err
	}
	byResource, err := s.byResource(ctx)
	return liveUse{metrics: m, byResource: byResource}, err
}

// since is what etcd gained from base, per each of n ModelServers: with
// the history written since, then live.
func (s etcdStore) since(ctx context.Context, base liveUse, n int) (storage, error) {
	withHistory, err := s.metrics(ctx)
	if err != nil {
		return storage{}, err
	}
	now, err := s.live(ctx)
	if err != nil {
		return storage{}, err
	}
	per := func(after map[string]float64, name string) float64 {
		return round((after[name] - base.metrics[name]) / float64(n))
	}
	st := storage{
		KeysPerCR:             per(now.metrics, metricKeys),
		BytesPerCR:            per(now.metrics, metricInUse),
		WithHistoryBytesPerCR: per(withHistory, metricInUse),
		FileBytesPerCR:        per(withHistory, metricFile),
		ByResource:            map[string]resourceUse{},
	}
	for r, u := range now.byResource {
		if was := base.byResource[r]; u != was {
			st.ByResource[r] = resourceUse{
				KeysPerCR:  round((u.keys - was.keys) / float64(n)),
				BytesPerCR: round((u.bytes - was.bytes) / float64(n)),
			}
		}
	}
	return st, nil
}

// byResource reads every key under /registry/, in pages, and sums keys
// and value bytes by the resource each stores.
func (s etcdStore) byResource(ctx context.Context) (map[string]keysAndBytes, error) {
	const prefix, end = "/registry/", "/registry0" // '0' follows '/'
	out := map[string]keysAndBytes{}
	from := prefix
	for {
		req, _ := json.Marshal(map[string]any{
			"key":       base64.StdEncoding.EncodeToString([]byte(from)),
			"range_end": base64.StdEncoding.EncodeToString([]byte(end)),
			"limit":     "500",
		})
		body, err := s.do(ctx, http.MethodPost, "/v3/kv/range", req)
		if err != nil {
			return nil, fmt.Errorf("read etcd's keys: %w", err)
		}
		var page struct {
			Kvs []struct {
				Key   []byte `json:"key"`
				Value []byte `json:"value"`
			} `json:"kvs"`
			More bool `json:"more"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, fmt.Errorf("read etcd's keys: %w", err)
		}
		for _, kv := range page.Kvs {
			r := resourceOf(strings.TrimPrefix(string(kv.Key), prefix))
			u := out[r]
			u.keys++
			u.bytes += float64(len(kv.Value))
			out[r] = u
		}
		if !page.More || len(page.Kvs) == 0 {
			return out, nil
		}
		from = string(page.Kvs[len(page.Kvs)-1].Key) + "\x00"
	}
}

// resourceOf names the resource a key under /registry/ stores:
// "pods" for "pods/<ns>/<name>", and for a group's resource stored under
// its group, "modelservers.serving.modelserver.dev" for
// "serving.modelserver.dev/modelservers/<ns>/<name>".
func resourceOf(key string) string {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) >= 2 && strings.Contains(parts[0], ".") {
		return parts[1] + "." + parts[0]
	}
	return parts[0]
}

// compact discards every revision before the current one, and waits for
// the database to have freed their pages (physical), so that what is in
// use afterwards is the live keys alone.
func (s etcdStore) compact(ctx context.Context) error {
	m, err := s.metrics(ctx)
	if err != nil {
		return err
	}
	rev := int64(m[metricRevision])
	body, _ := json.Marshal(map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true})
	if _, err := s.do(ctx, http.MethodPost, "/v3/kv/compaction", body); err != nil {
		return fmt.Errorf("compact etcd at revision %d: %w", rev, err)
	}
	return nil
}

// metrics reads the figures above from etcd's /metrics.
func (s etcdStore) metrics(ctx context.Context) (map[string]float64, error) {
	text, err := s.do(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return nil, err
	}
	return parseMetrics(text, metricKeys, metricInUse, metricFile, metricRevision)
}

func (s etcdStore) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }() // read only
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(out))
	}
	return out, nil
}

// parseMetrics picks the named unlabelled samples out of Prometheus's
// text format; each must be there.
func parseMetrics(text []byte, names ...string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || math.IsNaN(v) {
			return nil, fmt.Errorf("metric %s: value %q", name, value)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("etcd's metrics have no %s", n)
		}
	}
	return out, nil
}
