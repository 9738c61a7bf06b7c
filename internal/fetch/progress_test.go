package fetch

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The operator reads what the fetch logs: a line report writes is one
// LastProgress finds, with its counts.
func TestLastProgressReadsWhatReportLogs(t *testing.T) {
	log := &logBuffer{}
	p := newProgress(64, 256<<20)
	p.files.Store(3)
	p.bytes.Store(12 << 20)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.report(ctx, slog.New(slog.NewJSONHandler(log, nil)), time.Millisecond)
	}()
	for !strings.Contains(log.String(), `"msg":"progress"`) {
		time.Sleep(time.Millisecond)
	}
	stop()
	<-done
	got, ok := LastProgress([]byte(log.String()))
	if !ok {
		t.Fatalf("no progress in %q", log.String())
	}
	if got.Files != 3 || got.TotalFiles != 64 || got.Bytes != 12<<20 || got.TotalBytes != 256<<20 || got.Time.IsZero() || got.Idle != 0 {
		t.Errorf("LastProgress = %+v, want 3 of 64 files, 12 MiB of 256 MiB, a time, and no idle seconds", got)
	}
}

func TestLastProgress(t *testing.T) {
	line := func(bytes, total string) string {
		return `{"time":"2026-12-06T09:00:00Z","level":"INFO","msg":"progress","files":1,"totalFiles":-1,"bytes":` + bytes + `,"totalBytes":` + total + `,"mbPerSecond":12.5,"idleSeconds":40,"elapsed":"10s"}`
	}
	for _, tc := range []struct {
		name, tail string
		want       int64 // bytes; -1: none found
	}{
		{"the newest of several", line("1", "-1") + "\n" + line("2", "-1") + "\n", 2},
		{"without a final newline", line("1", "-1") + "\n" + line("2", "-1"), 2},
		{"other lines after it", line("5", "9") + "\n" + `{"time":"2026-12-06T09:00:01Z","level":"WARN","msg":"retrying","error":"EOF"}` + "\nplain text\n", 5},
		{"a tail cut in its first line", line("1", "-1")[20:] + "\n" + line("7", "-1") + "\n", 7},
		{"only a cut line", line("1", "-1")[20:] + "\n", -1},
		{"a message that quotes one", `{"msg":"could not parse","line":"{\"msg\":\"progress\"}"}` + "\n", -1},
		{"nothing", "", -1},
		{"blank lines", "\n\n\n", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := LastProgress([]byte(tc.tail))
			switch {
			case tc.want < 0 && ok:
				t.Errorf("LastProgress = %+v, want none", got)
			case tc.want >= 0 && !ok:
				t.Errorf("LastProgress found none, want bytes %d", tc.want)
			case ok && got.Bytes != tc.want:
				t.Errorf("LastProgress bytes = %d, want %d", got.Bytes, tc.want)
			case ok && (got.BytesPerSecond != 12_500_000 || got.Idle != 40*time.Second || !got.Time.Equal(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))):
				t.Errorf("LastProgress = %+v, want 12.5 MB/s, idle 40 s, at 09:00:00", got)
			}
		})
	}
}

// A fetch whose bytes stop coming says for how long, from the first
// line without growth; one that moves says 0.
func TestReportSaysHowLongNoByteCameIn(t *testing.T) {
	log := &logBuffer{}
	p := newProgress(1, 100)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.report(ctx, slog.New(slog.NewJSONHandler(log, nil)), 20*time.Millisecond)
	}()
	p.bytes.Store(10)
	time.Sleep(30 * time.Millisecond) // a line with growth
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, ok := LastProgress([]byte(log.String()))
		if ok && got.Idle >= time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line says a second without bytes: %+v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.bytes.Store(20)
	time.Sleep(60 * time.Millisecond)
	stop()
	<-done
	if got, _ := LastProgress([]byte(log.String())); got.Idle != 0 || got.Bytes != 20 {
		t.Errorf("after bytes came in again: %+v, want idle 0 at 20 bytes", got)
	}
}

// The rate is of the last six intervals: bytes that came in at once
// count in it until they are older than that.
func TestReportsRateIsOfTheLastSixIntervals(t *testing.T) {
	log := &logBuffer{}
	p := newProgress(1, 10_000_000)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	const interval = 20 * time.Millisecond
	go p.report(ctx, slog.New(slog.NewJSONHandler(log, nil)), interval)
	lines := func() int { return strings.Count(log.String(), "\n") }
	for lines() == 0 {
		time.Sleep(time.Millisecond)
	}
	p.bytes.Store(1_000_000)
	burst := time.Now()
	for {
		got, _ := LastProgress([]byte(log.String()))
		if got.Bytes == 1_000_000 && got.BytesPerSecond == 0 {
			break
		}
		if time.Since(burst) > 10*time.Second {
			t.Fatalf("the burst still counts after 10 s: %+v", got)
		}
		time.Sleep(time.Millisecond)
	}
	if counted := time.Since(burst); counted < 5*interval {
		t.Errorf("the burst counted in the rate for %s, want six intervals of %s", counted, interval)
	}
}
