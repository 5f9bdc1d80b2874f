package lineage

import (
	"bytes"
	"context"
	"fmt"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/runview"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
)

// MaxDepth bounds the forks between a run and its lineage's root.
const MaxDepth = 1 << 12

// Run is a run as its lineage sees it; the package doc says what each
// method promises.
type Run interface {
	runview.Run
	Link() (parent string, at uint64, held Run)
	Actions(ctx context.Context, seq uint64, index uint32) ([]ledger.Fingerprint, error)
	Where() (log, checkpoint string)
}

// Ledger is the store's ledger as Key and BranchKey read it: its
// entries, and the intent records they locate.
type Ledger interface {
	Lookup(fp ledger.Fingerprint) (ledger.Entry, bool)
	Intent(loc ledger.Loc) (*ledger.Intent, error)
}

// Parent returns the run r was forked from (r is a fork). The log cannot
// hold a cycle of forks (a parent is created before its fork), but
// CHECKPOINT's rows are read before the log confirms them: a cycle or an
// endless lineage there is damage, not a stack overflow.
func Parent(r Run) (Run, error) {
	parent, at, p := r.Link()
	if p == nil {
		log, _ := r.Where()
		return nil, &record.CorruptionError{File: log, Run: r.ID(), Seq: at,
			Reason: fmt.Sprintf("forked from run %q, which the store does not hold", parent)}
	}
	for x, n := p, 0; x != nil; n++ {
		if x == r || n == MaxDepth {
			_, cp := r.Where()
			return nil, &record.CorruptionError{File: cp, Run: r.ID(), Seq: at,
				Reason: fmt.Sprintf("its lineage through run %q loops or is longer than %d forks", parent, MaxDepth)}
		}
		_, _, x = x.Link()
	}
	return p, nil
}

// ParentState returns fork r's state at seq, at or before its fork point:
// its parent's there (the parent from Parent, its lineage checked).
func ParentState(ctx context.Context, r Run, seq uint64) (*frame.Frame, error) {
	p, err := Parent(r)
	if err != nil {
		return nil, err
	}
	return p.StateAt(ctx, seq)
}

// Intent returns in, a default-key intent of run r's atom seq, or of its
// branch named branch (branch != ""; its seq is then ignored), with the
// key its lineage used for the same call (Key, BranchKey), or in itself.
func Intent(ctx context.Context, r Run, seq uint64, branch string, in *ledger.Intent, l Ledger) (*ledger.Intent, error) {
	if branch != "" {
		return BranchKey(r, branch, in, l)
	}
	return Key(ctx, r, seq, in, l)
}

// Key returns in, a default-key intent of run r's atom seq, with the key
// r's parent used at the same seq and call index for the same action
// (its intent in l), or in itself.
func Key(ctx context.Context, r Run, seq uint64, in *ledger.Intent, l Ledger) (*ledger.Intent, error) {
	parent, at, _ := r.Link()
	if parent == "" || seq <= at {
		return in, nil
	}
	p, err := Parent(r)
	if err != nil {
		return nil, err
	}
	pins, err := Intents(ctx, p, l, seq, in.Index)
	if err != nil {
		return nil, fmt.Errorf("engine: run %q seq %d call %d: the action of parent %q at this position: %w", r.ID(), seq, in.Index, p.ID(), err)
	}
	pin := Repeated(pins, in)
	if pin == nil || pin.Key == in.Key {
		return in, nil
	}
	return in.WithKey(pin.Key, in.Index), nil
}

// Intents returns the intents, read through l, of run r's actions with
// call index index in its atom seq (committed or in flight): a
// default-key action and the explicit-key ones made just before it share
// an index. An action the ledger has no intent of is left out.
func Intents(ctx context.Context, r Run, l Ledger, seq uint64, index uint32) ([]*ledger.Intent, error) {
	fps, err := r.Actions(ctx, seq, index)
	if err != nil {
		return nil, err
	}
	var out []*ledger.Intent
	for _, fp := range fps {
		e, ok := l.Lookup(fp)
		if !ok || e.IntentLoc == (ledger.Loc{}) {
			continue
		}
		in, err := l.Intent(e.IntentLoc)
		if err != nil {
			return nil, err
		}
		if in.Index == index && in.Seq == seq {
			out = append(out, in)
		}
	}
	return out, nil
}

// Repeated returns the intent of pins (an ancestor's actions at in's
// position) that in repeats: the same tool, sanitized args, compensation
// and undone action; nil if none. An explicit-key action takes no index
// of its own (it shares the next default-key call's), so several may
// share a position; the compensation is part of the action (and of its
// fingerprint): one that differs makes another action, which never takes
// the ancestor's key.
func Repeated(pins []*ledger.Intent, in *ledger.Intent) *ledger.Intent {
	for _, x := range pins {
		if x.Tool == in.Tool && bytes.Equal(x.Args, in.Args) && x.Compensation.Equal(in.Compensation) && x.Undoes == in.Undoes {
			return x
		}
	}
	return nil
}

// BranchKey returns in, a default-key intent of a branch of run r (a
// branch has no seq until it commits), with the key the nearest run of
// r's lineage used for the same call of a branch of the same name at the
// same index (ledger.BranchKey), when l holds a record of it: its
// certificate, or its being in doubt. Otherwise in itself. The lineage is
// walked up to its root.
func BranchKey(r Run, branch string, in *ledger.Intent, l Ledger) (*ledger.Intent, error) {
	for depth := 0; depth < MaxDepth; depth++ {
		if parent, _, _ := r.Link(); parent == "" {
			break
		}
		p, err := Parent(r)
		if err != nil {
			return nil, err
		}
		c := in.WithKey(ledger.BranchKey(p.ID(), branch, int(in.Index)), in.Index)
		if e, ok := l.Lookup(c.Fingerprint); ok && e.Status != ledger.StatusNone {
			return c, nil
		}
		r = p
	}
	return in, nil
}
