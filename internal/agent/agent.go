// Package agent is the scripted agent of CONTINUUM's tests, benchmarks,
// crash harness and demo: it drives an engine run through the atoms that
// package workload describes, against a downstream that stands for the
// outside world.
package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/continuumdb/continuum/ledger"
)

// Downstream is the outside world the agent's tools act on.
type Downstream interface {
	// Exec performs the call and returns its result.
	Exec(ctx context.Context, tool string, args []byte, key string, idempotent bool) ([]byte, error)
	// Lookup reports whether a call with this idempotency key took effect,
	// and its result: what an agent asks to reconcile an in-doubt action.
	// An error means the downstream could not say: the action stays in
	// doubt (treating it as "no effect" could run it twice).
	Lookup(ctx context.Context, key string) ([]byte, bool, error)
}

// Delta is the frame delta of a scripted atom.
func Delta(a workload.Atom) *frame.Delta {
	d := new(frame.Delta)
	if a.Objective != "" {
		d.SetObjective(a.Objective)
	}
	if a.Subgoal != "" {
		d.AddSubgoal(fmt.Sprintf("sg-%d", a.Seq), a.Subgoal)
	}
	d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: a.Thought})
	d.AppendMessage(frame.Message{Role: frame.RoleTool, Content: string(a.Result), Tool: a.Tool, CallID: a.Key})
	d.Set(a.MemKey, a.MemVal)
	return d
}

// Action is the ledger action of a scripted atom.
func Action(a workload.Atom) ledger.Action {
	return ledger.Action{Tool: a.Tool, Args: a.Args, Key: a.Key, Idempotent: a.Idempotent}
}

// Step performs the next atom of run under the workload seed: Begin, one Do
// (reconciling an in-doubt action with the downstream), Commit. It returns
// the seq it committed.
func Step(ctx context.Context, run *engine.Run, seed int64, ds Downstream) (uint64, error) {
	atom, err := run.Begin(ctx)
	if err != nil {
		return 0, err
	}
	a := workload.Script(run.ID(), atom.Seq(), seed)
	act := Action(a)
	exec := func(ctx context.Context, key string) ([]byte, error) {
		return ds.Exec(ctx, a.Tool, a.Args, key, a.Idempotent)
	}
	res, err := atom.Do(ctx, act, exec)
	var doubt *ledger.InDoubtError
	if errors.As(err, &doubt) {
		// Ask the outside world what happened, record it, and go on.
		r, ok, lerr := ds.Lookup(ctx, doubt.Key)
		switch {
		case lerr != nil:
			err = fmt.Errorf("agent: reconcile %s (key %s): %w", a.Tool, doubt.Key, lerr)
		case ok:
			res, err = r, atom.ResolveInDoubt(ctx, doubt, r)
		default:
			if err = atom.ResolveInDoubtFailed(ctx, doubt, "the downstream has no trace of the call"); err == nil {
				act.Key = doubt.Key // try again, under the same key
				res, err = atom.Do(ctx, act, exec)
			}
		}
	}
	if err != nil {
		atom.Fail(context.WithoutCancel(ctx), err.Error())
		return 0, err
	}
	a.Result = res
	if err := atom.Commit(ctx, Delta(a)); err != nil {
		return 0, err
	}
	return atom.Seq(), nil
}

// World is an in-memory Downstream that counts effects per idempotency key.
// Idempotent tools honour the key (a repeated call has no new effect); the
// others take effect on every call. It outlives crashes of the agent: it is
// the outside world.
type World struct {
	mu      sync.Mutex
	effects map[string]int    // key -> effects taken
	calls   map[string]int    // key -> calls received
	results map[string][]byte // key -> result of the first effect
	// Down, if set, is consulted before every call; an error returned by it
	// fails the call with no effect (a crashed caller, a network failure).
	Down func() error
}

// NewWorld returns an empty World.
func NewWorld() *World {
	return &World{effects: map[string]int{}, calls: map[string]int{}, results: map[string][]byte{}}
}

// Exec implements Downstream. The result is workload.Downstream's, a pure
// function of the call, so a repeated call returns the same bytes.
func (w *World) Exec(ctx context.Context, tool string, args []byte, key string, idempotent bool) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.Down != nil {
		if err := w.Down(); err != nil {
			return nil, err
		}
	}
	w.calls[key]++
	if r, ok := w.results[key]; ok && idempotent {
		return append([]byte(nil), r...), nil
	}
	r := workload.Downstream(tool, args, key)
	w.effects[key]++
	w.results[key] = r
	return append([]byte(nil), r...), nil
}

// Lookup implements Downstream.
func (w *World) Lookup(ctx context.Context, key string) ([]byte, bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.results[key]
	return append([]byte(nil), r...), ok, nil
}

// Effects returns the effects taken per key.
func (w *World) Effects() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make(map[string]int, len(w.effects))
	for k, v := range w.effects {
		m[k] = v
	}
	return m
}

// Calls returns the calls received per key.
func (w *World) Calls() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make(map[string]int, len(w.calls))
	for k, v := range w.calls {
		m[k] = v
	}
	return m
}

// Lock and Unlock let a crash test take the world's lock, so that a crash
// falls cleanly before or after each effect.
func (w *World) Lock()   { w.mu.Lock() }
func (w *World) Unlock() { w.mu.Unlock() }
