package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/continuumdb/continuum/ledger"
)

func init() {
	register(peer{name: "continuum", open: openContinuum(engine.Strict)})
	register(peer{name: "continuumrelaxed", open: openContinuum(engine.Relaxed)})
}

// continuumStore is this engine, used as its API intends: per atom, Begin,
// Do (durable intent, the call, durable certificate) and Commit of a
// compressed delta, with group commit across runs; snapshots are the
// engine's own, in the background, so Snapshot does nothing. The intent,
// certificate and delta records the harness encoded are not used: the
// engine makes its own from the atom.
type continuumStore struct {
	db *engine.DB

	mu struct {
		sync.Mutex
		runs map[string]*engine.Run // handles by run id, opened once
	}
}

func openContinuum(mode engine.Durability) opener {
	return func(dir string, opts Options) (Store, error) {
		db, err := engine.Open(dir, &engine.Options{
			NoSync:     opts.NoSync,
			Durability: mode,
			Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			return nil, fmt.Errorf("continuum: open %s: %w", dir, err)
		}
		s := &continuumStore{db: db}
		s.mu.runs = map[string]*engine.Run{}
		return s, nil
	}
}

func (s *continuumStore) run(ctx context.Context, id string) (*engine.Run, error) {
	s.mu.Lock()
	r := s.mu.runs[id]
	s.mu.Unlock()
	if r != nil {
		return r, nil
	}
	r, err := s.db.Run(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("continuum: run %q: %w", id, err)
	}
	s.mu.Lock()
	s.mu.runs[id] = r
	s.mu.Unlock()
	return r, nil
}

// continuumDelta is the frame change of one atom: the thought, the tool
// call with its arguments (as an assistant message, the way LLM
// transcripts carry tool calls), the tool's output, the memory update,
// the objective and a new subgoal when the atom has them. It holds the
// same information as the peers' JSON delta.
func continuumDelta(a workload.Atom, result []byte) *frame.Delta {
	d := new(frame.Delta)
	if a.Objective != "" {
		d.SetObjective(a.Objective)
	}
	if a.Subgoal != "" {
		d.AddSubgoal(fmt.Sprintf("sg-%d", a.Seq), a.Subgoal)
	}
	d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: a.Thought})
	d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: string(a.Args), Tool: a.Tool, CallID: a.Key})
	d.ToolOutput(a.Key, a.Tool, result)
	if a.MemKey != "" {
		d.Set(a.MemKey, a.MemVal)
	}
	return d
}

func (s *continuumStore) Atom(ctx context.Context, st *Step) error {
	a := st.Atom
	r, err := s.run(ctx, a.Run)
	if err != nil {
		return err
	}
	atom, err := r.Begin(ctx)
	if err != nil {
		return fmt.Errorf("continuum: run %q begin: %w", a.Run, err)
	}
	if atom.Seq() != a.Seq {
		return fmt.Errorf("continuum: run %q began seq %d, the script is at %d", a.Run, atom.Seq(), a.Seq)
	}
	act := ledger.Action{Tool: a.Tool, Args: a.Args, Key: a.Key, Idempotent: a.Idempotent}
	result, err := atom.Do(ctx, act, func(ctx context.Context, key string) ([]byte, error) {
		return workload.Downstream(a.Tool, a.Args, key), nil
	})
	if err != nil {
		atom.Fail(context.WithoutCancel(ctx), err.Error())
		return fmt.Errorf("continuum: run %q seq %d: %w", a.Run, a.Seq, err)
	}
	if err := atom.Commit(ctx, continuumDelta(a, result)); err != nil {
		return fmt.Errorf("continuum: run %q seq %d commit: %w", a.Run, a.Seq, err)
	}
	return nil
}

// Snapshot does nothing: the engine snapshots in the background.
func (s *continuumStore) Snapshot(context.Context, string, uint64, *workload.State) error {
	return nil
}

// Restore opens the run and materializes its frame, which is what an
// agent does after a restart, then converts the frame to a workload.State
// so that the harness can check it against the other stores'.
func (s *continuumStore) Restore(ctx context.Context, id string) (*workload.State, error) {
	r, err := s.run(ctx, id)
	if err != nil {
		return nil, err
	}
	seq := r.LastSeq()
	if seq == 0 {
		return nil, fmt.Errorf("continuum: %w: %q", errNoRun, id)
	}
	f, err := r.StateE()
	if err != nil {
		return nil, fmt.Errorf("continuum: run %q state: %w", id, err)
	}
	return frameState(id, seq, f)
}

// frameState converts the frame a run built from continuumDelta back to
// the workload's state: per atom, three messages (thought, tool call,
// tool output).
func frameState(run string, seq uint64, f *frame.Frame) (*workload.State, error) {
	st := workload.NewState(run)
	st.Seq = seq
	st.Objective = f.Objective
	for _, sg := range f.Subgoals {
		st.Subgoals = append(st.Subgoals, sg.Text)
	}
	for k, v := range f.Memory {
		st.Memory[k] = string(v)
	}
	if uint64(len(f.Messages)) != 3*seq {
		return nil, fmt.Errorf("%w: continuum: run %q at seq %d has %d messages, want %d", errCorrupt, run, seq, len(f.Messages), 3*seq)
	}
	for i := 0; i < len(f.Messages); i += 3 {
		thought, call, out := f.Messages[i], f.Messages[i+1], f.Messages[i+2]
		n := uint64(i/3 + 1)
		if thought.Role != frame.RoleAssistant || call.Role != frame.RoleAssistant || call.Tool == "" ||
			out.Role != frame.RoleTool || out.CallID != call.CallID {
			return nil, fmt.Errorf("%w: continuum: run %q atom %d: messages are not thought, call, output", errCorrupt, run, n)
		}
		st.Thoughts = append(st.Thoughts, thought.Content)
		st.Messages = append(st.Messages, workload.Message{
			Seq: n, Tool: call.Tool, Key: call.CallID, Args: []byte(call.Content), Result: []byte(out.Content),
		})
	}
	return st, nil
}

func (s *continuumStore) Close() error { return s.db.Close() }
