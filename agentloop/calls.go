package agentloop

// A step's calls: the model's and the tools', through Do, and the
// settling of an in-doubt one.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

func (d *driver) toolNames() string {
	names := make([]string, len(d.specs))
	for i, s := range d.specs {
		names[i] = fmt.Sprintf("%q", s.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// normalize returns the turn as the frame records it, and for each call
// whose arguments are not JSON (a call cut by the model's token limit, say)
// why it is not performed: such arguments are kept as a JSON string, the
// form the frame can hold, and the call is answered with an error.
func normalize(m frame.Message) (frame.Message, map[int]string) {
	var bad map[int]string
	fix := func(i int, c *frame.ToolCall) {
		if len(c.Arguments) == 0 || json.Valid(c.Arguments) {
			return
		}
		if bad == nil {
			bad = map[int]string{}
		}
		var raw json.RawMessage
		why := "not valid JSON"
		if err := json.Unmarshal(c.Arguments, &raw); err != nil {
			why = err.Error()
		}
		bad[i] = "the arguments are not valid JSON (" + why + "); call the tool again with a JSON object"
		c.Arguments, _ = json.Marshal(string(c.Arguments))
	}
	if len(m.ToolCalls) > 0 {
		m.ToolCalls = append([]frame.ToolCall(nil), m.ToolCalls...)
		for i := range m.ToolCalls {
			fix(i, &m.ToolCalls[i])
		}
		return m, bad
	}
	if len(m.Parts) > 0 {
		m.Parts = append([]frame.Part(nil), m.Parts...)
		n := 0
		for i := range m.Parts {
			if m.Parts[i].Kind == frame.PartToolCall {
				fix(n, &m.Parts[i].Call)
				n++
			}
		}
	}
	return m, bad
}

// checkTurn says why the model's turn cannot be recorded (a call without
// an id or a name, repeated ids, content and parts both set), or nil: a
// turn that fails it is not certified, and the step is tried again.
func checkTurn(m *frame.Message) error {
	if m.Role != frame.RoleAssistant {
		return fmt.Errorf("role %v, not assistant", m.Role)
	}
	n, _ := normalize(*m)
	return (&frame.Frame{Messages: []frame.Message{n}}).Validate()
}

func toolError(c frame.ToolCall, text string) frame.Message {
	return frame.Message{Role: frame.RoleTool, CallID: c.ID, Tool: c.Name, Content: text, IsError: true}
}

// call performs one tool call through the ledger and returns the tool
// message that answers it.
func (d *driver) call(ctx context.Context, atom *engine.Atom, c frame.ToolCall, t Tool) (frame.Message, error) {
	id, seq := d.run.ID(), atom.Seq()
	act := ledger.Action{Tool: c.Name, Args: c.Arguments, Idempotent: t.Idempotent}
	var ran bool
	var execErr error
	exec := func(ctx context.Context, key string) ([]byte, error) {
		ran, execErr = true, nil
		res, err := t.Func(ctx, c, key)
		if err != nil && errors.Is(err, ErrUnknownOutcome) {
			panic(unknownOutcome{err})
		}
		execErr = err
		return res, err
	}
	res, err := d.do(ctx, atom, act, exec)
	if doubt, ok := errors.AsType[*ledger.InDoubtError](err); ok {
		res, err = d.settle(ctx, atom, c, act, exec, doubt)
	}
	switch {
	case err == nil:
		return frame.Message{Role: frame.RoleTool, CallID: c.ID, Tool: c.Name, Content: string(res)}, nil
	case ctx.Err() != nil:
		return frame.Message{}, err
	}
	if _, ok := errors.AsType[*stepError](err); ok {
		return frame.Message{}, err
	}
	if !ran {
		return frame.Message{}, fmt.Errorf("agentloop: run %q seq %d: tool %q (call %q): %w", id, seq, c.Name, c.ID, err)
	}
	if execErr != nil {
		if _, ok := errors.AsType[*transientError](execErr); ok {
			return frame.Message{}, retryable(fmt.Errorf("agentloop: run %q seq %d: tool %q (call %q): %w", id, seq, c.Name, c.ID, execErr), true)
		}
		return toolError(c, execErr.Error()), nil
	}
	if errors.Is(err, engine.ErrTooLarge) {
		// The call ran and returned too much to certify: the ledger records
		// it as failed, which the model is told.
		return toolError(c, fmt.Sprintf("the tool's result was too large to record (the limit is %d bytes)", engine.MaxResultSize)), nil
	}
	return frame.Message{}, fmt.Errorf("agentloop: run %q seq %d: tool %q (call %q): %w", id, seq, c.Name, c.ID, err)
}

// do is atom.Do that turns a tool's ErrUnknownOutcome, which left the
// call in doubt, into a step error: the step is tried again, and the next
// try's Do finds the call in doubt.
func (d *driver) do(ctx context.Context, atom *engine.Atom, act ledger.Action, exec ledger.Exec) (res []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			u, ok := r.(unknownOutcome)
			if !ok {
				panic(r)
			}
			err = retryable(fmt.Errorf("%w: run %q seq %d: tool %q: %w; the call is in doubt until reconciled",
				ErrUnsettled, d.run.ID(), atom.Seq(), act.Tool, u.err), false)
		}
	}()
	return atom.Do(ctx, act, exec)
}

// settle reconciles a call in doubt and returns its result: the one the
// downstream reports, or that of the call made again.
func (d *driver) settle(ctx context.Context, atom *engine.Atom, c frame.ToolCall, act ledger.Action, exec ledger.Exec,
	doubt *ledger.InDoubtError) ([]byte, error) {
	id, seq := d.run.ID(), atom.Seq()
	if d.l.Reconcile == nil {
		return nil, fmt.Errorf("%w: run %q seq %d: tool %q (call %q, key %q) is in doubt and the loop has no Reconcile",
			ErrUnsettled, id, seq, c.Name, c.ID, doubt.Key)
	}
	result, happened, err := d.l.Reconcile(ctx, c, doubt.Key)
	if err != nil {
		return nil, retryable(fmt.Errorf("%w: run %q seq %d: tool %q (key %q): Reconcile: %w",
			ErrUnsettled, id, seq, c.Name, doubt.Key, err), false)
	}
	d.log.Info("agentloop: reconciled a call in doubt", "run", id, "seq", seq, "tool", c.Name, "key", doubt.Key, "happened", happened)
	if happened {
		if err := atom.ResolveInDoubt(ctx, doubt, result); err != nil {
			return nil, fmt.Errorf("agentloop: run %q seq %d: record the reconciled %q (key %q): %w", id, seq, c.Name, doubt.Key, err)
		}
		return result, nil
	}
	if err := atom.ResolveInDoubtFailed(ctx, doubt, "agentloop: Reconcile found that the call took no effect"); err != nil {
		return nil, fmt.Errorf("agentloop: run %q seq %d: record that %q (key %q) took no effect: %w", id, seq, c.Name, doubt.Key, err)
	}
	act.Key = doubt.Key // call again, under the same key
	return d.do(ctx, atom, act, exec)
}
