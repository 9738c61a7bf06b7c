package fetch

import (
	"io"
	"sync"
)

// aheadReader reads its source in a goroutine of its own, up to depth
// chunks ahead of its reader, so that receiving a stream (with the digest
// check of a layer's reader) and unpacking it (decompressing, hashing and
// writing its files) each have a core.
type aheadReader struct {
	chunks chan []byte
	free   chan []byte
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	// err is what ended the source: io.EOF, or its error. It is written
	// before chunks is closed and read after.
	err error
	// cur is what is left of the chunk being read, buf that whole chunk.
	cur, buf []byte
	// failed is the source's error once Read has returned it: what the
	// reader saw, told apart from what stopping the source caused.
	failed error
}

func newAheadReader(src io.Reader, depth, size int) *aheadReader {
	a := &aheadReader{
		chunks: make(chan []byte, depth),
		free:   make(chan []byte, depth+1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	for range depth + 1 {
		a.free <- make([]byte, size)
	}
	go a.fill(src)
	return a
}

func (a *aheadReader) fill(src io.Reader) {
	defer close(a.done)
	defer close(a.chunks)
	for {
		var buf []byte
		select {
		case buf = <-a.free:
		case <-a.stop:
			return
		}
		n, err := io.ReadFull(src, buf)
		if n > 0 {
			select {
			case a.chunks <- buf[:n]:
			case <-a.stop:
				return
			}
		}
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF: // a short last chunk
			a.err = io.EOF
			return
		default:
			a.err = err
			return
		}
	}
}

func (a *aheadReader) Read(p []byte) (int, error) {
	for len(a.cur) == 0 {
		if a.buf != nil {
			a.free <- a.buf[:cap(a.buf)] // never blocks: free holds every buffer
			a.buf = nil
		}
		c, ok := <-a.chunks
		if !ok {
			if a.err != io.EOF {
				a.failed = a.err
			}
			return 0, a.err
		}
		a.cur, a.buf = c, c
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// sourceError is the source's error, if Read has returned one.
func (a *aheadReader) sourceError() error { return a.failed }

// Close stops the goroutine and waits for it: the source is not read
// after Close returns.
func (a *aheadReader) Close() {
	a.once.Do(func() { close(a.stop) })
	<-a.done
}
