package fetch

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

func TestReadingAheadGivesTheSourceUnchangedAndItsError(t *testing.T) {
	data := make([]byte, 100_003)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, size := range []int{1, 7, 4096, 1 << 20} {
		a := newAheadReader(iotest.HalfReader(bytes.NewReader(data)), 2, size)
		got, err := io.ReadAll(iotest.OneByteReader(io.LimitReader(a, 50_000)))
		if err != nil {
			t.Fatal(err)
		}
		rest, err := io.ReadAll(a)
		if err != nil || !bytes.Equal(append(got, rest...), data) {
			t.Errorf("chunks of %d: %d bytes read (%v), want the source's %d", size, len(got)+len(rest), err, len(data))
		}
		if a.sourceError() != nil {
			t.Errorf("chunks of %d: source error %v at the end", size, a.sourceError())
		}
		a.Close()
	}

	broken := errors.New("connection reset")
	a := newAheadReader(io.MultiReader(bytes.NewReader(data[:1000]), iotest.ErrReader(broken)), 4, 64)
	got, err := io.ReadAll(a)
	if !errors.Is(err, broken) || !bytes.Equal(got, data[:1000]) || !errors.Is(a.sourceError(), broken) {
		t.Errorf("read %d bytes, then %v (source error %v); want 1000, then %v", len(got), err, a.sourceError(), broken)
	}
	a.Close()

	// Stopped before the end: the source is not read after Close.
	src := &countingReader{r: bytes.NewReader(data)}
	a = newAheadReader(src, 2, 10)
	if _, err := io.ReadFull(a, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	a.Close()
	n := src.n
	if n > 4*10 {
		t.Errorf("%d bytes read ahead with 3 chunks of 10", n)
	}
	if a.sourceError() != nil {
		t.Errorf("stopping is taken for the source's error: %v", a.sourceError())
	}
	a.Close() // twice is fine
	if src.n != n {
		t.Error("the source was read after Close")
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
