package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/workload"
)

func init() { register(peer{name: "groupcommit", open: openGroupCommit}) }

// groupCommit is the raw baseline: what durability costs with nothing but
// one append-only file and fsync group commit, no persistent index.
// Writers enqueue a record and wait; one goroutine owns the file, takes
// everything pending, writes it in one write and makes it durable with one
// fdatasync, then wakes the writers. Open scans the whole file to index it
// in memory (so restart grows with total history); Restore reads the
// indexed records of one run.
//
// Record framing (little-endian):
//
//	+----------+-----------+------+---------+-----+---------+------+
//	| len u32  | crc32c u32| kind | runLen  | run | seq u64 | body |
//	|          | of the    | u8   | u16     |     |         |      |
//	|          | rest      |      |         |     |         |      |
//	+----------+-----------+------+---------+-----+---------+------+
//
// len counts everything after the crc. A record cut short at the end of the
// file (a torn write) ends the scan, and Open zeroes it; a header of zeros
// ends the scan too. A bad crc before the end is corruption.
type groupCommit struct {
	fs     vfs.FS
	path   string
	noSync bool
	reqs   chan *gcReq
	done   chan struct{} // closed when the owner goroutine has exited

	// err is owned by the owner goroutine (own): after a failed write or
	// sync it is set and every later record fails with it (an fsync error
	// is final). Close reads it only after done is closed.
	err error

	// r reads records back for Restore; the owner goroutine has its own
	// handle for writing.
	r vfs.File

	mu struct {
		sync.Mutex
		closed bool // reqs is closed; guarded so no send races the close
		// index locates, per run, the latest snapshot and the deltas after
		// it. Open builds it by scanning the whole log (the cost of a log
		// without a persistent index: restart grows with total history);
		// append adds each record once it is durable.
		index map[string]*gcRunIndex
	}
}

// gcSpan is where one record lies in the log.
type gcSpan struct {
	off int64
	n   int // whole record, header included
	seq uint64
}

// gcRunIndex is the part of the log that restoring one run needs.
type gcRunIndex struct {
	snap   *gcSpan  // latest snapshot, or nil
	deltas []gcSpan // deltas after snap, in log order
}

// noteLocked records a durable record in the index.
func (g *groupCommit) noteLocked(kind byte, run string, sp gcSpan) {
	ix := g.mu.index[run]
	if ix == nil {
		ix = &gcRunIndex{}
		g.mu.index[run] = ix
	}
	switch kind {
	case gcSnapshot:
		if ix.snap == nil || sp.seq >= ix.snap.seq {
			ix.snap = &sp
			kept := ix.deltas[:0]
			for _, d := range ix.deltas {
				if d.seq > sp.seq {
					kept = append(kept, d)
				}
			}
			ix.deltas = kept
		}
	case gcDelta:
		ix.deltas = append(ix.deltas, sp)
	}
}

// gcReq is one record waiting to be made durable.
type gcReq struct {
	rec  []byte
	off  int64 // set by the owner: where rec was written
	done chan error
}

const (
	gcIntent   = 'i'
	gcCert     = 'c'
	gcDelta    = 'd'
	gcSnapshot = 's'
	gcHeader   = 8 // len + crc
)

var (
	errGCClosed = errors.New("groupcommit: log closed")
	crcTable    = crc32.MakeTable(crc32.Castagnoli)
)

func openGroupCommit(dir string, opts Options) (Store, error) {
	fs := vfs.Default
	path := filepath.Join(dir, "log")
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("groupcommit: open %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("groupcommit: stat %s: %w", path, err)
	}
	if st.Size() == 0 && !opts.NoSync {
		// A new file: make its directory entry durable too.
		if err := syncDir(fs, dir); err != nil {
			f.Close()
			return nil, fmt.Errorf("groupcommit: %w", err)
		}
	}
	g := &groupCommit{fs: fs, path: path, noSync: opts.NoSync, reqs: make(chan *gcReq, 1024), done: make(chan struct{})}
	g.mu.index = map[string]*gcRunIndex{}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, st.Size()), data); err != nil {
		f.Close()
		return nil, fmt.Errorf("groupcommit: read %s: %w", path, err)
	}
	end := int64(0)
	err = scanGC(path, data, func(r gcRecord) error {
		switch r.kind {
		case gcSnapshot, gcDelta, gcIntent, gcCert:
		default:
			return fmt.Errorf("%w: groupcommit: %s offset %d: unknown record kind %#x", errCorrupt, path, r.off, r.kind)
		}
		n := gcHeader + 1 + 2 + len(r.run) + 8 + len(r.body)
		g.noteLocked(r.kind, r.run, gcSpan{off: r.off, n: n, seq: r.seq})
		end = r.off + int64(n)
		return nil
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	// A torn tail is zeroed (the vfs has no truncate) so that new records
	// follow the last whole one and a later scan stops at the zeros.
	if end < st.Size() {
		if _, err := f.WriteAt(make([]byte, st.Size()-end), end); err == nil && !opts.NoSync {
			err = f.SyncData()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("groupcommit: zero the torn tail of %s at offset %d: %w", path, end, err)
		}
	}
	if g.r, err = fs.Open(path); err != nil {
		f.Close()
		return nil, fmt.Errorf("groupcommit: open %s: %w", path, err)
	}
	go g.own(f, end)
	return g, nil
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return d.Close()
}

// own is the goroutine that owns the file: it appends at off.
func (g *groupCommit) own(f vfs.File, off int64) {
	defer close(g.done)
	defer f.Close()
	var batch []*gcReq
	var buf []byte
	for first := range g.reqs {
		batch = append(batch[:0], first)
	drain:
		for {
			select {
			case r, ok := <-g.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		buf = buf[:0]
		for _, r := range batch {
			r.off = off + int64(len(buf))
			buf = append(buf, r.rec...)
		}
		err := g.err
		if err == nil {
			if _, err = f.WriteAt(buf, off); err == nil {
				off += int64(len(buf))
				if !g.noSync {
					err = f.SyncData()
				}
			}
			if err != nil {
				err = fmt.Errorf("groupcommit: %s at offset %d: %w", g.path, off, err)
				g.err = err
			}
		}
		for _, r := range batch {
			r.done <- err
		}
	}
}

// encodeGC frames one record.
func encodeGC(kind byte, run string, seq uint64, body []byte) ([]byte, error) {
	if len(run) > 0xffff {
		return nil, fmt.Errorf("groupcommit: run id of %d bytes is longer than 65535", len(run))
	}
	n := 1 + 2 + len(run) + 8 + len(body)
	if uint64(n) > 0xffffffff {
		return nil, fmt.Errorf("groupcommit: record of %d bytes is too large", n)
	}
	rec := make([]byte, gcHeader, gcHeader+n)
	binary.LittleEndian.PutUint32(rec[0:4], uint32(n))
	rec = append(rec, kind)
	rec = binary.LittleEndian.AppendUint16(rec, uint16(len(run)))
	rec = append(rec, run...)
	rec = binary.LittleEndian.AppendUint64(rec, seq)
	rec = append(rec, body...)
	binary.LittleEndian.PutUint32(rec[4:8], crc32.Checksum(rec[gcHeader:], crcTable))
	return rec, nil
}

// append makes one record durable.
func (g *groupCommit) append(kind byte, run string, seq uint64, body []byte) error {
	rec, err := encodeGC(kind, run, seq, body)
	if err != nil {
		return err
	}
	r := &gcReq{rec: rec, done: make(chan error, 1)}
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		return errGCClosed
	}
	// Sending under the lock orders it before Close's close(g.reqs).
	g.reqs <- r
	g.mu.Unlock()
	if err := <-r.done; err != nil {
		return err
	}
	g.mu.Lock()
	g.noteLocked(kind, run, gcSpan{off: r.off, n: len(rec), seq: seq})
	g.mu.Unlock()
	return nil
}

func (g *groupCommit) Atom(ctx context.Context, st *Step) error {
	a := st.Atom
	for _, r := range []struct {
		kind byte
		body []byte
	}{{gcIntent, st.Intent}, {gcCert, st.Cert}, {gcDelta, st.Delta}} {
		if err := g.append(r.kind, a.Run, a.Seq, r.body); err != nil {
			return err
		}
	}
	return nil
}

func (g *groupCommit) Snapshot(ctx context.Context, run string, seq uint64, state *workload.State) error {
	b, err := state.Encode()
	if err != nil {
		return err
	}
	return g.append(gcSnapshot, run, seq, b)
}

// gcRecord is one decoded record; body aliases the scanned buffer.
type gcRecord struct {
	kind byte
	run  string
	seq  uint64
	body []byte
	off  int64
}

// scanGC decodes the records of a log image, calling fn for each. A record
// cut short by the end of data is a torn tail and ends the scan silently;
// a bad checksum or an impossible length before the end is corruption.
func scanGC(path string, data []byte, fn func(r gcRecord) error) error {
	for off := 0; off < len(data); {
		if len(data)-off < gcHeader {
			return nil // torn header at the tail
		}
		n := int(binary.LittleEndian.Uint32(data[off:]))
		if n == 0 && binary.LittleEndian.Uint32(data[off+4:]) == 0 {
			return nil // zeros: the end of the log (a zeroed torn tail)
		}
		if len(data)-off-gcHeader < n {
			return nil // torn record at the tail
		}
		payload := data[off+gcHeader : off+gcHeader+n]
		if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(data[off+4:]) {
			return fmt.Errorf("%w: groupcommit: %s offset %d: checksum mismatch", errCorrupt, path, off)
		}
		if n < 1+2+8 {
			return fmt.Errorf("%w: groupcommit: %s offset %d: record of %d bytes is shorter than its header", errCorrupt, path, off, n)
		}
		runLen := int(binary.LittleEndian.Uint16(payload[1:]))
		if 3+runLen+8 > n {
			return fmt.Errorf("%w: groupcommit: %s offset %d: run id of %d bytes overruns the record", errCorrupt, path, off, runLen)
		}
		r := gcRecord{
			kind: payload[0],
			run:  string(payload[3 : 3+runLen]),
			seq:  binary.LittleEndian.Uint64(payload[3+runLen:]),
			body: payload[3+runLen+8:],
			off:  int64(off),
		}
		if err := fn(r); err != nil {
			return err
		}
		off += gcHeader + n
	}
	return nil
}

// Restore reads the run's latest snapshot and the deltas after it, at the
// offsets the index gives.
func (g *groupCommit) Restore(ctx context.Context, run string) (*workload.State, error) {
	g.mu.Lock()
	var snap *gcSpan
	var deltas []gcSpan
	if ix := g.mu.index[run]; ix != nil {
		snap = ix.snap
		deltas = append(deltas, ix.deltas...)
	}
	g.mu.Unlock()
	var body []byte
	if snap != nil {
		r, err := g.readRecord(*snap, gcSnapshot, run)
		if err != nil {
			return nil, err
		}
		body = r.body
	}
	st, err := startState(run, body)
	if err != nil {
		return nil, fmt.Errorf("groupcommit: %w", err)
	}
	for _, d := range deltas {
		r, err := g.readRecord(d, gcDelta, run)
		if err != nil {
			return nil, err
		}
		if err := applyDelta(st, r.seq, r.body); err != nil {
			return nil, fmt.Errorf("groupcommit: offset %d: %w", r.off, err)
		}
	}
	if st.Seq == 0 {
		return nil, fmt.Errorf("groupcommit: %w: %q", errNoRun, run)
	}
	return st, nil
}

// readRecord reads and checks the record at sp, which the index says is of
// kind for run.
func (g *groupCommit) readRecord(sp gcSpan, kind byte, run string) (gcRecord, error) {
	buf := make([]byte, sp.n)
	if _, err := g.r.ReadAt(buf, sp.off); err != nil {
		return gcRecord{}, fmt.Errorf("groupcommit: %s offset %d: %w", g.path, sp.off, err)
	}
	var rec gcRecord
	found := false
	err := scanGC(g.path, buf, func(r gcRecord) error {
		rec, found = r, true
		rec.off += sp.off
		return nil
	})
	if err != nil {
		return gcRecord{}, fmt.Errorf("%w (record at offset %d)", err, sp.off)
	}
	if !found || rec.kind != kind || rec.run != run || rec.seq != sp.seq {
		return gcRecord{}, fmt.Errorf("%w: groupcommit: %s offset %d: not the indexed record of run %q seq %d", errCorrupt, g.path, sp.off, run, sp.seq)
	}
	return rec, nil
}

// Close stops accepting records, lets the owner finish the pending ones,
// and closes the file.
func (g *groupCommit) Close() error {
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		return errGCClosed
	}
	g.mu.closed = true
	close(g.reqs)
	g.mu.Unlock()
	<-g.done
	err := g.err
	if cerr := g.r.Close(); err == nil {
		err = cerr
	}
	return err
}
