package agentloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

// ToolFunc performs one tool call: call is the model's request (its
// Arguments as the model wrote them, valid JSON), key the call's
// idempotency key, to pass to the downstream. Its result becomes the tool
// message's content. An error is the tool's answer to the model (a tool
// message with IsError and the error's text), except:
//
//   - Transient(err): the step fails and is tried again, the tool with it
//     (same key);
//   - an error matching ErrUnknownOutcome: the call may have taken effect
//     (a timeout after the request was sent); it is left in doubt and
//     settled by Reconcile, as after a crash.
//
// The ledger records an error as "no effect" and calls the tool again if
// the step is performed again (after a crash before its commit): return a
// plain error only when the call took no effect, or is idempotent.
type ToolFunc func(ctx context.Context, call frame.ToolCall, key string) ([]byte, error)

// Tool is a tool the model may call.
type Tool struct {
	// Description and Parameters (a JSON Schema object) are what the model
	// is told of the tool (ToolSpec).
	Description string
	Parameters  []byte
	// Func performs a call. Required.
	Func ToolFunc
	// Idempotent declares that the downstream honours the key: a call in
	// doubt after a crash is made again with the same key, without
	// Reconcile.
	Idempotent bool
}

// ReconcileFunc settles a tool call left in doubt (its intent durable, its
// outcome unknown: the process stopped, or the tool reported
// ErrUnknownOutcome, between dispatch and reply). It asks the downstream
// whether the call under key took effect: if it did (happened), result is
// what the call returned, which becomes the tool message's content, and
// the call is not made again; if it did not, the loop makes the call again
// with the same key. An error means the downstream could not say: the call
// stays in doubt and the step is retried; it must never stand for "no
// effect".
type ReconcileFunc func(ctx context.Context, call frame.ToolCall, key string) (result []byte, happened bool, err error)

// Retry is how often a failed step is tried before the loop gives up.
type Retry struct {
	// Attempts is the number of tries of one step, the first included.
	// 0 means DefaultAttempts.
	Attempts int
	// Backoff returns the wait after failed try number attempt (1, 2, ...)
	// before the next. nil: 100 ms, doubling, at most 5 s.
	Backoff func(attempt int) time.Duration
}

// Defaults.
const (
	DefaultMaxSteps = 100
	DefaultAttempts = 3
)

// Step is one step of the loop, as Extend sees it before it commits.
type Step struct {
	Seq uint64
	// Interrupted says that a crash stopped an earlier try of this step:
	// what that try's calls did came back from the ledger.
	Interrupted bool
	// Response is the assistant's turn as the frame records it (a call
	// whose arguments are not valid JSON holds them as a JSON string).
	Response frame.Message
	// Results are the tool messages answering Response's calls, in order.
	Results []frame.Message
	// Final says the turn requests no call: the run completes with it.
	Final bool
}

// Loop drives an engine run as a tool-calling agent: one atom per step.
// A step asks the model for the next turn (through Do, as an idempotent
// action), performs the calls it requests (each through Do), and commits
// the turn and the tool messages to the frame. See the package
// documentation.
//
// The fields are read by Drive; change them only between Drives.
type Loop struct {
	// Run is the run to drive. Required. The loop must be its only writer
	// while Drive runs.
	Run *engine.Run
	// Model answers each step. Required.
	Model ModelFunc
	// ModelID names the model and its settings (e.g. "gpt-4o-mini
	// temperature=0"). It is part of the model call's ledger arguments, so
	// that a fork of the run that changes it asks the new model rather
	// than reuse the parent's answers.
	ModelID string
	// Tools are the tools on offer, by name (the name the model calls).
	Tools map[string]Tool
	// Reconcile settles tool calls in doubt. Without it, a call in doubt
	// stops Drive with ErrUnsettled.
	Reconcile ReconcileFunc
	// Prompt is the conversation's beginning (system and user messages),
	// committed by the first atom of a run that has none.
	Prompt []frame.Message
	// MaxSteps bounds the run's atoms: a run that reaches it without a
	// final answer ends as failed. 0 means DefaultMaxSteps.
	MaxSteps int
	// Retry says how often a failed step is tried.
	Retry Retry
	// Extend, if set, is called before each step's commit with the step
	// and its delta, to which it may add ops (memory, subgoals). It must
	// be deterministic (a function of the step and the frame) for a
	// resumed run to converge. An error fails the step.
	Extend func(ctx context.Context, s *Step, d *frame.Delta) error
	// Logger receives the loop's events (retries, reconciles). nil: none.
	Logger *slog.Logger
}

// Drive runs the loop until the run ends: it returns the run's final
// status and its result (the final answer's text, or why it failed). A run
// that had ended already is returned as it is.
//
// The run ends as StatusCompleted when the model answers without a tool
// call, and as StatusFailed when it reaches MaxSteps, or when a step failed
// Retry.Attempts times in a row (its model call, a Transient tool error,
// Extend); the result then says why.
//
// A non-nil error means Drive stopped and the run is still active: ctx
// was cancelled, a call is in doubt and could not be settled
// (ErrUnsettled), or the store failed. The atom in flight is failed
// (durably: its seq is tried again), and a later Drive, in this process or
// after a restart, goes on from there without repeating a certified call.
func (l *Loop) Drive(ctx context.Context) (engine.Status, []byte, error) {
	if err := l.validate(); err != nil {
		return engine.StatusActive, nil, err
	}
	d := &driver{l: l, run: l.Run, specs: sortedSpecs(l.Tools), log: l.Logger}
	d.tools = toolsDigest(d.specs)
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	maxSteps := uint64(l.MaxSteps)
	if maxSteps == 0 {
		maxSteps = DefaultMaxSteps
	}
	for {
		if st := d.run.Status(); st != engine.StatusActive {
			info := d.run.Info()
			return info.Status, info.Result, nil
		}
		if d.f == nil || d.run.LastSeq() != d.seq {
			if err := d.load(); err != nil {
				return engine.StatusActive, nil, err
			}
		}
		if d.seq > 0 && isFinal(d.f) {
			return d.end(ctx, engine.StatusCompleted, finalText(&d.f.Messages[len(d.f.Messages)-1]))
		}
		if d.seq >= maxSteps {
			return d.end(ctx, engine.StatusFailed,
				fmt.Appendf(nil, "agentloop: no final answer within MaxSteps (%d atoms)", maxSteps))
		}
		if err := d.stepWithRetry(ctx); err != nil {
			if se, ok := errors.AsType[*stepError](err); ok && se.endable && ctx.Err() == nil {
				return d.end(ctx, engine.StatusFailed, []byte(err.Error()))
			}
			return engine.StatusActive, nil, err
		}
	}
}

func (l *Loop) validate() error {
	switch {
	case l.Run == nil:
		return fmt.Errorf("%w: no Run", ErrInvalidLoop)
	case l.Model == nil:
		return fmt.Errorf("%w: no Model", ErrInvalidLoop)
	case l.MaxSteps < 0:
		return fmt.Errorf("%w: MaxSteps %d is negative", ErrInvalidLoop, l.MaxSteps)
	case l.Retry.Attempts < 0:
		return fmt.Errorf("%w: Retry.Attempts %d is negative", ErrInvalidLoop, l.Retry.Attempts)
	}
	for name, t := range l.Tools {
		switch {
		case name == "":
			return fmt.Errorf("%w: a tool has an empty name", ErrInvalidLoop)
		case name == ModelTool:
			return fmt.Errorf("%w: a tool is named %q, the model call's name in the ledger", ErrInvalidLoop, ModelTool)
		case t.Func == nil:
			return fmt.Errorf("%w: tool %q has no Func", ErrInvalidLoop, name)
		case len(t.Parameters) > 0 && !json.Valid(t.Parameters):
			return fmt.Errorf("%w: tool %q: Parameters is not valid JSON", ErrInvalidLoop, name)
		}
	}
	return nil
}

// driver is the state of one Drive.
type driver struct {
	l     *Loop
	run   *engine.Run
	specs []ToolSpec
	tools [32]byte // toolsDigest(specs)
	log   *slog.Logger

	// f is the run's frame as of seq, kept up to date by applying each
	// committed delta (the engine's frame is not copied per step).
	f   *frame.Frame
	seq uint64
	// conv is the digest of f's messages for the model call's args; it
	// is reset when they change other than by appending.
	conv convDigest
}

func (d *driver) load() error {
	seq := d.run.LastSeq()
	f, err := d.run.StateE()
	if err != nil {
		return fmt.Errorf("agentloop: run %q: state: %w", d.run.ID(), err)
	}
	if d.run.LastSeq() != seq {
		return fmt.Errorf("%w: run %q went on from seq %d while the loop read its state", ErrConcurrentWriter, d.run.ID(), seq)
	}
	d.f, d.seq, d.conv = f, seq, convDigest{}
	return nil
}

// isFinal reports whether the frame's last message is an assistant turn
// that requests no call: the run's answer.
func isFinal(f *frame.Frame) bool {
	if len(f.Messages) == 0 {
		return false
	}
	m := &f.Messages[len(f.Messages)-1]
	return m.Role == frame.RoleAssistant && len(calls(m)) == 0
}

// end ends the run; a run that ended meanwhile is reported as it ended.
func (d *driver) end(ctx context.Context, st engine.Status, result []byte) (engine.Status, []byte, error) {
	result = truncateUTF8(result, engine.MaxEndResult)
	err := d.run.End(ctx, st, result)
	if errors.Is(err, engine.ErrRunEnded) {
		info := d.run.Info()
		return info.Status, info.Result, nil
	}
	if err != nil {
		return engine.StatusActive, nil, fmt.Errorf("agentloop: run %q: end as %v: %w", d.run.ID(), st, err)
	}
	d.log.Info("agentloop: run ended", "run", d.run.ID(), "status", st.String(), "seq", d.seq)
	return st, result, nil
}

// truncateUTF8 cuts b to at most n bytes, at a rune boundary.
func truncateUTF8(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	b = b[:n]
	for i := 1; i < utf8.UTFMax && len(b) > 0; i++ { // drop a rune the cut split
		if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size != 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

// stepWithRetry performs the next step, trying it again per Retry.
func (d *driver) stepWithRetry(ctx context.Context) error {
	attempts := d.l.Retry.Attempts
	if attempts == 0 {
		attempts = DefaultAttempts
	}
	for attempt := 1; ; attempt++ {
		err := d.step(ctx)
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("agentloop: run %q seq %d: stopped: %w", d.run.ID(), d.seq+1, context.Cause(ctx))
		}
		se, ok := errors.AsType[*stepError](err)
		if !ok {
			return err
		}
		if attempt >= attempts {
			return &stepError{err: fmt.Errorf("agentloop: run %q seq %d failed %d times: %w", d.run.ID(), d.seq+1, attempt, se.err),
				endable: se.endable}
		}
		wait := d.backoff(attempt)
		d.log.Warn("agentloop: step failed; trying again", "run", d.run.ID(), "seq", d.seq+1,
			"attempt", attempt, "wait", wait, "err", se.err)
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("agentloop: run %q seq %d: stopped: %w", d.run.ID(), d.seq+1, context.Cause(ctx))
			case <-t.C:
			}
		}
	}
}

func (d *driver) backoff(attempt int) time.Duration {
	if d.l.Retry.Backoff != nil {
		return d.l.Retry.Backoff(attempt)
	}
	w := 100 * time.Millisecond << min(attempt-1, 10)
	return min(w, 5*time.Second)
}

// step performs one try of the next step in one atom: it commits it, or
// fails the atom (its seq is tried again) and says why.
func (d *driver) step(ctx context.Context) error {
	atom, err := d.run.Begin(ctx)
	if err != nil {
		return fmt.Errorf("agentloop: run %q: begin: %w", d.run.ID(), err)
	}
	var delta *frame.Delta
	if atom.Seq() != d.seq+1 {
		err = fmt.Errorf("%w: run %q: the loop is at seq %d, the run at %d", ErrConcurrentWriter, d.run.ID(), d.seq, atom.Seq()-1)
	} else if delta, err = d.perform(ctx, atom); err == nil {
		if err = atom.Commit(ctx, delta); err != nil {
			err = fmt.Errorf("agentloop: run %q seq %d: commit: %w", d.run.ID(), atom.Seq(), err)
		}
	}
	if err != nil {
		if ferr := atom.Fail(context.WithoutCancel(ctx), failReason(err)); ferr != nil {
			// The step cannot be tried again in this process: not retryable.
			return fmt.Errorf("%v; failing the atom: %w", err, ferr)
		}
		return err
	}
	if aerr := d.f.Apply(delta); aerr != nil {
		// The engine applied this delta to its frame; read that one.
		d.f = nil
	} else if d.l.Extend != nil && dropsMessages(delta) {
		d.conv = convDigest{} // the conversation no longer extends what was hashed
	}
	d.seq = atom.Seq()
	return nil
}

// dropsMessages reports whether d removes messages (Extend compacting the
// conversation).
func dropsMessages(d *frame.Delta) bool {
	for _, o := range d.Ops() {
		if o.Kind == "drop_messages" {
			return true
		}
	}
	return false
}

func failReason(err error) string {
	s := err.Error()
	if len(s) > 4096 {
		s = string(truncateUTF8([]byte(s), 4096))
	}
	return s
}

// perform asks the model, performs the calls, and returns the step's
// delta.
func (d *driver) perform(ctx context.Context, atom *engine.Atom) (*frame.Delta, error) {
	id, seq := d.run.ID(), atom.Seq()
	req := &Request{Messages: d.f.Messages, Tools: d.specs}
	conv := &d.conv
	if d.seq == 0 {
		req.Messages, conv = d.l.Prompt, new(convDigest)
	}
	args, err := modelArgs(d.l.ModelID, req, conv, d.tools)
	if err != nil {
		return nil, fmt.Errorf("agentloop: run %q seq %d: model call: %w", id, seq, err)
	}
	var ran bool
	raw, err := atom.Do(ctx, ledger.Action{Tool: ModelTool, Args: args, Idempotent: true},
		func(ctx context.Context, key string) ([]byte, error) {
			ran = true
			req.Key = key
			m, err := d.l.Model(ctx, req)
			if err != nil {
				return nil, err
			}
			if err := checkTurn(&m); err != nil {
				return nil, fmt.Errorf("agentloop: the model's turn cannot be recorded: %w", err)
			}
			return encodeResponse(&m)
		})
	if err != nil {
		err = fmt.Errorf("agentloop: run %q seq %d: model call: %w", id, seq, err)
		if ran {
			return nil, retryable(err, true)
		}
		return nil, err
	}
	resp, err := decodeResponse(raw)
	if err != nil {
		return nil, fmt.Errorf("agentloop: run %q seq %d: %w", id, seq, err)
	}
	turn, bad := normalize(resp)
	cs := calls(&turn)
	s := &Step{Seq: seq, Interrupted: atom.Interrupted(), Response: turn, Final: len(cs) == 0}
	for i, c := range cs {
		var m frame.Message
		switch t, ok := d.l.Tools[c.Name]; {
		case bad[i] != "":
			m = toolError(c, bad[i])
		case !ok:
			m = toolError(c, fmt.Sprintf("unknown tool %q; the tools are %s", c.Name, d.toolNames()))
		default:
			if _, err := ledger.CanonicalArgs(c.Arguments, nil); err != nil {
				m = toolError(c, fmt.Sprintf("the arguments were refused: %v", err))
				break
			}
			if m, err = d.call(ctx, atom, c, t); err != nil {
				return nil, err
			}
		}
		s.Results = append(s.Results, m)
	}
	delta := new(frame.Delta)
	if d.seq == 0 {
		for _, m := range d.l.Prompt {
			delta.AppendMessage(m)
		}
	}
	delta.AppendMessage(turn)
	for _, m := range s.Results {
		delta.AppendMessage(m)
	}
	if d.l.Extend != nil {
		if err := d.l.Extend(ctx, s, delta); err != nil {
			return nil, retryable(fmt.Errorf("agentloop: run %q seq %d: Extend: %w", id, seq, err), true)
		}
	}
	return delta, nil
}
