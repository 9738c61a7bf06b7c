// Package mountinfo reads a process's mount table, /proc/<pid>/mountinfo
// (proc(5)): what the cluster's real node mounted, and where the cgroup
// hierarchies are.
package mountinfo

import (
	"os"
	"strconv"
	"strings"
)

// Mount is one line of the table.
type Mount struct {
	// Root is the directory of the file system that shows at MountPoint:
	// "/" for a whole file system; for a cgroup hierarchy in a container,
	// the container's own cgroup.
	Root, MountPoint string
	FSType, Source   string
	// SuperOptions are the file system's options; a cgroup v1 hierarchy
	// names its controllers among them.
	SuperOptions []string
}

// Read reads this process's mount table.
func Read() ([]Mount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return Parse(b), nil
}

// Parse reads a mount table, skipping lines that are not mounts.
func Parse(table []byte) []Mount {
	var out []Mount
	for line := range strings.SplitSeq(string(table), "\n") {
		// id parent major:minor root mount-point options [optional...] - fstype source super-options
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(f) < sep+4 {
			continue
		}
		out = append(out, Mount{
			Root:         unescape(f[3]),
			MountPoint:   unescape(f[4]),
			FSType:       f[sep+1],
			Source:       unescape(f[sep+2]),
			SuperOptions: strings.Split(f[sep+3], ","),
		})
	}
	return out
}

// unescape undoes the table's octal escapes (\040 for a space, \134 for a
// backslash).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
