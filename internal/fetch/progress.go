package fetch

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"
)

// A running fetch logs a progress line at an interval, and the operator
// reads the newest one from the tail of the fetch pod's log into the
// ModelServer's status. Its writer (progress.report, in the fetch pod)
// and its reader (LastProgress, in the operator) live here together, so
// that the line has one definition.

// progressMessage is the message of a progress line.
const progressMessage = "progress"

// progressLine is a progress line's fields beside slog's own, as logged
// by slog's JSON handler.
type progressLine struct {
	Time        time.Time `json:"time"`
	Message     string    `json:"msg"`
	Files       int64     `json:"files"`
	TotalFiles  int64     `json:"totalFiles"`
	Bytes       int64     `json:"bytes"`
	TotalBytes  int64     `json:"totalBytes"`
	MBPerSecond float64   `json:"mbPerSecond"`
	IdleSeconds int64     `json:"idleSeconds"`
}

// Progress is how far a running fetch had come when it logged a progress
// line. Its counts are of what this attempt fetches: files an earlier
// attempt completed, or a copy already on the volume gave, are not in
// them.
type Progress struct {
	// Time is when the fetch logged it.
	Time time.Time
	// Files and Bytes are what has been fetched; TotalFiles and
	// TotalBytes what is to be, -1 where not known before the end (an
	// archive's files, an image's size before its manifest is read).
	Files, TotalFiles, Bytes, TotalBytes int64
	// BytesPerSecond is the rate over the rateIntervals before the
	// line, or since the fetch began.
	BytesPerSecond int64
	// Idle is how long no byte had come in, as of Time: a store that
	// holds a request back, or answers none.
	Idle time.Duration
}

// LastProgress is the newest progress line in the tail of a fetch pod's
// log, which may begin in the middle of a line; false if it has none.
func LastProgress(tail []byte) (Progress, bool) {
	for len(tail) > 0 {
		i := bytes.LastIndexByte(tail[:len(tail)-1], '\n')
		line := bytes.TrimSpace(tail[i+1:])
		tail = tail[:i+1]
		var l progressLine
		if !bytes.Contains(line, []byte(`"msg":"`+progressMessage+`"`)) || json.Unmarshal(line, &l) != nil || l.Message != progressMessage {
			continue
		}
		return Progress{
			Time: l.Time, Files: l.Files, TotalFiles: l.TotalFiles, Bytes: l.Bytes, TotalBytes: l.TotalBytes,
			BytesPerSecond: int64(l.MBPerSecond * 1e6), Idle: time.Duration(l.IdleSeconds) * time.Second,
		}, true
	}
	return Progress{}, false
}

// progress counts what a fetch has done, and logs it at an interval.
type progress struct {
	files      atomic.Int64
	bytes      atomic.Int64
	totalFiles int64 // -1 when not known in advance
	totalBytes int64 // -1 when not known in advance
	start      time.Time
}

func newProgress(files, bytes int64) *progress {
	return &progress{totalFiles: files, totalBytes: bytes, start: time.Now()}
}

// rateIntervals is how many intervals back a progress line's rate looks
// (30 s at the default interval): long enough that the bursts of parallel
// requests through socket buffers even out, so that the time left said
// from it does not jump; short enough that a store slowing down shows
// soon.
const rateIntervals = 6

// sample is the bytes fetched at a time.
type sample struct {
	at    time.Time
	bytes int64
}

// report logs a progress line every interval until ctx ends.
func (p *progress) report(ctx context.Context, log *slog.Logger, interval time.Duration) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	window := rateIntervals * interval
	samples := []sample{{time.Now(), p.bytes.Load()}}
	grew := samples[0].at
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			b := p.bytes.Load()
			if b != samples[len(samples)-1].bytes {
				grew = now
			}
			// The oldest sample kept is the newest at least window old,
			// if one is.
			for len(samples) > 1 && now.Sub(samples[1].at) >= window {
				samples = samples[1:]
			}
			base := samples[0]
			log.Info(progressMessage,
				"files", p.files.Load(), "totalFiles", p.totalFiles,
				"bytes", b, "totalBytes", p.totalBytes,
				"mbPerSecond", mbPerSecond(b-base.bytes, now.Sub(base.at)),
				"idleSeconds", int64(now.Sub(grew).Seconds()),
				"elapsed", now.Sub(p.start).Round(time.Second).String())
			samples = append(samples, sample{now, b})
		}
	}
}

// done logs the totals.
func (p *progress) done(log *slog.Logger, msg string) {
	elapsed := time.Since(p.start)
	b := p.bytes.Load()
	log.Info(msg, "files", p.files.Load(), "bytes", b,
		"mbPerSecond", mbPerSecond(b, elapsed), "elapsed", elapsed.Round(time.Millisecond).String())
}

func mbPerSecond(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	v := float64(bytes) / 1e6 / d.Seconds()
	return float64(int64(v*10)) / 10
}
