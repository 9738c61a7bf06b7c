package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	"golang.org/x/sync/semaphore"
)

// An object that must be read as one stream (a layer to unpack, a tar
// archive) is downloaded as parts several at once, each into memory,
// and handed on in order: inOrder. A part waits in memory until the parts
// before it are read, so at most inOrderAhead parts of inOrderPartSize
// are held.

// inOrderPartSize is the largest part of an object read in order.
const inOrderPartSize = 8 << 20

// inOrderAhead is how many parts of an object read in order are
// downloading, or waiting to be read, at most.
const inOrderAhead = 4

// errDamaged is an object whose bytes are not its digest's: damaged on
// its way, worth downloading again.
var errDamaged = errors.New("damaged on its way")

// inOrder reads an object's parts in order as they arrive.
type inOrder struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	size   int64
	// wantSHA256, when not empty, is the hex sha256 the whole must have,
	// and sha hashes what is read.
	wantSHA256 string
	sha        hash.Hash
	// parts are the parts asked for, in order; done closes when no more
	// will be.
	parts chan *orderedPart
	done  chan struct{}
	cur   []byte
	read  int64
	err   error
}

type orderedPart struct {
	data  []byte
	err   error
	ready chan struct{}
}

// readInOrder starts downloading size bytes with get, parts of part bytes
// each: one at a time on a stream of its own, and more at once while
// shared has streams free; nil shared is streams of its own, as many as
// its parts ahead can use. after runs once the downloads have ended.
func readInOrder(ctx context.Context, size, part int64, wantSHA256 string, shared *semaphore.Weighted,
	get func(ctx context.Context, off, n int64) ([]byte, error), after func()) *inOrder {
	ctx, cancel := context.WithCancelCause(ctx)
	if shared == nil {
		shared = semaphore.NewWeighted(inOrderAhead - 1)
	}
	r := &inOrder{ctx: ctx, cancel: cancel, size: size, wantSHA256: wantSHA256,
		parts: make(chan *orderedPart, inOrderAhead-1), done: make(chan struct{})}
	if wantSHA256 != "" {
		// Hashed only to be checked: a caller that pins the bytes hashes
		// what it reads itself.
		r.sha = sha256.New()
	}
	go func() {
		defer close(r.done)
		defer after()
		r.download(get, part, shared)
	}()
	return r
}

// download asks for each part in turn once a stream is free: the layer's
// own, or one of the fetch's that no other download holds.
func (b *inOrder) download(get func(ctx context.Context, off, n int64) ([]byte, error), part int64, shared *semaphore.Weighted) {
	defer close(b.parts)
	own := make(chan struct{}, 1)
	own <- struct{}{}
	stream := func() (release func(), ok bool) {
		select {
		case <-own:
			return func() { own <- struct{}{} }, true
		default:
		}
		if shared.TryAcquire(1) {
			return func() { shared.Release(1) }, true
		}
		select {
		case <-own:
			return func() { own <- struct{}{} }, true
		case <-b.ctx.Done():
			return nil, false
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for off := int64(0); off < b.size; off += part {
		n := min(part, b.size-off)
		p := &orderedPart{ready: make(chan struct{})}
		select {
		case b.parts <- p:
		case <-b.ctx.Done():
			return
		}
		release, ok := stream()
		if !ok {
			p.err = context.Cause(b.ctx)
			close(p.ready)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(p.ready)
			defer release()
			p.data, p.err = get(b.ctx, off, n)
		}()
	}
}

func (b *inOrder) Read(p []byte) (int, error) {
	for len(b.cur) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		next, ok := <-b.parts
		if !ok {
			b.err = b.end()
			continue
		}
		<-next.ready
		if next.err != nil {
			b.err = next.err
			continue
		}
		b.cur = next.data
	}
	n := copy(p, b.cur)
	if b.sha != nil {
		b.sha.Write(p[:n])
	}
	b.cur = b.cur[n:]
	b.read += int64(n)
	return n, nil
}

// end is the error at the object's end: io.EOF when it is whole and its
// sha256, if one is asked for, is that one.
func (b *inOrder) end() error {
	if b.read != b.size {
		if err := context.Cause(b.ctx); err != nil {
			return err
		}
		return io.ErrUnexpectedEOF
	}
	if b.sha == nil {
		return io.EOF
	}
	if got := hex.EncodeToString(b.sha.Sum(nil)); got != b.wantSHA256 {
		return fmt.Errorf("%w: its parts add up to sha256:%s, not sha256:%s", errDamaged, got, b.wantSHA256)
	}
	return io.EOF
}

// Close ends the downloads still running and waits for them.
func (b *inOrder) Close() error {
	b.cancel(errLayerAbandoned)
	for range b.parts {
	}
	<-b.done
	return nil
}
