// Command reliabilityreport writes docs/reliability.md from the `go test
// -json` output of the reliability suites: one row per fault a scenario
// reports (lines starting "RELIABILITY " in its log), with the verdict of
// the test that tried it, then the outcome of every other test that ran.
//
//	go test -json ./test/e2e/... | go run ./hack/reliabilityreport -o docs/reliability.md -command '...'
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

const marker = "RELIABILITY "

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type row struct {
	Fault  string `json:"fault"`
	Tries  int    `json:"tries"`
	Result string `json:"result"`
	test   string
}

type outcome struct {
	pkg, test, action string
	elapsed           float64
}

func main() {
	out := flag.String("o", "", "file to write (default: stdout)")
	command := flag.String("command", "", "the command that produced the input, for the report's header")
	flag.Parse()
	rows, outcomes, err := read(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliabilityreport:", err)
		os.Exit(1)
	}
	doc := render(rows, outcomes, *command, time.Now().UTC())
	if *out == "" {
		fmt.Print(doc)
	} else if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "reliabilityreport:", err)
		os.Exit(1)
	}
	for _, o := range outcomes {
		if o.action == "fail" {
			fmt.Fprintf(os.Stderr, "reliabilityreport: %s %s failed\n", o.pkg, o.test)
			os.Exit(1)
		}
	}
}

func read(r io.Reader) ([]row, []outcome, error) {
	var rows []row
	var outcomes []outcome
	partial := map[string]string{} // output of a test not yet ending in a newline
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue // build output mixed in
		}
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, nil, fmt.Errorf("not go test -json output: %w: %s", err, line)
		}
		switch ev.Action {
		case "output":
			key := ev.Package + " " + ev.Test
			text := partial[key] + ev.Output
			lines := strings.Split(text, "\n")
			partial[key] = lines[len(lines)-1]
			for _, l := range lines[:len(lines)-1] {
				i := strings.Index(l, marker)
				if i < 0 || ev.Test == "" {
					continue
				}
				var rw row
				if err := json.Unmarshal([]byte(l[i+len(marker):]), &rw); err != nil {
					return nil, nil, fmt.Errorf("%s: bad result line %q: %w", ev.Test, l, err)
				}
				rw.test = ev.Test
				rows = append(rows, rw)
			}
		case "pass", "fail", "skip":
			if ev.Test != "" {
				outcomes = append(outcomes, outcome{ev.Package, ev.Test, ev.Action, ev.Elapsed})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	if len(rows) == 0 {
		return nil, nil, errors.New("no result lines in the input: did the reliability suites run?")
	}
	return rows, outcomes, nil
}

func render(rows []row, outcomes []outcome, command string, now time.Time) string {
	verdict := map[string]string{}
	for _, o := range outcomes {
		verdict[o.test] = o.action
	}
	var b strings.Builder
	b.WriteString("# Reliability\n\n")
	b.WriteString("Generated from the output of the reliability suites; do not edit by hand.\n")
	fmt.Fprintf(&b, "Produced %s by `make reliability-report`", now.Format("2006-01-02 15:04 MST"))
	if command != "" {
		fmt.Fprintf(&b, ", which ran:\n\n```sh\n%s\n```\n", command)
	} else {
		b.WriteString(".\n")
	}
	b.WriteString("\n## Faults tried\n\n")
	b.WriteString("| fault | times | result | verdict | test |\n| --- | ---: | --- | --- | --- |\n")
	for _, r := range rows {
		v := verdict[r.test]
		if v == "" {
			v = "did not finish"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | `%s` |\n", cell(r.Fault), r.Tries, cell(r.Result), strings.ToUpper(v), r.test)
	}
	b.WriteString("\n## Every test that ran\n\n")
	b.WriteString("| package | test | verdict | seconds |\n| --- | --- | --- | ---: |\n")
	slices.SortStableFunc(outcomes, func(a, b outcome) int {
		return strings.Compare(a.pkg+" "+a.test, b.pkg+" "+b.test)
	})
	for _, o := range outcomes {
		fmt.Fprintf(&b, "| %s | `%s` | %s | %.1f |\n", strings.TrimPrefix(o.pkg, "github.com/modelserver-dev/modelserver-operator/"),
			o.test, strings.ToUpper(o.action), o.elapsed)
	}
	return b.String()
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
