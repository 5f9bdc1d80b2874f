package replicate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

// REPLICA (format.go): what a node's copy of the store holds of the
// stream. Open reads it to catch the copy up instead of rebuilding it;
// the writer keeps it moving with its log: every group it publishes tells
// it where the group begins in the local log (engine.PositionedReplicator),
// and a background goroutine writes the newest mark every markEvery, off
// the commit path. Close writes the last one. Every mark ever written is
// true for as long as the copy exists (the local log only grows after
// it, and only records the stream acknowledged lie before it), so a crash
// that loses the newest leaves an older one, which only costs a longer
// read of the stream at the next Open.

// markEvery is how often the writer persists a new mark.
const markEvery = 100 * time.Millisecond

// markTemp is the temporary file a mark is written to before its rename
// (not a *.tmp name, which the engine's Open removes as its own leftover).
const markTemp = markName + ".new"

// writeMark replaces dir's REPLICA with m atomically and durably: a
// temporary file, fsync, rename, fsync of dir.
func writeMark(dir string, m *mark) error {
	tmp, name := filepath.Join(dir, markTemp), filepath.Join(dir, markName)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("replicate: write %s: %w", name, err)
	}
	_, err = f.Write(m.marshal())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err == nil {
		err = layout.SyncDir(vfs.Default, dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replicate: write %s: %w", name, err)
	}
	return nil
}

// readMark reads dir's REPLICA; an error matching os.ErrNotExist if it
// has none.
func readMark(dir string) (*mark, error) {
	name := filepath.Join(dir, markName)
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	m, err := parseMark(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// setMark makes m the newest mark, to be persisted by markLoop.
func (r *Replicator) setMark(m mark) {
	r.mu.Lock()
	r.mu.mark, r.mu.markDirty = m, true
	r.mu.Unlock()
}

// persistMark writes the newest mark if it changed since the last write.
// A failed write is retried at the next call.
func (r *Replicator) persistMark() error {
	r.markWrite.Lock()
	defer r.markWrite.Unlock()
	r.mu.Lock()
	m, dirty := r.mu.mark, r.mu.markDirty
	r.mu.markDirty = false
	r.mu.Unlock()
	if !dirty {
		return nil
	}
	err := writeMark(r.dir, &m)
	if err != nil {
		r.mu.Lock()
		if !r.mu.markDirty { // no newer mark meanwhile: this one again
			r.mu.markDirty = true
		}
		r.mu.Unlock()
	}
	return err
}

// markLoop persists the newest mark every markEvery until Close.
func (r *Replicator) markLoop() {
	defer close(r.markDone)
	t := time.NewTicker(markEvery)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		if err := r.persistMark(); err != nil {
			r.cfg.Logger.Warn("replicate: REPLICA not updated", "store", r.cfg.Store, "dir", r.dir, "err", err)
		}
	}
}

// errNoMark refuses a directory that holds something but no REPLICA: it
// is not a copy of a replicated store, and Open replaces only those.
var errNoMark = errors.New("replicate: directory holds no " + markName)

// groupMark is the mark after a group of appends, published as the
// messages after seq up to last, that begins at start in the local log.
func (r *Replicator) groupMark(start wal.Pos, seq, last uint64, appends [][][]byte) mark {
	h := newRecordsHash()
	for _, a := range appends {
		for _, rec := range a {
			h.add(rec)
		}
	}
	m := mark{StoreID: r.storeID, Created: r.created, Epoch: r.epoch, Pos: start, Seq: seq}
	if h.n == 0 {
		m.Seq = last
		return m
	}
	m.PendingRecords, m.PendingSeq, m.PendingHash = h.n, last, h.sum()
	return m
}
