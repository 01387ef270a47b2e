package storage

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

const segmentSuffix = ".log"

// segmentName is Kafka's file name for a segment: the base offset as 20
// zero-padded decimal digits, so names sort like offsets.
func segmentName(base int64) string { return fmt.Sprintf("%020d%s", base, segmentSuffix) }

// parseSegmentName returns the base offset in a segment file name.
func parseSegmentName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// indexEntry maps the base offset of a batch to its byte position.
type indexEntry struct {
	offset int64
	pos    int64
}

// segment is one .log file. Its sparse offset index lives in memory only: it
// is rebuilt by the full scan in Open, which verifies every batch's CRC
// anyway (Kafka keeps a memory-mapped .index file and rebuilds it after an
// unclean shutdown; logs in chaos runs are small enough that always
// rebuilding is cheaper than keeping a second file crash-consistent).
type segment struct {
	base       int64
	path       string
	f          *os.File
	size       int64 // bytes of valid batches
	next       int64 // offset after the last batch; base when empty
	index      []indexEntry
	sinceIndex int64 // bytes appended since the last index entry
}

func openSegmentFile(dir string, base int64, create bool) (*segment, error) {
	path := filepath.Join(dir, segmentName(base))
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("storage: open segment: %w", err)
	}
	return &segment{base: base, path: path, f: f, next: base}, nil
}

// noteBatch records a batch just placed at pos (by append or by the scan).
func (s *segment) noteBatch(pos int64, h BatchHeader, interval int64) {
	if s.sinceIndex >= interval {
		s.index = append(s.index, indexEntry{offset: h.BaseOffset, pos: pos})
		s.sinceIndex = 0
	}
	s.sinceIndex += h.Size()
	s.size = pos + h.Size()
	s.next = h.LastOffset() + 1
}

// lookup returns a byte position at or before the batch containing offset:
// the largest indexed batch start whose base offset is <= offset.
func (s *segment) lookup(offset int64) int64 {
	i := sort.Search(len(s.index), func(i int) bool { return s.index[i].offset > offset })
	if i == 0 {
		return 0
	}
	return s.index[i-1].pos
}

// readPrefix reads the first headerPrefix bytes of the batch at pos and
// returns its base offset, total size and last offset. The bytes were
// validated when appended or scanned, so only a concurrent failure of the
// disk can make them inconsistent; sizes are still checked to avoid loops.
func (s *segment) readPrefix(pos int64, buf []byte) (base, size, last int64, err error) {
	if _, err := s.f.ReadAt(buf[:headerPrefix], pos); err != nil {
		return 0, 0, 0, fmt.Errorf("storage: read batch header at %s position %d: %w", s.path, pos, err)
	}
	be := binary.BigEndian
	base = int64(be.Uint64(buf[0:]))
	size = int64(int32(be.Uint32(buf[8:]))) + logOverhead
	last = base + int64(int32(be.Uint32(buf[23:])))
	if size < BatchHeaderSize || pos+size > s.size {
		return 0, 0, 0, fmt.Errorf("storage: %s position %d: batch size %d inconsistent with segment size %d", s.path, pos, size, s.size)
	}
	return base, size, last, nil
}

// findBatch returns the position of the first batch whose last offset is >=
// offset, or s.size when there is none.
func (s *segment) findBatch(offset int64, buf []byte) (pos int64, err error) {
	pos = s.lookup(offset)
	for pos < s.size {
		_, size, last, err := s.readPrefix(pos, buf)
		if err != nil {
			return 0, err
		}
		if last >= offset {
			return pos, nil
		}
		pos += size
	}
	return s.size, nil
}

// truncateIndex drops index entries at or beyond pos.
func (s *segment) truncateIndex(pos int64) {
	i := sort.Search(len(s.index), func(i int) bool { return s.index[i].pos >= pos })
	s.index = s.index[:i]
	last := int64(0)
	if i > 0 {
		last = s.index[i-1].pos
	}
	s.sinceIndex = pos - last
}

// read serves Log.Read from this segment. It reads one chunk starting at the
// indexed position — enough for the index gap plus maxBytes — and walks the
// batch headers in memory, so a typical fetch costs one pread; headers or
// batches beyond the chunk are read separately. more reports that from lies
// at or past this segment's end, so the caller should try the next segment.
func (s *segment) read(from int64, maxBytes int, maxOffset, interval int64) (out []byte, more bool, err error) {
	pos0 := s.lookup(from)
	n := interval + int64(maxBytes) + headerPrefix
	if n > s.size-pos0 {
		n = s.size - pos0
	}
	chunk := make([]byte, n)
	if _, err := s.f.ReadAt(chunk, pos0); err != nil {
		return nil, false, fmt.Errorf("storage: read %s at %d: %w", s.path, pos0, err)
	}
	var hbuf [headerPrefix]byte
	header := func(pos int64) (size, last int64, err error) {
		if rel := pos - pos0; rel+headerPrefix <= int64(len(chunk)) {
			h := chunk[rel:]
			be := binary.BigEndian
			base := int64(be.Uint64(h))
			size = int64(int32(be.Uint32(h[8:]))) + logOverhead
			if size < BatchHeaderSize || pos+size > s.size {
				return 0, 0, fmt.Errorf("storage: %s position %d: batch size %d inconsistent with segment size %d", s.path, pos, size, s.size)
			}
			return size, base + int64(int32(be.Uint32(h[23:]))), nil
		}
		_, size, last, err = s.readPrefix(pos, hbuf[:])
		return size, last, err
	}
	// skip walks the batches from pos while over says a batch is to be
	// passed over and returns where it stopped (s.size at the segment's end).
	skip := func(pos int64, over func(pos, size, last int64) bool) (int64, error) {
		for pos < s.size {
			size, last, err := header(pos)
			if err != nil || !over(pos, size, last) {
				return pos, err
			}
			pos += size
		}
		return pos, nil
	}
	start, err := skip(pos0, func(_, _, last int64) bool { return last < from })
	if err != nil {
		return nil, false, err
	}
	if start >= s.size {
		return nil, true, nil
	}
	end, err := skip(start, func(pos, size, last int64) bool {
		return last < maxOffset && (pos == start || pos-start+size <= int64(maxBytes))
	})
	if err != nil {
		return nil, false, err
	}
	if end == start {
		return nil, false, nil // the next batch reaches maxOffset
	}
	if end-pos0 <= int64(len(chunk)) {
		return chunk[start-pos0 : end-pos0 : end-pos0], false, nil
	}
	out = make([]byte, end-start)
	if _, err := s.f.ReadAt(out, start); err != nil {
		return nil, false, fmt.Errorf("storage: read %s at %d: %w", s.path, start, err)
	}
	return out, false, nil
}
