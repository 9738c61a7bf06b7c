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
// read back from nowhere. Files below chunkedMinSize keep their sha256.
//
// Format 3 is format 2 with BLAKE3 (256 bits) in place of sha256. On a CPU
// without SHA instructions (Intel's before Ice Lake, still common among
// cloud nodes) sha256 hashes 0.2–0.3 GB/s on a core: 4 CPU-seconds per GiB,
// more than the download itself, so the fetch was bound by its hash. BLAKE3
// hashes 2–2.4 GB/s on the same core with AVX2, which x86 CPUs have had
// since 2013 (the library falls back to SSE4.1, then to plain Go).
//
// The rule depends on the size alone, never on how a file was fetched:
// the same model has the same digest from S3 in ranges, from HTTP in one
// piece, from an archive, or verified on a claim. A manifest of an earlier
// format is still verified as it was written, so a model fetched before an
// upgrade is not fetched again and keeps its digest.
const (
	manifestFormat        = 3
	digestChunkSize int64 = 16 << 20
	chunkedMinSize        = 4 * digestChunkSize
	// digestSize is the size of a chunk's digest, sha256's and BLAKE3's
	// alike.
	digestSize = 32
)

// newFormatHash is the hash a manifest of the format records files by.
func newFormatHash(format int) hash.Hash {
	if format >= 3 {
		return newFormat3Hash()
	}
	return sha256.New()
}

// contentHash hashes a file's bytes, written to it in order, for its
// record in a manifest of one format: the digest of the whole file, the
// chunks' digests, or both; and, apart, its sha256 for a URI's #sha256 pin.
type contentHash struct {
	format  int
	whole   hash.Hash // nil: not wanted
	pinned  hash.Hash // nil: no pin
	chunk   hash.Hash // nil: not wanted
	inChunk int64     // bytes of the current chunk written
	sums    []byte    // the digests of the complete chunks
}

// newContentHash hashes a file of size bytes (-1: not known yet) that is
// being downloaded, for its record in a manifest of this fetcher's format;
// pinned asks for its sha256 as well (a URI's #sha256 pins it).
func newContentHash(size int64, pinned bool) *contentHash {
	h := &contentHash{format: manifestFormat}
	if size < chunkedMinSize {
		h.whole = newFormatHash(manifestFormat)
	}
	if size < 0 || size >= chunkedMinSize {
		h.chunk = newFormatHash(manifestFormat)
	}
	if pinned {
		h.pinned = sha256.New()
	}
	return h
}

// newWholeHash hashes a whole file for its record in a manifest of format
// (every file's in format 1, a small file's in the others).
func newWholeHash(format int) *contentHash {
	return &contentHash{format: format, whole: newFormatHash(format)}
}

// newPinHash hashes a file for its sha256 alone, which a URI's #sha256
// pins.
func newPinHash() *contentHash { return &contentHash{format: manifestFormat, pinned: sha256.New()} }

// newChunksHash hashes the chunks of one part of a file, the part starting
// where a chunk starts, as format records them.
func newChunksHash(format int) *contentHash {
	return &contentHash{format: format, chunk: newFormatHash(format)}
}

func (h *contentHash) Write(p []byte) (int, error) {
	n := len(p)
	if skipHash {
		return n, nil
	}
	// A hash's Write never fails.
	if h.whole != nil {
		_, _ = h.whole.Write(p)
	}
	if h.pinned != nil {
		_, _ = h.pinned.Write(p)
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

// pinnedSHA256 is the sha256 a pin is checked against ("" when there is
// no pin).
func (h *contentHash) pinnedSHA256() string { return hexSum(h.pinned) }

func hexSum(h hash.Hash) string {
	if h == nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// record is the record of the size bytes written.
func (h *contentHash) record(size int64) fileRecord {
	return recordOf(h.format, size, hexSum(h.whole), h.chunkSums())
}

// recordOf is the record, in a manifest of format, of a file of size bytes
// from the digest of the whole file or its chunks' digests, whichever the
// size calls for.
func recordOf(format int, size int64, wholeHex string, chunkSums []byte) fileRecord {
	if format >= 2 && size >= chunkedMinSize {
		h := newFormatHash(format)
		_, _ = h.Write(chunkSums)
		if format >= 3 {
			return fileRecord{Size: size, ChunkedBLAKE3: hexSum(h)}
		}
		return fileRecord{Size: size, ChunkedSHA256: hexSum(h)}
	}
	if format >= 3 {
		return fileRecord{Size: size, BLAKE3: wholeHex}
	}
	return fileRecord{Size: size, SHA256: wholeHex}
}

// chunkTable holds the digests of a large file's chunks, each put in its
// place as the chunks are hashed, in any order and on any CPU.
type chunkTable []byte

func newChunkTable(size int64) chunkTable {
	return make(chunkTable, (size+digestChunkSize-1)/digestChunkSize*digestSize)
}

// put places sums, the digests of the chunks from the one at off on.
func (t chunkTable) put(off int64, sums []byte) {
	copy(t[off/digestChunkSize*digestSize:], sums)
}
