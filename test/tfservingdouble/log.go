package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// logger writes lines in the layout of TF Serving's logs (timestamp,
// severity letter, source, message) so that whatever greps a serving
// pod's log finds the same messages. The source is the double's own name,
// never a TF Serving file, so a reader can tell the two apart.
type logger struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

func newLogger(w io.Writer) *logger { return &logger{w: w, now: time.Now} }

func (l *logger) write(severity byte, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	msg = strings.TrimRight(msg, "\n")
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = fmt.Fprintf(l.w, "%s: %c tfservingdouble] %s\n", l.now().Format("2006-01-02 15:04:05.000000"), severity, msg)
}

func (l *logger) infof(format string, args ...any)  { l.write('I', format, args...) }
func (l *logger) warnf(format string, args ...any)  { l.write('W', format, args...) }
func (l *logger) errorf(format string, args ...any) { l.write('E', format, args...) }

// servableID is how TF Serving names a model version in its logs.
func servableID(name string, version int64) string {
	return fmt.Sprintf("{name: %s version: %d}", name, version)
}
