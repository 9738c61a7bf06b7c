package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
)

// operatorUser is who each operator runs as: a member of system:masters,
// as the admin is, but a user of its own, whose requests alone the
// apiserver's audit log records (localcluster's AuditedUser).
const operatorUser = "bench-operator"

// requestLog counts an operator's API requests by verb and resource from
// the apiserver's audit log of its user. Until 2026-11-28 a proxy in this
// process stood between the operator and the apiserver and counted them:
// it cost the machine about 8 CPU-s per 1,000 ModelServers that the floor
// did not pay, in runs the machine's CPU paces. The apiserver writes a
// line as each request ends, and as each watch starts to stream.
type requestLog struct {
	user string

	mu      sync.Mutex
	f       *os.File
	buf     []byte
	partial []byte          // the start of a line not yet written in full
	started map[string]bool // watches counted when they began to stream
	counts  counts
}

func openRequestLog(path, user string) (*requestLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &requestLog{user: user, f: f, buf: make([]byte, 256<<10), started: map[string]bool{}, counts: counts{}}, nil
}

func (l *requestLog) Close() { _ = l.f.Close() }

// Snapshot returns the counts so far, by "verb resource".
func (l *requestLog) Snapshot() counts {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		n, err := l.f.Read(l.buf)
		l.partial = append(l.partial, l.buf[:n]...)
		if n == 0 || err != nil {
			break
		}
	}
	for {
		line, rest, ok := bytes.Cut(l.partial, []byte("\n"))
		if !ok {
			break
		}
		l.count(line)
		l.partial = rest
	}
	// The next append then copies the unfinished line alone, and the lines
	// read before it are freed.
	l.partial = slices.Clip(l.partial)
	return maps.Clone(l.counts)
}

// auditEvent is what the count needs of an audit.k8s.io/v1 Event.
type auditEvent struct {
	AuditID   string `json:"auditID"`
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	User      struct{ Username string }
	ObjectRef *struct{ Resource, Subresource string }
}

// count counts a request once: at ResponseStarted if it streams (a watch),
// else when it is complete.
func (l *requestLog) count(line []byte) {
	var e auditEvent
	if err := json.Unmarshal(line, &e); err != nil {
		l.counts["unreadable audit line"]++
		return
	}
	if e.User.Username != l.user {
		return
	}
	switch e.Stage {
	case "ResponseStarted":
		l.started[e.AuditID] = true
	case "ResponseComplete", "Panic":
		if l.started[e.AuditID] {
			delete(l.started, e.AuditID)
			return
		}
	default:
		return
	}
	l.counts[e.kind()]++
}

// kind names a request by its verb and resource, with the subresource
// (modelservers/status); requests for no resource (discovery, /version)
// are "get discovery".
func (e auditEvent) kind() string {
	if e.ObjectRef == nil || e.ObjectRef.Resource == "" {
		return e.Verb + " discovery"
	}
	resource := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		resource += "/" + e.ObjectRef.Subresource
	}
	return e.Verb + " " + resource
}

// counts are API requests by "verb resource".
type counts map[string]int64

// Sub returns c minus an earlier snapshot.
func (c counts) Sub(earlier counts) counts {
	out := counts{}
	for k, v := range c {
		if d := v - earlier[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func (c counts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Writes counts the requests that change something.
func (c counts) Writes() int64 {
	var n int64
	for k, v := range c {
		switch verb, _, _ := strings.Cut(k, " "); verb {
		case "create", "update", "patch", "delete", "deletecollection":
			n += v
		}
	}
	return n
}
