package history

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/snapindex"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// fakeStore is a log of one run's atoms, without a snapshot store: atom
// seq is at position {Segment: 1, Offset: seq}; Apply sets memory key
// "seq" to the atom's seq.
type fakeStore struct {
	run       string
	last      uint64
	scans     int
	wrongAt   uint64 // the position of this seq holds another record
	readFails error
}

func (s *fakeStore) Snapshots(context.Context) (*snapshot.Store, error) { return nil, nil }
func (s *fakeStore) Mismatch(*snapshot.Store, string, uint64, error)    { panic("no snapshot store") }
func (s *fakeStore) LogDir() string                                     { return "wal" }
func (s *fakeStore) Warn(string, ...any)                                {}
func (s *fakeStore) SnapshotFrame(*snapshot.Snapshot, string, uint64) (*frame.Frame, error) {
	panic("no snapshot store")
}

func (s *fakeStore) ScanPositions(_ context.Context, run string, base, n uint64) ([]wal.Pos, error) {
	s.scans++
	if run != s.run || base+n > s.last {
		return nil, fmt.Errorf("scan of %q %d+%d past the log", run, base, n)
	}
	pos := make([]wal.Pos, n)
	for i := range pos {
		pos[i] = wal.Pos{Segment: 1, Offset: int64(base + 1 + uint64(i))}
	}
	return pos, nil
}

func (s *fakeStore) ReadAtom(p wal.Pos, run string, seq uint64) (*record.Record, error) {
	if s.readFails != nil {
		return nil, s.readFails
	}
	if uint64(p.Offset) != seq || uint64(p.Offset) == s.wrongAt {
		return nil, snapindex.ErrNotThisAtom
	}
	return &record.Record{Kind: record.KindAtom, Run: run, Seq: seq, Pos: p}, nil
}

func (s *fakeStore) Apply(f *frame.Frame, a *record.Record) error {
	if prev := f.Memory["seq"]; string(prev) != fmt.Sprint(a.Seq-1) && !(prev == nil && a.Seq == 1) {
		return fmt.Errorf("atom %d applied over the state at %q", a.Seq, prev)
	}
	f.Memory["seq"] = []byte(fmt.Sprint(a.Seq))
	return nil
}

type fakeRun struct {
	id      string
	base    uint64
	scanned Scanned
}

func (r *fakeRun) ID() string                                          { return r.id }
func (r *fakeRun) Base() uint64                                        { return r.base }
func (r *fakeRun) ChainHead() (uint64, chain.Hash, bool)               { return 0, chain.Hash{}, false }
func (r *fakeRun) Scanned() *Scanned                                   { return &r.scanned }
func (r *fakeRun) FrameFile(uint64) (*frame.Frame, uint64, chain.Hash) { return nil, 0, chain.Hash{} }
func (r *fakeRun) StateAt(context.Context, uint64) (*frame.Frame, error) {
	return nil, errors.New("not used")
}

func (r *fakeRun) BaseFrame(context.Context) (*frame.Frame, error) {
	f := &frame.Frame{Memory: map[string][]byte{}}
	if r.base > 0 {
		f.Memory["seq"] = []byte(fmt.Sprint(r.base))
	}
	return f, nil
}

// TestStateFromLog: without a snapshot store the state at seq is built
// from the log, the indexed positions scanned once and kept, the rest
// from memory.
func TestStateFromLog(t *testing.T) {
	ctx := context.Background()
	for _, base := range []uint64{0, 3} {
		st := &fakeStore{run: "r", last: 20}
		r := &fakeRun{id: "r", base: base}
		indexed := uint64(12)
		var mem []wal.Pos
		for s := indexed + 1; s <= 20; s++ {
			mem = append(mem, wal.Pos{Segment: 1, Offset: int64(s)})
		}
		for _, seq := range []uint64{base + 1, 7, 12, 13, 19} {
			f, err := State(ctx, st, r, seq, indexed, 0, mem)
			if err != nil {
				t.Fatalf("base %d: State(%d): %v", base, seq, err)
			}
			if got := string(f.Memory["seq"]); got != fmt.Sprint(seq) {
				t.Fatalf("base %d: State(%d) is the state at %s", base, seq, got)
			}
		}
		// The first read scanned up to its seq; one beyond it scans again,
		// and the scan is kept after that.
		if st.scans > 3 {
			t.Fatalf("base %d: %d scans of the log for 5 reads", base, st.scans)
		}
		n := st.scans
		if _, err := State(ctx, st, r, 9, indexed, 0, mem); err != nil || st.scans != n {
			t.Fatalf("base %d: a read within the kept scan scanned again (%d -> %d scans, err %v)", base, n, st.scans, err)
		}
	}
}

// TestStateFromLogDamage: a position that holds another record is the
// log's damage, named, not a panic; the read's error passes through.
func TestStateFromLogDamage(t *testing.T) {
	ctx := context.Background()
	st := &fakeStore{run: "r", last: 10, wrongAt: 4}
	_, err := State(ctx, st, &fakeRun{id: "r"}, 6, 10, 0, nil)
	var ce *record.CorruptionError
	if !errors.As(err, &ce) || ce.Seq != 4 || ce.Run != "r" || ce.File != "wal" {
		t.Fatalf("a position holding another record: %v, want a CorruptionError of run r seq 4 in wal", err)
	}
	boom := errors.New("disk gone")
	st = &fakeStore{run: "r", last: 10, readFails: boom}
	if _, err := State(ctx, st, &fakeRun{id: "r"}, 6, 10, 0, nil); !errors.Is(err, boom) || !strings.Contains(err.Error(), `run "r" seq 1`) {
		t.Fatalf("a failed read: %v, want it named with run and seq", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := State(cctx, &fakeStore{run: "r", last: 10}, &fakeRun{id: "r"}, 6, 10, 0, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled read: %v", err)
	}
}

// TestAtomPosition: positions come from the kept scan; a seq at or before
// the run's fork point is refused, not an index out of range.
func TestAtomPosition(t *testing.T) {
	ctx := context.Background()
	st := &fakeStore{run: "r", last: 10}
	r := &fakeRun{id: "r", base: 2}
	for seq := uint64(3); seq <= 10; seq++ {
		p, err := AtomPosition(ctx, st, r, seq)
		if err != nil || p != (wal.Pos{Segment: 1, Offset: int64(seq)}) {
			t.Fatalf("AtomPosition(%d) = %v, %v", seq, p, err)
		}
	}
	for _, seq := range []uint64{0, 1, 2} {
		if _, err := AtomPosition(ctx, st, r, seq); err == nil {
			t.Fatalf("AtomPosition(%d) of a fork at 2 succeeded", seq)
		}
	}
	if _, err := AtomPosition(ctx, st, r, 11); err == nil {
		t.Fatal("AtomPosition past the log succeeded")
	}
}
