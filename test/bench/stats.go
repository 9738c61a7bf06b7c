package main

import (
	"math"
	"slices"
	"time"
)

// distribution summarises per-ModelServer durations, in seconds.
type distribution struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

func distributionOf(ds []time.Duration) distribution {
	if len(ds) == 0 {
		return distribution{}
	}
	s := make([]float64, len(ds))
	for i, d := range ds {
		s[i] = d.Seconds()
	}
	slices.Sort(s)
	return distribution{
		Count: len(s),
		P50:   round(percentile(s, 50)),
		P90:   round(percentile(s, 90)),
		P99:   round(percentile(s, 99)),
		Max:   round(s[len(s)-1]),
	}
}

// percentile of sorted s by the nearest-rank method.
func percentile(s []float64, p float64) float64 {
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank-1, 0)]
}

func round(v float64) float64 { return math.Round(v*1000) / 1000 }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round(a / b)
}

func seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}
