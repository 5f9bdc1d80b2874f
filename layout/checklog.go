package layout

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// CheckLog refuses a log l (nil: none) of the store in dir that is gone or
// lost records: it holds no segment, does not start at segment 1 or at
// or below ret's floor (ret, RETENTION, nil: none; see ReadRetention), or
// ends before the replay position of cp, CHECKPOINT (nil: none), the
// witness of where the log reached. The error is a
// *record.CorruptionError naming the missing file.
func CheckLog(fs vfs.FS, dir string, l *wal.Log, cp *Checkpoint, ret *Retention) error {
	path := func(name string) string { return fs.PathJoin(dir, name) }
	segmentFile := func(seg uint64) string { return fs.PathJoin(dir, WALDir, wal.SegmentName(seg)) }
	if l == nil {
		return record.Corruptf(path(WALDir), "missing: the log is gone, but %s says a store was here", path(StoreName))
	}
	segs := l.Segments()
	if len(segs) == 0 {
		return record.Corruptf(path(WALDir), "holds no log segment: the log is gone, but %s says a store was here", path(StoreName))
	}
	switch first := segs[0].ID; {
	case first == 1:
	case ret == nil:
		return record.Corruptf(segmentFile(1), "missing: the log starts at segment %d, and no %s says that garbage collection removed the segments before it",
			first, path(RetentionName))
	case first > ret.Floor:
		return record.Corruptf(segmentFile(ret.Floor), "missing: the log starts at segment %d, but %s says garbage collection kept every segment from %d",
			first, path(RetentionName), ret.Floor)
	}
	if cp != nil {
		end := l.End()
		at := cp.Replay
		if end.Less(at) {
			if at.Segment > end.Segment {
				return record.Corruptf(segmentFile(end.Segment+1), "missing: the log ends at %v, but %s (generation %d) replays from %v",
					end, path(CheckpointName), cp.Gen, at)
			}
			return record.Corruptf(segmentFile(at.Segment), "ends at offset %d, but %s (generation %d) replays from offset %d: records are missing",
				end.Offset, path(CheckpointName), cp.Gen, at.Offset)
		}
	}
	return nil
}
