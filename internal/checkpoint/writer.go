package checkpoint

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/snapindex"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/zeebo/blake3"
)

// Writer writes an engine checkpoint's frame files and its snapshot
// batch: the first part of an engine checkpoint, before the ledger table
// and CHECKPOINT (the engine's), which names them.
type Writer struct {
	fs        vfs.FS
	framesDir string
	noSync    bool
	part      int
	snaps     *snapshot.Store
	files     *layout.FileBatch
	b         *snapshot.Batch // nil: no snapshot store, or it failed
}

// NewWriter returns a Writer of frame files into framesDir and, if snaps
// is not nil, of a snapshot batch into snaps, committed (unsynced) in
// parts of part bytes: a batch much larger than Pebble's memtable is
// queued whole as a flushable batch, and its buffer stays in the heap long
// after. The caller calls Discard when done, whatever happened.
func NewWriter(fs vfs.FS, framesDir string, noSync bool, snaps *snapshot.Store, part int) *Writer {
	w := &Writer{fs: fs, framesDir: framesDir, noSync: noSync, part: part, snaps: snaps,
		files: &layout.FileBatch{FS: fs, NoSync: noSync}} // several at once on the OS's filesystem
	if snaps != nil {
		w.b = snaps.NewBatch()
	}
	return w
}

// failed reports whether err is the snapshot store's failure (its sticky
// error, logged once): the checkpoint goes on without it.
func failed(err error) bool {
	return errors.Is(err, snapshot.ErrFailed) || errors.Is(err, snapshot.ErrClosed)
}

// Add queues c's frame file, named file, if c writes one (setting
// c.FileSum), and puts c into the snapshot batch; it lets go of c's frame
// encodings.
func (w *Writer) Add(c *Capture, file string) error {
	if c.FileDue() && c.Frame != nil {
		ff := layout.FrameFile{Run: c.Run, Seq: c.Seq, Head: c.Head, Frame: c.Frame}
		data := ff.Marshal()
		c.FileSum = blake3.Sum256(data)
		if err := w.files.Add(file, data); err != nil {
			return err
		}
	}
	if w.b != nil {
		switch err := c.AddTo(w.b); {
		case err == nil:
		case failed(err):
			// A plain frame's chunks are looked up in the store: it
			// failed, and the checkpoint goes on without it.
			w.b.Discard()
			w.b = nil
		default:
			return err
		}
		if w.b.Size() >= w.part {
			// A part of the batch, unsynced, as a background snapshot is:
			// the synced last part makes them all durable, and names the
			// generation only once they are all in.
			switch err := w.b.Commit(false); {
			case err == nil:
				w.b = w.snaps.NewBatch()
			case failed(err):
				w.b = nil
			default:
				return fmt.Errorf("engine: checkpoint: snapshots: %w", err)
			}
		}
	}
	// The frame file is queued and the batch holds the snapshot's bytes:
	// nothing reads the frame's encodings again.
	c.Frame, c.Raw = nil, nil
	return nil
}

// Finish writes the frame files and syncs their directory, then commits
// the snapshot batch, synced, with generation gen (snapindex.PutGen).
// stored reports whether the snapshot store holds the batch of gen: a
// failed store (its sticky error, logged once) is not an error of the
// checkpoint, which goes on without it.
func (w *Writer) Finish(gen uint64) (stored bool, err error) {
	if err := w.files.Flush(); err != nil {
		return false, err
	}
	if !w.noSync {
		if err := layout.SyncDir(w.fs, w.framesDir); err != nil {
			return false, err
		}
	}
	if w.b == nil {
		return false, nil
	}
	if err := snapindex.PutGen(w.b, gen); err != nil {
		return false, err
	}
	switch err := w.b.Commit(!w.noSync); {
	case err == nil:
		return true, nil
	case failed(err):
		return false, nil
	default:
		return false, fmt.Errorf("engine: checkpoint: snapshots: %w", err)
	}
}

// Snapshots reports whether the Writer still has a snapshot batch: it had
// a snapshot store, and the store has not failed.
func (w *Writer) Snapshots() bool { return w.b != nil }

// Discard lets go of a snapshot batch not committed.
func (w *Writer) Discard() { w.b.Discard() }

// WriteSnapshot writes c as one background snapshot into s, unsynced:
// the next engine checkpoint's synced batch makes it durable, and until
// then the log holds everything. ok is false when it was not written; err
// is set only when that is an error of the engine's: a failed store (its
// sticky error, logged once; a plain frame's chunks are looked up in it)
// is not.
func (c *Capture) WriteSnapshot(s *snapshot.Store) (ok bool, err error) {
	b := s.NewBatch()
	if err := c.AddTo(b); err != nil {
		b.Discard()
		if failed(err) {
			return false, nil
		}
		return false, err
	}
	if err := b.Commit(false); err != nil {
		if failed(err) {
			return false, nil
		}
		return false, fmt.Errorf("engine: snapshot of run %q at seq %d: %w", c.Run, c.Seq, err)
	}
	return true, nil
}

// WriteStoreFile writes a file of the engine checkpoint that names
// generation gen (the ledger table, INBOX): sealed for place in an
// encrypted store (sealer not nil), then atomically (written, synced,
// renamed, its directory synced) or, if !atomic, renamed without the
// directory's sync (CHECKPOINT's, just after, makes it durable). data
// must be the caller's to give: a filesystem may use the buffer it is
// given to write. A sealing failure names what.
func WriteStoreFile(fs vfs.FS, name string, data []byte, sealer *record.Sealer, place record.Kind, gen uint64, what string, noSync, atomic bool) error {
	if sealer != nil {
		var err error
		if data, err = sealer.SealStoreFile(data, place, gen); err != nil {
			return fmt.Errorf("engine: checkpoint: %s: %w", what, err)
		}
	}
	if atomic {
		return layout.WriteFileAtomic(fs, name, data, noSync)
	}
	return layout.WriteFileRenamed(fs, name, data, noSync)
}
