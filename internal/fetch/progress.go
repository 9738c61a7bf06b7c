package fetch

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// progress counts what a fetch has done, and logs it at an interval.
type progress struct {
	files      atomic.Int64
	bytes      atomic.Int64
	totalFiles int64
	totalBytes int64 // -1 when not known in advance
	start      time.Time
}

func newProgress(files, bytes int64) *progress {
	return &progress{totalFiles: files, totalBytes: bytes, start: time.Now()}
}

// report logs the counts every interval until ctx ends.
func (p *progress) report(ctx context.Context, log *slog.Logger, interval time.Duration) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	last, lastAt := p.bytes.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			b := p.bytes.Load()
			log.Info("progress",
				"files", p.files.Load(), "totalFiles", p.totalFiles,
				"bytes", b, "totalBytes", p.totalBytes,
				"mbPerSecond", mbPerSecond(b-last, now.Sub(lastAt)),
				"elapsed", now.Sub(p.start).Round(time.Second).String())
			last, lastAt = b, now
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
