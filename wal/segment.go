package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/durable"
)

// spareName is the zero-filled segment file prepared ahead of need; it gets
// a header and a segment name when it becomes active. spareTmpName is the
// same file while it is being filled: a crash leaves at most a .tmp, which
// Open deletes.
const (
	spareName    = "next.spare"
	spareTmpName = "next.spare.tmp"
	segTmpSuffix = ".tmp"
)

// zeroChunk is the size of the writes that zero-fill a segment, aligned
// to it. The page cache keeps what one write brings in as one folio (up
// to a large one), and ext4 walks every block of a folio on each later
// write into it: over a spare filled 1 MiB at a time, each record's
// write of a few hundred bytes cost 2.7 µs of CPU, over one filled 64
// KiB at a time 1.1 µs, as much as an append to a fresh file (Linux 6.18,
// bench/RESULTS-zerofill-2026-12-07.md).
const zeroChunk = 64 << 10

// writeZeros writes zeros over [from, to) of f in zeroChunk writes
// aligned to zeroChunk. On failure it returns the offset of the write
// that failed.
func writeZeros(f vfs.File, from, to int64) (int64, error) {
	zeros := make([]byte, max(0, min(zeroChunk, to-from)))
	for off := from; off < to; {
		n := min(zeroChunk-off%zeroChunk, to-off)
		clear(zeros) // vfs writes may modify their argument
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return off, err
		}
		off += n
	}
	return 0, nil
}

// parseSegmentName returns the id of a segment file name, or false.
func parseSegmentName(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, ".wal")
	if !ok || len(hex) != 16 {
		return 0, false
	}
	id, err := strconv.ParseUint(hex, 16, 64)
	if err != nil || id == 0 {
		return 0, false
	}
	return id, true
}

func (l *Log) path(name string) string { return l.fs.PathJoin(l.dir, name) }

// syncDir makes creations, renames and removals in the log directory durable.
func (l *Log) syncDir() error {
	if err := durable.SyncDir(l.fs, l.dir); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	return nil
}

// MinPrealloc is the default capacity of the first segment of a log, and
// of the segment a writable Open starts when it cannot resume the newest
// one (Options.InitialSegmentSize): min(MinPrealloc, SegmentSize) bytes,
// zero-filled when created. Each segment after it has twice the capacity
// of the one before, up to SegmentSize, and is zero-filled in the
// background (the spare) while its predecessor fills. A log thus takes on
// disk about twice what it holds, never a whole SegmentSize for a few
// records: a new log takes 64 KiB, and Open needs at most that much free
// space.
const MinPrealloc = 64 << 10

// capFor returns the capacity of the segment that follows one of capacity
// prev (0: the first one, or the first after Open) and must hold a batch
// spanning need bytes: twice prev, at least the initial capacity and what
// need takes, at most the segment size, rounded to 4 KiB.
func (l *Log) capFor(prev, need int64) int64 {
	c := max(2*prev, l.initSize, SegmentHeaderSize+need+sealSpan)
	c = (c + 4<<10 - 1) &^ (4<<10 - 1)
	return min(c, l.segSize)
}

// prepareSpare zero-fills a file of size bytes and publishes it as the
// spare. It runs in the background; its error comes back on a channel. A
// failed attempt removes its temporary file at once: on a full disk it
// would otherwise hold the space it managed to take.
func (l *Log) prepareSpare(size int64) error {
	tmp, final := l.path(spareTmpName), l.path(spareName)
	f, err := durable.Create(l.fs, tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("wal: create spare segment %s: %w", tmp, unwrapPathErr(err))
	}
	open := true
	fail := func(err error) error {
		if open {
			f.Close()
		}
		if rerr := l.fs.Remove(tmp); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			l.logger.Warn("wal: remove the spare segment of a failed attempt", "file", tmp, "err", rerr)
		}
		return err
	}
	if off, err := writeZeros(f, 0, size); err != nil {
		return fail(fmt.Errorf("wal: zero-fill spare segment %s at offset %d of %d: %w", tmp, off, size, unwrapPathErr(err)))
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("wal: sync spare segment %s: %w", tmp, unwrapPathErr(err)))
	}
	open = false
	if err := f.Close(); err != nil {
		return fail(fmt.Errorf("wal: close spare segment %s: %w", tmp, unwrapPathErr(err)))
	}
	if err := l.fs.Rename(tmp, final); err != nil {
		return fail(fmt.Errorf("wal: rename spare segment %s to %s: %w", tmp, spareName, unwrapPathErr(err)))
	}
	return l.syncDir()
}

// spareSize returns the size of the spare file if a usable one exists:
// a multiple of 4 KiB between MinSegmentSize and the segment size (an
// older process may have prepared it with another SegmentSize).
func (l *Log) spareSize() (int64, bool) {
	fi, err := l.fs.Stat(l.path(spareName))
	if err != nil {
		return 0, false
	}
	n := fi.Size()
	return n, n >= MinSegmentSize && n <= l.segSize && n%(4<<10) == 0
}

// spareReady reports whether a usable spare exists.
func (l *Log) spareReady() bool {
	_, ok := l.spareSize()
	return ok
}

// activate makes segment id the active one, of capacity size: from the
// spare if useSpare (write its header, fdatasync, rename; its size is its
// capacity), else a new file, zero-filled to size when zeroFill is set, or
// growing as records are appended. Either way the header is durable before
// the file carries the segment's name, and the directory is synced after.
// A new file that fails is removed at once.
func (l *Log) activate(id uint64, size int64, useSpare, zeroFill bool) (vfs.File, error) {
	var hdr [SegmentHeaderSize]byte
	encodeSegmentHeader(hdr[:], id)
	final := l.path(segmentName(id))
	var f vfs.File
	var src string
	var err error
	if useSpare {
		src = l.path(spareName)
		f, err = l.fs.OpenReadWrite(src, vfs.WriteCategoryUnspecified)
	} else {
		src = l.path(segmentName(id) + segTmpSuffix)
		f, err = durable.Create(l.fs, src, vfs.WriteCategoryUnspecified)
	}
	if err != nil {
		return nil, fmt.Errorf("wal: create segment %d (%s): %w", id, src, unwrapPathErr(err))
	}
	fail := func(what string, err error) (vfs.File, error) {
		f.Close()
		if !useSpare {
			if rerr := l.fs.Remove(src); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				l.logger.Warn("wal: remove the segment of a failed attempt", "file", src, "err", rerr)
			}
		}
		return nil, fmt.Errorf("wal: %s segment %d (%s): %w", what, id, src, unwrapPathErr(err))
	}
	if _, err := f.WriteAt(hdr[:], 0); err != nil {
		return fail("write header of", err)
	}
	if zeroFill && !useSpare {
		if off, err := writeZeros(f, SegmentHeaderSize, size); err != nil {
			return fail(fmt.Sprintf("zero-fill (offset %d of %d) of", off, size), err)
		}
	}
	if useSpare {
		err = f.SyncData()
	} else {
		err = f.Sync()
	}
	if err != nil {
		return fail("sync header of", err)
	}
	if err := l.fs.Rename(src, final); err != nil {
		return fail("name", unwrapPathErr(err))
	}
	if err := l.syncDir(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// unwrapPathErr returns the cause of an *os.PathError or *os.LinkError,
// for a message that names the path already.
func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// lastNonzero returns the end of the last nonzero byte of segment id's
// file f in [from, to), or from if they are all zero (or past its end).
func lastNonzero(f vfs.File, id uint64, from, to int64) (int64, error) {
	return lastNonzeroBuf(f, id, from, to, nil)
}

// lastNonzeroBuf is lastNonzero reading through buf (its capacity) when
// that holds at least 4 KiB, so that a caller done with a buffer of its
// own lends it instead of this allocating one.
func lastNonzeroBuf(f vfs.File, id uint64, from, to int64, buf []byte) (int64, error) {
	if to <= from {
		return from, nil
	}
	if buf = buf[:cap(buf)]; len(buf) < 4<<10 {
		buf = make([]byte, min(256<<10, to-from))
	}
	last := from
	for off := from; off < to; off += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), to-off)]
		n, err := readFull(f, b, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("wal: read segment %d at offset %d: %w", id, off, err)
		}
		b = b[:n]
		if i := lastNonzeroIndex(b); i >= 0 {
			last = off + int64(i) + 1
		}
		if n < len(buf) {
			break
		}
	}
	return last, nil
}

// lastNonzeroIndex is the index of the last nonzero byte of b, or -1.
func lastNonzeroIndex(b []byte) int {
	var zero [4 << 10]byte
	for end := len(b); end > 0; {
		start := max(0, end-len(zero))
		if !bytes.Equal(b[start:end], zero[:end-start]) {
			for i := end - 1; ; i-- {
				if b[i] != 0 {
					return i
				}
			}
		}
		end = start
	}
	return -1
}

// readFull reads len(b) bytes at off; io.EOF only when fewer were available.
func readFull(f vfs.File, b []byte, off int64) (int, error) {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return n, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return n, io.EOF
	}
	return n, err
}

// trimAtRest gives back, at Close, the space a log prepared ahead of need,
// when its active segment has more room than the next Open needs: it
// truncates that segment to InitialSegmentSize bytes past its last record
// (rounded up to 4 KiB) and removes the spare. The room left lets the next
// Open resume the segment and its first commits write into prepared
// blocks, as a new log's do, and the spare is made again once half of it
// is used (spareAt). An active segment with no more room than that is
// left whole, with its spare: the next session would need the spare soon,
// and without one it would rotate into a growing segment. So a closed
// store holds what it wrote and little more. Both are crash safe without
// a sync: the bytes they give back are zeros past every durable record, so
// a crash that loses the truncation or the removal leaves a log that opens
// the same way. A filesystem whose files cannot be truncated (vfs.MemFS)
// keeps both. A failure is logged, not returned: the log itself is intact.
// Called by Close once the owner has stopped, everything written is
// durable and no spare is being prepared.
func (l *Log) trimAtRest() {
	t, ok := l.w.f.(interface{ Truncate(size int64) error })
	if !ok {
		return
	}
	fi, err := l.w.f.Stat()
	if err != nil {
		l.logger.Warn("wal: stat the active segment at close", "file", l.path(segmentName(l.w.seg)), "err", unwrapPathErr(err))
		return
	}
	keep := (l.w.off + l.initSize + 4<<10 - 1) &^ (4<<10 - 1)
	if fi.Size() <= keep {
		return // a growing segment, or one with little room left
	}
	if err := t.Truncate(keep); err != nil {
		l.logger.Warn("wal: truncate the active segment at close", "file", l.path(segmentName(l.w.seg)), "size", keep, "err", unwrapPathErr(err))
		return
	}
	if err := l.fs.Remove(l.path(spareName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.logger.Warn("wal: remove the spare segment at close", "file", l.path(spareName), "err", unwrapPathErr(err))
	}
	l.w.haveSpare = false
}
