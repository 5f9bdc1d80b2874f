package webview

import (
	"context"
	"slices"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/offline"
)

// Frames of a long run are costly to rebuild: Inspector.StateAt replays
// the run's deltas from seq 1. The view keeps a few frames it built, per
// read of the store and run, and builds the frame at a seq from the
// nearest one at most stepWindow seqs before it, applying the deltas of
// the atoms between (Inspector.Atom): the slider's steps cost a few atoms
// each. A frame asked for far from any kept one is built by StateAt at
// stepWindow/2 before it, then stepped forward, so that the steps back
// from it are cheap too.
//
// Stepping is used only where it gives what StateAt gives: atoms without
// sealed values (an encrypted store's erasable keys: StateAt opens them),
// deltas that apply on their own (a reference to a result the reader cut
// does not), and kept frames without erased keys. Anywhere else the page
// uses StateAtWithErased.
const (
	stepWindow     = 512
	framesPerRun   = 8
	framesRuns     = 8
	maxCachedFrame = 8 << 20                       // a frame larger than this (roughly) is not kept
	maxCachedBytes = framesPerRun * maxCachedFrame // all kept frames together: the least recently kept runs go first
)

type frameKey struct {
	gen uint64
	run string
}

type keptFrame struct {
	seq  uint64
	f    *frame.Frame
	size int // frameSize(f)
}

// frameCache is guarded by View.mu.
type frameCache struct {
	frames map[frameKey][]keptFrame
	order  []frameKey // least recently kept first
	bytes  int        // the sizes of all frames in frames
	// stepped counts the frames built by stepping from a kept one.
	stepped int
}

// frameSize is roughly the memory f holds.
func frameSize(f *frame.Frame) int {
	n := len(f.Objective) + len(f.Scratchpad)
	for _, s := range f.Subgoals {
		n += len(s.ID) + len(s.Text) + 32
	}
	for k, v := range f.Memory {
		n += len(k) + len(v)
	}
	for _, m := range f.Messages {
		n += len(m.Content) + 64
		for _, c := range m.ToolCalls {
			n += len(c.Arguments) + len(c.Name) + len(c.ID)
		}
		for _, p := range m.Parts {
			n += len(p.Text) + len(p.JSON) + len(p.Call.Arguments)
		}
	}
	for _, p := range f.Pending {
		n += len(p.Args) + 64
	}
	return n
}

// keepFrame keeps a copy of f, the frame of k at seq, unless it is too
// large. The cache holds at most framesPerRun frames of a run, framesRuns
// runs and maxCachedBytes in all: past those it drops the oldest frame of
// the run, or the runs kept least recently.
func (v *View) keepFrame(k frameKey, seq uint64, f *frame.Frame) {
	size := frameSize(f)
	if size > maxCachedFrame {
		return
	}
	f = f.Clone()
	v.mu.Lock()
	defer v.mu.Unlock()
	c := &v.mu.frames
	if c.frames == nil {
		c.frames = map[frameKey][]keptFrame{}
	}
	fs := c.frames[k]
	for _, kf := range fs {
		if kf.seq == seq {
			return
		}
	}
	c.order = append(slices.DeleteFunc(c.order, func(o frameKey) bool { return o == k }), k)
	fs = append(fs, keptFrame{seq, f, size})
	c.bytes += size
	if len(fs) > framesPerRun {
		c.bytes -= fs[0].size
		fs = fs[1:]
	}
	c.frames[k] = fs
	for len(c.order) > 1 && (len(c.order) > framesRuns || c.bytes > maxCachedBytes) {
		for _, kf := range c.frames[c.order[0]] {
			c.bytes -= kf.size
		}
		delete(c.frames, c.order[0])
		c.order = c.order[1:]
	}
}

// nearestFrame returns a copy of the kept frame of k with the highest seq
// at most seq and within stepWindow of it, or nil.
func (v *View) nearestFrame(k frameKey, seq uint64) (uint64, *frame.Frame) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var best *keptFrame
	for i, kf := range v.mu.frames.frames[k] {
		if kf.seq <= seq && seq-kf.seq <= stepWindow && (best == nil || kf.seq > best.seq) {
			best = &v.mu.frames.frames[k][i]
		}
	}
	if best == nil {
		return 0, nil
	}
	return best.seq, best.f.Clone()
}

// step applies the deltas of atoms from+1..to of run to f; false when one
// of them cannot be stepped (see above).
func step(ctx context.Context, in *offline.Inspector, run string, f *frame.Frame, from, to uint64) bool {
	for s := from + 1; s <= to; s++ {
		a, err := in.Atom(ctx, run, s)
		if err != nil || a.Opened != nil || a.Delta.HasSealed() {
			return false
		}
		if err := f.Apply(a.Delta); err != nil {
			return false
		}
	}
	return true
}

// stateAt is the frame of run r at seq, and the memory keys whose values
// were erased, as Inspector.StateAtWithErased gives them.
func (p *page) stateAt(in *offline.Inspector, r offline.RunSummary, seq uint64) (*frame.Frame, []string, error) {
	k := frameKey{p.s.gen, r.ID}
	first := r.ForkedAt + 1 // the run's own atoms: Atom reads those
	if c, f := p.v.nearestFrame(k, seq); f != nil && (c == seq || c+1 >= first) {
		if step(p.ctx, in, r.ID, f, c, seq) {
			p.v.mu.Lock()
			p.v.mu.frames.stepped++
			p.v.mu.Unlock()
			p.v.keepFrame(k, seq, f)
			return f, nil, nil
		}
	}
	base := seq
	if seq >= first+stepWindow {
		base = seq - stepWindow/2
	}
	f, erased, err := in.StateAtWithErased(p.ctx, r.ID, base)
	if err != nil {
		return nil, nil, err
	}
	if len(erased) == 0 { // a frame with erased keys is not stepped from
		p.v.keepFrame(k, base, f)
	}
	if base == seq {
		return f, erased, nil
	}
	if len(erased) > 0 || !step(p.ctx, in, r.ID, f, base, seq) {
		return in.StateAtWithErased(p.ctx, r.ID, seq)
	}
	p.v.keepFrame(k, seq, f)
	return f, nil, nil
}
