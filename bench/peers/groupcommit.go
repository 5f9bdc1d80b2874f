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
// one append-only file and fsync group commit, no index. Writers enqueue a
// record and wait; one goroutine owns the file, takes everything pending,
// writes it in one write and makes it durable with one fdatasync, then
// wakes the writers. Restore scans the whole file.
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
// file (a torn write) ends the scan; a bad crc before that is corruption.
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

	mu struct {
		sync.Mutex
		closed bool // reqs is closed; guarded so no send races the close
	}
}

// gcReq is one record waiting to be made durable.
type gcReq struct {
	rec  []byte
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
	go g.own(f, st.Size())
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
	return <-r.done
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

func (g *groupCommit) Restore(ctx context.Context, run string) (*workload.State, error) {
	f, err := g.fs.Open(g.path)
	if err != nil {
		return nil, fmt.Errorf("groupcommit: restore %q: %w", run, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("groupcommit: restore %q: %w", run, err)
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, fi.Size()), data); err != nil {
		return nil, fmt.Errorf("groupcommit: restore %q: read %s: %w", run, g.path, err)
	}
	// One pass finds the latest snapshot of the run and every delta; the
	// deltas after the snapshot are applied once it is known.
	var snap []byte
	var snapSeq uint64
	var deltas []gcRecord
	err = scanGC(g.path, data, func(r gcRecord) error {
		if r.run != run {
			return nil
		}
		switch r.kind {
		case gcSnapshot:
			snap, snapSeq = r.body, r.seq
		case gcDelta:
			deltas = append(deltas, r)
		case gcIntent, gcCert:
		default:
			return fmt.Errorf("%w: groupcommit: %s offset %d: unknown record kind %#x", errCorrupt, g.path, r.off, r.kind)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	st, err := startState(run, snap)
	if err != nil {
		return nil, fmt.Errorf("groupcommit: %w", err)
	}
	for _, d := range deltas {
		if d.seq <= snapSeq {
			continue
		}
		if err := applyDelta(st, d.seq, d.body); err != nil {
			return nil, fmt.Errorf("groupcommit: offset %d: %w", d.off, err)
		}
	}
	if st.Seq == 0 {
		return nil, fmt.Errorf("groupcommit: %w: %q", errNoRun, run)
	}
	return st, nil
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
	return g.err
}
