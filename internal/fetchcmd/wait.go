package fetchcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// WaitForModel is the serving pods' init container's command,
// `wait-for-model --file F [--file F ...]`: it returns once every file exists.
// The files are the fetch manifests of the models the pods serve, written
// last by each fetch, so the pods start together with the fetch and TF
// Serving never sees a model directory that is not complete.
func WaitForModel(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return waitForModel(ctx, args, os.Stderr, 2*time.Second, time.Minute)
}

// nextPoll is how long to wait before looking for the files again, having
// waited so far: a tenth of that, between a twentieth of most and most.
// The serving pods start with the fetch, so a small model's fetch ends a
// second or two into their wait and is seen within a tenth of a second,
// not up to a whole poll later. A long fetch costs 42 stats in its first
// 20 s rather than 10, then one per poll as before: on a network file
// system each stat is a round trip.
func nextPoll(waited, most time.Duration) time.Duration {
	return min(most, max(most/20, waited/10))
}

type fileList []string

func (f *fileList) String() string     { return fmt.Sprint(*f) }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

// waitForModel polls for the files, at most poll apart (nextPoll), and
// logs those still missing every report.
func waitForModel(ctx context.Context, args []string, stderr io.Writer, poll, report time.Duration) error {
	fs := flag.NewFlagSet("wait-for-model", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var files fileList
	fs.Var(&files, "file", "A file to wait for (repeatable): a model's fetch manifest.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(files) == 0 || fs.NArg() > 0 {
		return errors.New("wait-for-model: want one or more --file and no other arguments")
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	start, lastReport := time.Now(), time.Now()
	for {
		var missing []string
		for _, f := range files {
			if _, err := os.Stat(f); err != nil {
				if !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("wait-for-model: %w", err)
				}
				missing = append(missing, f)
			}
		}
		if len(missing) == 0 {
			log.Info("the models are on the volume", "waited", time.Since(start).Round(time.Second).String())
			return nil
		}
		if time.Since(lastReport) >= report {
			lastReport = time.Now()
			log.Info("waiting for the model fetch", "missing", missing, "waited", time.Since(start).Round(time.Second).String())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait-for-model: stopped while waiting for %v", missing)
		case <-time.After(nextPoll(time.Since(start), poll)):
		}
	}
}
