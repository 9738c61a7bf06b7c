package machine

import (
	"crypto/sha256"
	"os"
	"testing"
	"time"
)

func TestParseStatCPUAddsUserAndSystemTimeAfterAnyName(t *testing.T) {
	// A name with spaces and a parenthesis of its own; utime 250 and stime
	// 75 ticks.
	line := []byte("4242 (ver sity) gw)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 12 0 300 1000000 500 18446744073709551615\n")
	got, err := parseStatCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if got != 3.25 {
		t.Errorf("parseStatCPU = %v, want 3.25", got)
	}
	for _, bad := range []string{"", "4242 versitygw S 1", "4242 (gw) S 1 2 3"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q): no error", bad)
		}
	}
}

// Hashing for a while shows as CPU time, however busy the machine is.
func TestProcessCPUSecondsGrowsWithWork(t *testing.T) {
	before, err := ProcessCPUSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); ; {
		for range 50 {
			sha256.Sum256(buf)
		}
		now, err := ProcessCPUSeconds(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 0.2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s of hashing added %.2f CPU-s", now-before)
		}
	}
}
