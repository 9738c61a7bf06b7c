package main

import (
	"math"
	"slices"
)

// summary of one measure over the runs of a tool on a shape.
type summary struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// summarize returns the median (the mean of the middle two for an even
// count), the least and the greatest of vs.
func summarize(vs []float64) summary {
	if len(vs) == 0 {
		return summary{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	mid := len(s) / 2
	median := s[mid]
	if len(s)%2 == 0 {
		median = (s[mid-1] + s[mid]) / 2
	}
	return summary{Median: round(median), Min: round(s[0]), Max: round(s[len(s)-1])}
}

// mibPerSecond is the throughput of moving bytes in seconds.
func mibPerSecond(bytes int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return round(float64(bytes) / mib / seconds)
}

func round(v float64) float64 { return math.Round(v*1000) / 1000 }
