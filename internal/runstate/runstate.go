package runstate

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/history"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/zeebo/blake3"
)

// Core is what the package needs of the engine (see the package doc).
type Core interface {
	history.Store
	ReadFrameFile(run string) (name string, b []byte, err error)
	DecodeFrame(b []byte, run string, seq uint64, where string) (*frame.Frame, error)
	ApplyReplayed(f *frame.Frame, a *record.Record) error
	Rebuild(run string, base uint64, f *frame.Frame, last uint64, head chain.Hash) (*frame.Frame, error)
	FrameRebuilt(run, why string)
}

// Atom is an atom replayed from the log's tail at Open and not yet applied
// to a frame.
type Atom struct {
	Seq  uint64
	Head chain.Hash
	Body []byte // compressed atom body
}

// Run is what Materialize reads of a run, copied under the run's lock.
type Run struct {
	ID      string
	Base    uint64 // a fork's fork point, else 0
	LastSeq uint64
	Head    chain.Hash // h(LastSeq)
	// Pending holds the atoms replayed from the log tail, ascending by seq.
	Pending []Atom
	// FrameSeq is the seq of the frame file CHECKPOINT names (0: none),
	// FrameHead its head (zero: unknown); FrameSum is BLAKE3 of the frame
	// file this process read or wrote at FrameSumSeq (0: none).
	FrameSeq    uint64
	FrameHead   chain.Hash
	FrameSum    [32]byte
	FrameSumSeq uint64
	// CkptRowHead is CHECKPOINT's head of the run just before Pending.
	CkptRowHead chain.Hash
	// IndexedSeq is the run's last atom whose position the atom index holds.
	IndexedSeq uint64
	// BaseFrame returns the run's state at Base (the caller's).
	BaseFrame func() (*frame.Frame, error)
}

// Built is what Materialize built.
type Built struct {
	Frame *frame.Frame // at LastSeq
	// Rebuilt is set when the frame file was not used: the run forgets it
	// (FrameSeq, FrameHead, FrameSumSeq cleared), and the next checkpoint
	// writes it again.
	Rebuilt bool
	// Sum and SumSeq are set (SumSeq != 0) when the frame is the frame
	// file's, which can serve it again (the frame cache).
	Sum    [32]byte
	SumSeq uint64
}

// Materialize builds the frame of r at r.LastSeq: its frame file plus the
// atoms after it (from the atom index, then Pending). A frame file that is
// missing, damaged, of another run or store, or at a seq and head other
// than CHECKPOINT and the tail name, is not used: the frame is then built
// from Pending when they reach back to Base+1, and otherwise from the
// whole log.
func Materialize(c Core, r *Run) (Built, error) {
	f, seq, head, sum, why, err := frameFile(c, r)
	if err != nil {
		return Built{}, err
	}
	i := 0
	for i < len(r.Pending) && r.Pending[i].Seq <= seq {
		i++
	}
	rest := r.Pending[i:]
	fileSeq := seq // the frame is the file's up to here
	if end := r.LastSeq - uint64(len(rest)); why == "" && seq < end && (len(rest) == 0 || rest[0].Seq == end+1) {
		// A checkpoint left the run past its frame file (its tail bound):
		// the atoms between them come from the log, at the positions the
		// atom index holds.
		if g, ok := tailFromIndex(c, r, f, seq, head, end, headBefore(r, rest)); ok {
			f, seq = g, end
		} else {
			why = fmt.Sprintf("it holds seq %d and the atom index cannot give seqs %d..%d", seq, seq+1, end)
		}
	}
	if why == "" && len(rest) > 0 && rest[0].Seq != seq+1 || why == "" && len(rest) == 0 && seq != r.LastSeq {
		why = fmt.Sprintf("it holds seq %d, the log resumes after seq %d", seq, r.LastSeq-uint64(len(rest)))
	}
	var out Built
	if why != "" {
		c.FrameRebuilt(r.ID, why)
		out.Rebuilt = true
		base, err := r.BaseFrame()
		if err != nil {
			return out, err
		}
		f, seq, rest = base, r.Base, r.Pending
		if len(rest) == 0 || rest[0].Seq != r.Base+1 {
			last := r.LastSeq - uint64(len(rest))
			if f, err = c.Rebuild(r.ID, r.Base, base, last, headBefore(r, rest)); err != nil {
				return out, err
			}
			seq = last
		}
	}
	for _, p := range rest {
		if p.Seq != seq+1 {
			return out, &record.CorruptionError{File: c.LogDir(), Run: r.ID, Seq: seq + 1,
				Reason: fmt.Sprintf("the log tail resumes at seq %d after seq %d", p.Seq, seq)}
		}
		if err := c.ApplyReplayed(f, &record.Record{Kind: record.KindAtom, Run: r.ID, Seq: p.Seq, Body: p.Body}); err != nil {
			return out, err
		}
		seq = p.Seq
	}
	if seq != r.LastSeq {
		return out, &record.CorruptionError{File: c.LogDir(), Run: r.ID, Seq: seq + 1,
			Reason: fmt.Sprintf("frame rebuilt up to seq %d, but the run's last seq is %d", seq, r.LastSeq)}
	}
	if why == "" && len(rest) == 0 && seq == fileSeq && seq > r.Base {
		out.Sum, out.SumSeq = sum, seq
	}
	out.Frame = f
	return out, nil
}

// tailFromIndex applies to f, the run's frame at seq (its frame file's,
// whose head is head, or its base frame), the atoms seq+1..end found
// through the atom index as history finds them: each position must hold
// the run's atom at that seq, the atom at seq (when seq is the run's own)
// must carry the file's head, and the atom at end the head the run has
// there (want). ok is false, and f must not be used, when the index cannot
// serve them (none usable, one still indexing, a position that disagrees
// with the log, which is reported as a mismatch).
func tailFromIndex(c Core, r *Run, f *frame.Frame, seq uint64, head chain.Hash, end uint64, want chain.Hash) (_ *frame.Frame, ok bool) {
	if end > r.IndexedSeq {
		return nil, false
	}
	snaps, err := c.Snapshots(context.Background()) // never waits for a run
	if snaps == nil || err != nil {
		return nil, false
	}
	from := max(seq, r.Base+1)
	pos, err := snaps.Positions(r.ID, from, end)
	if err == nil && uint64(len(pos)) != end-from+1 {
		err = fmt.Errorf("%d positions for seqs %d..%d", len(pos), from, end)
	}
	mismatch := func(at uint64, err error) (*frame.Frame, bool) {
		c.Mismatch(snaps, r.ID, at, err)
		return nil, false
	}
	if err != nil {
		return mismatch(from, fmt.Errorf("atom index %d..%d: %w", from, end, err))
	}
	for i, p := range pos {
		at := from + uint64(i)
		a, err := c.ReadAtom(p, r.ID, at)
		if err != nil {
			return mismatch(at, fmt.Errorf("atom index: %w", err))
		}
		if at == seq {
			if a.Head != head {
				return mismatch(at, fmt.Errorf("the frame file's head %x, the log's %x", head[:8], a.Head[:8]))
			}
			continue
		}
		if at == end && a.Head != want {
			return mismatch(at, fmt.Errorf("the log's head %x, the run's %x", a.Head[:8], want[:8]))
		}
		if err := c.Apply(f, a); err != nil {
			return nil, false
		}
	}
	return f, true
}

// headBefore returns the head of the atom just before the first of rest:
// the run's head when rest is empty, else CHECKPOINT's.
func headBefore(r *Run, rest []Atom) chain.Hash {
	if len(rest) == 0 {
		return r.Head
	}
	return r.CkptRowHead
}

// ReadFile reads r's frame file for a state at or below seq (history's
// FrameFile): its frame, seq and head when it is sound and in
// r.Base+1..seq; nil otherwise.
func ReadFile(c Core, r *Run, seq uint64) (*frame.Frame, uint64, chain.Hash) {
	if r.FrameSeq <= r.Base || r.FrameSeq > seq {
		return nil, 0, chain.Hash{}
	}
	f, at, head, _, why, err := frameFile(c, r)
	if err != nil || why != "" || f == nil || at <= r.Base || at > seq {
		return nil, 0, chain.Hash{}
	}
	return f, at, head
}

// frameFile reads r's frame file and checks it against what CHECKPOINT
// and the replayed tail say of the run: it returns the frame, its seq and
// head, and BLAKE3 of the file, or a reason not to use it (why != ""). A
// sound frame file of the run past the log's last seq of it is log damage
// (err): frame files are written only at seqs the log holds durably.
func frameFile(c Core, r *Run) (f *frame.Frame, seq uint64, head chain.Hash, sum [32]byte, why string, err error) {
	name, b, err := c.ReadFrameFile(r.ID)
	if layout.NotExist(err) {
		if r.FrameSeq == 0 && (len(r.Pending) == 0 || r.Pending[0].Seq == r.Base+1) {
			f, err := r.BaseFrame() // the run never had one
			return f, r.Base, head, sum, "", err
		}
		return nil, 0, head, sum, "it is missing", nil
	}
	if err != nil {
		return nil, 0, head, sum, err.Error(), nil
	}
	ff, err := layout.ParseFrameFile(name, b)
	if err != nil {
		return nil, 0, head, sum, err.Error(), nil
	}
	if ff.Run != r.ID {
		return nil, 0, head, sum, fmt.Sprintf("it holds run %q", ff.Run), nil
	}
	if ff.Seq > r.LastSeq {
		return nil, 0, head, sum, "", &record.CorruptionError{File: c.LogDir(), Run: r.ID, Seq: r.LastSeq + 1,
			Reason: fmt.Sprintf("the log ends at seq %d of the run, but its frame file %s is at seq %d: records of the log are missing",
				r.LastSeq, name, ff.Seq)}
	}
	// The head it names must be the log's at its seq: CHECKPOINT's for the
	// frame file it lists, a replayed atom's for a newer one.
	want, known := chain.Hash{}, false
	if ff.Seq == r.FrameSeq && r.FrameHead != (chain.Hash{}) {
		want, known = r.FrameHead, true
	}
	for _, p := range r.Pending {
		if p.Seq == ff.Seq {
			want, known = p.Head, true
		}
	}
	switch {
	case !known && ff.Seq != r.FrameSeq:
		return nil, 0, head, sum, fmt.Sprintf("it is at seq %d, CHECKPOINT names seq %d", ff.Seq, r.FrameSeq), nil
	case known && ff.Head != want:
		return nil, 0, head, sum, fmt.Sprintf("its head at seq %d is %x, the log's is %x", ff.Seq, ff.Head[:8], want[:8]), nil
	}
	// BLAKE3 of the file is its identity for the frame cache (a frame read
	// back later must come from these bytes). A file of parallelHashSize
	// or more is hashed on a goroutine of its own while the frame is
	// decoded (both only read b); the frame is used only once the sum is
	// checked.
	var hashed chan struct{}
	if len(b) >= parallelHashSize {
		hashed = make(chan struct{})
		go func() {
			sum = blake3.Sum256(b)
			close(hashed)
		}()
	} else {
		sum = blake3.Sum256(b)
	}
	f, err = c.DecodeFrame(ff.Frame, ff.Run, ff.Seq, name)
	if hashed != nil {
		<-hashed
	}
	if ff.Seq == r.FrameSumSeq && sum != r.FrameSum {
		return nil, 0, head, sum, fmt.Sprintf("it is not the file this process read or wrote at seq %d", ff.Seq), nil
	}
	if err != nil {
		return nil, 0, head, sum, err.Error(), nil
	}
	return f, ff.Seq, ff.Head, sum, "", nil
}

// parallelHashSize is the size from which frameFile hashes a frame file
// beside decoding it: about 16 µs of BLAKE3, against a goroutine's few.
const parallelHashSize = 32 << 10
