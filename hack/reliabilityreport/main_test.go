package main

import (
	"strings"
	"testing"
	"time"
)

func TestTheReportHasARowPerReportedFaultWithItsTestsVerdict(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestCrash"}`,
		`{"Action":"output","Package":"p","Test":"TestCrash","Output":"    crash_test.go:1: RELIABILITY {\"fault\":\"kill | during install\",\"tries\":20,\"result\":\"converged\"}\n"}`,
		`{"Action":"output","Package":"p","Test":"TestLeader","Output":"    leader_test.go:9: RELIA"}`,
		`{"Action":"output","Package":"p","Test":"TestLeader","Output":"BILITY {\"fault\":\"leader killed\",\"tries\":1,\"result\":\"took over\"}\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestCrash","Elapsed":12.5}`,
		`{"Action":"fail","Package":"p","Test":"TestLeader","Elapsed":3}`,
		`some build output`,
	}, "\n")
	rows, outcomes, err := read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	doc := render(rows, outcomes, "go test -json ./p", time.Unix(0, 0))
	for _, want := range []string{
		"| kill \\| during install | 20 | converged | PASS | `TestCrash` |",
		"| leader killed | 1 | took over | FAIL | `TestLeader` |",
		"| p | `TestCrash` | PASS | 12.5 |",
		"go test -json ./p",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q:\n%s", want, doc)
		}
	}
}

func TestNoResultLinesIsAnError(t *testing.T) {
	if _, _, err := read(strings.NewReader(`{"Action":"pass","Package":"p","Test":"T"}`)); err == nil {
		t.Error("a report without rows was accepted")
	}
}
