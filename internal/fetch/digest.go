package fetch

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
)

// A file's record in the manifest names its content by a digest.
//
// Format 1 of the manifest (every manifest written before format 2, which
// has no "format" field) records each file's sha256.
//
// Format 2 records a file of chunkedMinSize bytes or more by the sha256 of
// the sha256 digests of its chunks of digestChunkSize bytes (the last one
// shorter), concatenated in order. A large file is downloaded as ranges;
// its plain sha256 needs every byte in order, so it was hashed once more,
// read back from the page cache on one CPU, after the ranges arrived: on a
// 2-CPU node that hash was the critical path of the download. Each chunk's
// digest is computed from the buffer its bytes arrive in, on any CPU, and
// read back from nowhere. Files below chunkedMinSize keep their sha256, so
// a model without large files has the same digest in either format.
//
// The rule depends on the size alone, never on how a file was fetched:
// the same model has the same digest from S3 in ranges, from HTTP in one
// piece, from an archive, or verified on a claim.
const (
	manifestFormat        = 2
	digestChunkSize int64 = 16 << 20
	chunkedMinSize        = 4 * digestChunkSize
)

// contentHash hashes a file's bytes, written to it in order: the plain
// sha256, the chunks' digests, or both.
type contentHash struct {
	plain   hash.Hash // nil: not wanted
	chunk   hash.Hash // nil: not wanted
	inChunk int64     // bytes of the current chunk written
	sums    []byte    // the digests of the complete chunks
}

// newContentHash hashes a file of size bytes (-1: not known yet) for its
// format-2 record; plain asks for its sha256 as well (a URI's #sha256 pins
// it), whatever the size.
func newContentHash(size int64, plain bool) *contentHash {
	h := &contentHash{}
	if plain || size < chunkedMinSize {
		h.plain = sha256.New()
	}
	if size < 0 || size >= chunkedMinSize {
		h.chunk = sha256.New()
	}
	return h
}

// newPlainHash hashes a file for its sha256 alone (format 1's records).
func newPlainHash() *contentHash { return &contentHash{plain: sha256.New()} }

// newChunksHash hashes the chunks of one part of a file, the part starting
// where a chunk starts.
func newChunksHash() *contentHash { return &contentHash{chunk: sha256.New()} }

func (h *contentHash) Write(p []byte) (int, error) {
	n := len(p)
	if h.plain != nil {
		_, _ = h.plain.Write(p) // a hash's Write never fails
	}
	for h.chunk != nil && len(p) > 0 {
		k := min(int64(len(p)), digestChunkSize-h.inChunk)
		_, _ = h.chunk.Write(p[:k])
		h.inChunk += k
		p = p[k:]
		if h.inChunk == digestChunkSize {
			h.sums = h.chunk.Sum(h.sums)
			h.chunk.Reset()
			h.inChunk = 0
		}
	}
	return n, nil
}

// chunkSums is the digests of every chunk written, the last one possibly
// short.
func (h *contentHash) chunkSums() []byte {
	if h.inChunk == 0 {
		return h.sums
	}
	return h.chunk.Sum(append([]byte(nil), h.sums...))
}

// sha256Hex is the plain sha256 ("" when it was not asked for).
func (h *contentHash) sha256Hex() string {
	if h.plain == nil {
		return ""
	}
	return hex.EncodeToString(h.plain.Sum(nil))
}

// record is the format-2 record of the size bytes written.
func (h *contentHash) record(size int64) fileRecord {
	return recordOf(size, h.sha256Hex(), h.chunkSums())
}

// recordOf is the format-2 record of a file of size bytes, from its sha256
// or its chunks' digests, whichever the size calls for.
func recordOf(size int64, sha256Hex string, chunkSums []byte) fileRecord {
	if size >= chunkedMinSize {
		sum := sha256.Sum256(chunkSums)
		return fileRecord{Size: size, ChunkedSHA256: hex.EncodeToString(sum[:])}
	}
	return fileRecord{Size: size, SHA256: sha256Hex}
}

// chunkTable holds the digests of a large file's chunks, each put in its
// place as the chunks are hashed, in any order and on any CPU.
type chunkTable []byte

func newChunkTable(size int64) chunkTable {
	return make(chunkTable, (size+digestChunkSize-1)/digestChunkSize*sha256.Size)
}

// put places sums, the digests of the chunks from the one at off on.
func (t chunkTable) put(off int64, sums []byte) {
	copy(t[off/digestChunkSize*sha256.Size:], sums)
}
