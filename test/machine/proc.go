package machine

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, which
// Linux fixes at 100 for everything it reports to user space.
const userHZ = 100

// ProcessCPUSeconds is the CPU time, user and system, that process pid and
// all its threads have used so far.
func ProcessCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime, fields 14 and 15 of a
// /proc/<pid>/stat line. The command name before them is in parentheses
// and may hold spaces and parentheses itself, so the fields are counted
// from the last ')'.
func parseStatCPU(line []byte) (float64, error) {
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("not a /proc/<pid>/stat line: %q", line)
	}
	f := strings.Fields(string(line[i+1:]))
	// f[0] is field 3 (the state).
	if len(f) < 13 {
		return 0, fmt.Errorf("a /proc/<pid>/stat line with %d fields after the name: %q", len(f), line)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/<pid>/stat: %w", err)
		}
		ticks += n
	}
	return float64(ticks) / userHZ, nil
}
