package main

// The metrics TF Serving exports on its Prometheus path, under its names:
// TF's metric names with every character other than [a-zA-Z0-9_] turned
// into ':' (/tensorflow/serving/request_count becomes
// :tensorflow:serving:request_count), a "# TYPE" line and no "# HELP".
// Only the metrics whose events the double really has are exported.

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

const (
	metricLoadAttempts   = ":tensorflow:cc:saved_model:load_attempt_count"
	metricLoadLatency    = ":tensorflow:cc:saved_model:load_latency"
	metricRequestCount   = ":tensorflow:serving:request_count"
	metricRequestLatency = ":tensorflow:serving:request_latency"
)

// latencyBuckets are the upper bounds of TF Serving's request latency
// histogram, in microseconds: 10 * 1.8^i for 33 buckets, then +Inf.
var latencyBuckets = func() []float64 {
	b := make([]float64, 33)
	for i := range b {
		b[i] = 10 * math.Pow(1.8, float64(i))
	}
	return b
}()

type histogram struct {
	counts []int64 // per bucket, the last one being +Inf
	sum    float64
}

type metrics struct {
	mu             sync.Mutex
	loadAttempts   map[[2]string]int64 // model_path, status
	loadLatency    map[string]int64    // model_path
	requestCount   map[[2]string]int64 // model_name, status
	requestLatency map[[3]string]*histogram
}

func newMetrics() *metrics {
	return &metrics{
		loadAttempts:   map[[2]string]int64{},
		loadLatency:    map[string]int64{},
		requestCount:   map[[2]string]int64{},
		requestLatency: map[[3]string]*histogram{},
	}
}

// countLoad counts a load of a version directory; TF's loader labels the
// outcome "success" or "fail" and adds the latency of successful loads.
func (m *metrics) countLoad(path string, ok bool, micros int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	status := "fail"
	if ok {
		status = "success"
		m.loadLatency[path] += micros
	}
	m.loadAttempts[[2]string{path, status}]++
}

// countRequest counts a REST request, whatever its outcome, under the
// model name of its path ("" when there is none).
func (m *metrics) countRequest(model string, c code) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requestCount[[2]string{model, c.String()}]++
}

// observeLatency records a successful request; api is the method of the
// path (predict, classify, regress) or "" for status and metadata.
func (m *metrics) observeLatency(model, api, entrypoint string, micros int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := [3]string{model, api, entrypoint}
	h := m.requestLatency[key]
	if h == nil {
		h = &histogram{counts: make([]int64, len(latencyBuckets)+1)}
		m.requestLatency[key] = h
	}
	i, _ := slices.BinarySearch(latencyBuckets, float64(micros))
	h.counts[i]++
	h.sum += float64(micros)
}

func labels(names []string, values []string) string {
	parts := make([]string, len(names))
	for i := range names {
		parts[i] = names[i] + `="` + escapeLabel(values[i]) + `"`
	}
	return strings.Join(parts, ",")
}

func escapeLabel(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

// number writes a float as TF Serving does (six significant digits).
func number(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }

// write renders the metrics in the Prometheus text format, sorted by TF
// metric name and then by label values. Into a builder, whose writes
// cannot fail; the handler sends the text whole.
func (m *metrics) write(w *strings.Builder) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Fprintf(w, "# TYPE %s counter\n", metricLoadAttempts)
	for _, k := range slices.SortedFunc(maps.Keys(m.loadAttempts), compareKeys) {
		fmt.Fprintf(w, "%s{%s} %d\n", metricLoadAttempts, labels([]string{"model_path", "status"}, k[:]), m.loadAttempts[k])
	}
	fmt.Fprintf(w, "# TYPE %s counter\n", metricLoadLatency)
	for _, k := range slices.Sorted(maps.Keys(m.loadLatency)) {
		fmt.Fprintf(w, "%s{%s} %d\n", metricLoadLatency, labels([]string{"model_path"}, []string{k}), m.loadLatency[k])
	}
	fmt.Fprintf(w, "# TYPE %s counter\n", metricRequestCount)
	for _, k := range slices.SortedFunc(maps.Keys(m.requestCount), compareKeys) {
		fmt.Fprintf(w, "%s{%s} %d\n", metricRequestCount, labels([]string{"model_name", "status"}, k[:]), m.requestCount[k])
	}
	fmt.Fprintf(w, "# TYPE %s histogram\n", metricRequestLatency)
	for _, k := range slices.SortedFunc(maps.Keys(m.requestLatency), compareKeys3) {
		h := m.requestLatency[k]
		l := labels([]string{"model_name", "API", "entrypoint"}, k[:])
		var cumulative int64
		for i, n := range h.counts {
			cumulative += n
			le := "+Inf"
			if i < len(latencyBuckets) {
				le = number(latencyBuckets[i])
			}
			fmt.Fprintf(w, "%s_bucket{%s,le=\"%s\"} %d\n", metricRequestLatency, l, le, cumulative)
		}
		fmt.Fprintf(w, "%s_sum{%s} %s\n", metricRequestLatency, l, number(h.sum))
		fmt.Fprintf(w, "%s_count{%s} %d\n", metricRequestLatency, l, cumulative)
	}
}

func compareKeys(a, b [2]string) int  { return slices.Compare(a[:], b[:]) }
func compareKeys3(a, b [3]string) int { return slices.Compare(a[:], b[:]) }
