package replicate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

// Cutting back a copy's unacknowledged tail: the records at the end of the
// local log that the stream never acknowledged (the group a fenced writer's
// publish was refused, its Close's checkpoint, the group in flight at a
// crash) are removed so that the copy can be caught up instead of
// restored from the whole stream.
//
// The wal has no operation that removes records, so the cut relies on its
// frozen on-disk format (wal/format.go) and recovery rules (wal/doc.go):
// segment files are named "%016x.wal"; records start 8-byte aligned; an
// all-zero record header is the end of the written data; a bad record is
// a torn tail unless a later valid record's synced mark lies past it; and
// a writable Open zeroes whatever non-zero bytes lie within 512 KiB past
// the tail before it appends. The cut zeroes the newest segment from the
// first unacknowledged record to the last non-zero byte, in chunks from
// the end backwards, each made durable before the next: after a crash in
// it, the log holds the records before the cut and a shorter prefix of
// the unacknowledged tail (every one of those records carries a synced
// mark at or before the cut, so none can vouch for a zeroed record behind
// it), and the next Open cuts again. Then the log is opened again
// read-only, and the cut stands only if the log ends exactly there.
//
// It is refused (and the copy replaced instead) unless the whole tail
// lies in the newest segment, which is not sealed, and the cut is at or
// after CHECKPOINT's replay position: the engine's derived files never
// reflect a record its log did not acknowledge, so they all lie before.

const (
	// cutChunk is how much is zeroed, and made durable, at a time: well
	// within the wal's 512 KiB window, so that what a crash leaves of a
	// chunk is zeroed by the next writable Open.
	cutChunk = 64 << 10
	// staleWindow bounds where, past the log's tail, a crash can have left
	// non-zero bytes: twice the wal's bound of 512 KiB written but not
	// durable.
	staleWindow = 1 << 20
)

// cutLog removes the records of the local log in dir from at (a record's
// position in the newest segment) to its end, end. It returns a reason
// when it cannot, having changed nothing.
// scanFrom is a position of the log before at, where its recovery may
// start scanning.
func cutLog(dir string, at, end wal.Pos, newestSealed bool, scanFrom wal.Pos) (reason string, err error) {
	switch {
	case at.Segment != end.Segment || newestSealed:
		return fmt.Sprintf("the records to cut (from %v) are not all in the newest segment, unsealed (the log ends at %v)", at, end), nil
	case at.Offset < wal.SegmentHeaderSize || at.Offset%wal.RecordAlign != 0 || end.Offset < at.Offset:
		return fmt.Sprintf("no record can start at %v (the log ends at %v)", at, end), nil
	}
	name := filepath.Join(dir, layout.CheckpointName)
	switch b, err := os.ReadFile(name); {
	case err == nil:
		cp, err := layout.ParseCheckpoint(name, b)
		if err != nil {
			return fmt.Sprintf("%v", err), nil
		}
		if at.Less(cp.Replay) {
			return fmt.Sprintf("%s replays from %v, after the cut at %v", name, cp.Replay, at), nil
		}
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("replicate: cut: %w", err)
	}
	walDir := filepath.Join(dir, layout.WALDir)
	seg := filepath.Join(walDir, fmt.Sprintf("%016x.wal", at.Segment))
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("replicate: cut: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("replicate: cut: %w", err)
	}
	// The last non-zero byte: the tail's records, or stale bytes past them.
	limit := end.Offset
	if n := min(fi.Size(), end.Offset+staleWindow) - end.Offset; n > 0 {
		b := make([]byte, n)
		if _, err := f.ReadAt(b, end.Offset); err != nil {
			return "", fmt.Errorf("replicate: cut: read %s at %d: %w", seg, end.Offset, err)
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != 0 {
				limit = end.Offset + int64(i) + 1
				break
			}
		}
	}
	zeros := make([]byte, cutChunk)
	for hi := limit; hi > at.Offset; {
		lo := max(at.Offset, hi-cutChunk)
		if _, err := f.WriteAt(zeros[:hi-lo], lo); err != nil {
			return "", fmt.Errorf("replicate: cut: zero %s at %d: %w", seg, lo, err)
		}
		if err := f.Sync(); err != nil {
			return "", fmt.Errorf("replicate: cut: sync %s: %w", seg, err)
		}
		hi = lo
	}
	l, err := wal.Open(walDir, &wal.Options{FS: vfs.Default, ReadOnly: true, ScanFrom: scanFrom})
	if err != nil {
		return "", fmt.Errorf("replicate: cut: the log after the cut at %v does not open: %w", at, err)
	}
	got, torn := l.End(), l.Recovery().TornBytes
	l.Close()
	if got != at || torn != 0 {
		return "", fmt.Errorf("replicate: cut: the log ends at %v after the cut at %v (%d torn bytes)", got, at, torn)
	}
	return "", nil
}
