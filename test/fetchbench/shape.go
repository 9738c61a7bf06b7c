package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
)

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// A shape is a model's files: each a valid SavedModel layout
// (1/saved_model.pb beside 1/variables/), so that the fetcher accepts it,
// filled with pseudo-random bytes that no transport can compress.
type shape struct {
	Name  string     `json:"name"`
	About string     `json:"about"`
	Files []fileSpec `json:"-"`
}

type fileSpec struct {
	Path string
	Size int64
}

func (s shape) Bytes() int64 {
	var n int64
	for _, f := range s.Files {
		n += f.Size
	}
	return n
}

// shapes are what the benchmark fetches: many medium files (a sharded
// checkpoint), one large file (what ranged parallel GETs are for) and many
// small ones (where each request's fixed cost counts).
func shapes() []shape {
	return []shape{
		savedModel("64x4MiB", "64 files of 4 MiB: saved_model.pb, variables.index and 62 data shards",
			4*mib, 4*mib, 62, 4*mib),
		savedModel("1x1GiB", "one 1 GiB data shard beside a 64 KiB saved_model.pb and a 4 KiB variables.index",
			64*kib, 4*kib, 1, gib),
		savedModel("2000x4KiB", "2,000 files of 4 KiB: saved_model.pb, variables.index and 1,998 data shards",
			4*kib, 4*kib, 1998, 4*kib),
	}
}

// savedModel is version 1 of a SavedModel whose variables are split in
// shards data files of shardSize bytes each.
func savedModel(name, about string, graphSize, indexSize int64, shards int, shardSize int64) shape {
	s := shape{Name: name, About: about, Files: []fileSpec{
		{Path: "1/saved_model.pb", Size: graphSize},
		{Path: "1/variables/variables.index", Size: indexSize},
	}}
	for i := range shards {
		s.Files = append(s.Files, fileSpec{
			Path: fmt.Sprintf("1/variables/variables.data-%05d-of-%05d", i, shards),
			Size: shardSize,
		})
	}
	return s
}

// content is the bytes of one file of a shape: the same on every run for
// the same shape and path, different between files.
func content(shapeName string, f fileSpec) io.Reader {
	seed := sha256.Sum256([]byte(shapeName + "/" + f.Path))
	return io.LimitReader(rand.NewChaCha8(seed), f.Size)
}

// fileSum is what a fetched file must be.
type fileSum struct {
	Size   int64
	SHA256 string
}

// writeFile writes f's content below dir and returns its sum.
func writeFile(dir, shapeName string, f fileSpec) (fileSum, error) {
	p := filepath.Join(dir, filepath.FromSlash(f.Path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fileSum{}, err
	}
	out, err := os.Create(p)
	if err != nil {
		return fileSum{}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), content(shapeName, f))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fileSum{}, fmt.Errorf("write %s: %w", p, err)
	}
	return fileSum{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}
