package offline

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
)

// Export: a run's atoms as JSON Lines, for analysis tools (continuumctl
// export). One line is one committed atom, as an ExportedAtom: the delta op
// by op and the actions with their intents and certificates. The field
// names and the encoding of the values are a stable interface: fields may
// be added, none is renamed or changes meaning.

// ExportedAtom is one committed atom as Export writes it: AtomInfo with
// every value in the form analysis tools read.
type ExportedAtom struct {
	Run  string `json:"run"`
	Seq  uint64 `json:"seq"`
	Head string `json:"head"` // the chain head after the atom, 64 hex digits
	Pos  string `json:"pos"`  // where the atom's record starts: "segment:offset"
	// Size is the atom record's length in the log; RawSize the length
	// with its body decompressed.
	Size    int              `json:"size"`
	RawSize int              `json:"raw_size"`
	Delta   []ExportedOp     `json:"delta"`   // in order; never null
	Actions []ExportedAction `json:"actions"` // in call order; never null
	// Sent are the messages the atom sent, in the order sent (the i-th is
	// message run/seq/i), and Consumed those it consumed, in the order
	// received; absent for an atom without.
	Sent     []ExportedMessage   `json:"sent,omitempty"`
	Consumed []ExportedMessageID `json:"consumed,omitempty"`
	// Branch is set for an atom committed as a branch (engine.Run.Branch):
	// its name, its base and its declared reads. Absent otherwise: the
	// atom's base is then seq-1.
	Branch *ExportedBranch `json:"branch,omitempty"`
	// End is how the run ended, on the line of its last atom only, once
	// it ended (Export sets it; absent otherwise).
	End *ExportedEnd `json:"end,omitempty"`
	// Rollback is the rollback this atom completes, on its line only
	// (Export sets it; absent otherwise): the atom's delta is then one
	// replace_frame op, the frame at Rollback.To, and its actions the
	// compensations.
	Rollback *ExportedRollback `json:"rollback,omitempty"`
	// Waited is the wait this atom followed and took (the run's wait
	// after seq-1: Run.Wait, Run.Sleep), with how it ended and the event
	// it took; absent for an atom that followed none. Wait, on the run's
	// last atom's line only, is the run's wait after it that no atom
	// took yet (open, or ended and not acted on). Export sets both.
	Waited *ExportedWait `json:"waited,omitempty"`
	Wait   *ExportedWait `json:"wait,omitempty"`
}

// ExportedOp is one delta op as Export writes it: the op
// (frame.Op.MarshalJSON) with the sealed memory values it carries opened
// with the keyring (AtomInfo.Opened). A set_sealed op whose value opened
// is {"op":"set_sealed","key":K,"value":V} (V in "value_base64" when it is
// not UTF-8, as for a set); one whose value was erased is
// {"op":"set_sealed","key":K,"erased":true}, without a value. A
// replace_frame op's frame holds its opened values as set ops, and its
// erased keys are listed in "erased_keys". The sealed bytes are never
// written once opened.
type ExportedOp struct {
	frame.Op
	// Opened: a set_sealed op whose value the keyring opened: Value holds
	// it, in plain text.
	Opened bool
	// Erased names the memory keys of the op whose values were erased
	// (sorted): a set_sealed op's key, or keys of a replace_frame op's
	// frame.
	Erased []string
}

// MarshalJSON implements json.Marshaler (see ExportedOp).
func (o ExportedOp) MarshalJSON() ([]byte, error) {
	if o.Kind == "set_sealed" && (o.Opened || len(o.Erased) > 0) {
		v := struct {
			Op          string  `json:"op"`
			Key         string  `json:"key"`
			Value       *string `json:"value,omitempty"`
			ValueBase64 string  `json:"value_base64,omitempty"`
			Erased      bool    `json:"erased,omitempty"`
		}{Op: o.Kind, Key: o.Key, Erased: !o.Opened}
		switch {
		case !o.Opened:
		case utf8.Valid(o.Value):
			s := string(o.Value)
			v.Value = &s
		default:
			v.ValueBase64 = base64.StdEncoding.EncodeToString(o.Value)
		}
		return json.Marshal(v)
	}
	b, err := o.Op.MarshalJSON()
	if err != nil || len(o.Erased) == 0 || len(b) < 2 || b[len(b)-1] != '}' {
		return b, err
	}
	keys, err := json.Marshal(o.Erased)
	if err != nil {
		return nil, err
	}
	b = append(b[:len(b)-1], `,"erased_keys":`...)
	b = append(b, keys...)
	return append(b, '}'), nil
}

// NewExportedOps returns the ops of a's delta in the form Export writes
// them, with the sealed values a.Opened holds opened; never nil. It shares
// a's values.
func NewExportedOps(a *AtomInfo) []ExportedOp {
	ops := a.Delta.Ops()
	out := make([]ExportedOp, len(ops))
	for i, op := range ops {
		out[i] = ExportedOp{Op: op}
	}
	for _, o := range a.Opened {
		if o.Op < 0 || o.Op >= len(out) {
			continue // not of this delta: an AtomInfo built by hand
		}
		e := &out[o.Op]
		e.Erased = o.Erased
		switch {
		case e.Kind == "set_sealed" && len(o.Erased) == 0:
			e.Value, e.Opened = o.Value, true
		case e.Kind == "set_sealed":
			e.Value = nil
		case o.Frame != nil:
			e.Frame = o.Frame
		}
	}
	return out
}

// ExportedRollback is a rollback of a run (RollbackInfo) as Export, and
// inspect --json, write it.
type ExportedRollback struct {
	Seq       uint64         `json:"seq"` // the atom that completes it
	To        uint64         `json:"to"`
	Started   string         `json:"started"` // RFC 3339 in UTC with nanoseconds
	Completed bool           `json:"completed"`
	Undo      []ExportedUndo `json:"undo"` // newest first; never null
}

// ExportedUndo is one action a rollback reaches (record.Undo).
type ExportedUndo struct {
	Seq         uint64 `json:"seq"`         // the atom that performed it
	Fingerprint string `json:"fingerprint"` // the action's, 64 hex digits
	Tool        string `json:"tool"`
	// Compensation is what undoes it; absent: the action has none, and
	// the rollback left its effect (not undone).
	Compensation *ExportedCompensation `json:"compensation,omitempty"`
}

// ExportedCompensation is the compensation of an action as a rollback
// runs it.
type ExportedCompensation struct {
	Tool        string        `json:"tool"`
	Args        ExportedValue `json:"args,omitempty"`
	Key         string        `json:"key"`
	Idempotent  bool          `json:"idempotent"`
	Fingerprint string        `json:"fingerprint"` // of the compensation's intent (ledger.CompensationFingerprint)
}

// NewExportedRollback returns r in the form Export writes. It shares r's
// values.
func NewExportedRollback(r RollbackInfo) ExportedRollback {
	v := ExportedRollback{Seq: r.Seq, To: r.To, Started: r.Started.UTC().Format(time.RFC3339Nano), Completed: r.Completed,
		Undo: make([]ExportedUndo, 0, len(r.Undo))}
	for _, u := range r.Undo {
		e := ExportedUndo{Seq: u.Seq, Fingerprint: u.Action.String(), Tool: u.Tool}
		if c := u.Compensation; c != nil {
			e.Compensation = &ExportedCompensation{Tool: c.Tool, Args: c.Args, Key: c.Key, Idempotent: c.Idempotent,
				Fingerprint: ledger.CompensationFingerprint(c, u.Action).String()}
		}
		v.Undo = append(v.Undo, e)
	}
	return v
}

// NewExportedRollbacks returns each of rs in the form Export writes; never
// nil.
func NewExportedRollbacks(rs []RollbackInfo) []ExportedRollback {
	out := make([]ExportedRollback, 0, len(rs))
	for _, r := range rs {
		out = append(out, NewExportedRollback(r))
	}
	return out
}

// ExportedBranch is what a branch's atom records of the branch (its
// body's record.ExtTagBase extension), as Export and inspect --json write
// it.
type ExportedBranch struct {
	Name string `json:"name"`
	// Base is the seq whose state the branch read: the atom DAG's edge.
	Base uint64 `json:"base"`
	// Reads are the state keys the branch declared it reads, ascending,
	// as "kind" or "kind:name" (record.StateKey.String); never null.
	Reads []string `json:"reads"`
}

// ExportedEnd is the end of a run (its end record) as Export, and inspect
// --json, write it.
type ExportedEnd struct {
	// Seq is the end's link in the run's chain, its last seq + 1, and
	// Head the chain head there (64 hex digits).
	Seq    uint64 `json:"seq"`
	Head   string `json:"head"`
	Status string `json:"status"` // "completed", "failed" or "cancelled"
	Ended  string `json:"ended"`  // when, RFC 3339 in UTC with nanoseconds
	// Result is the result the run ended with; absent if none.
	Result ExportedValue `json:"result,omitempty"`
}

// NewExportedEnd returns the end of the run s summarizes in the form
// Export writes, or nil if the run has not ended. It shares s.Result.
func NewExportedEnd(s RunSummary) *ExportedEnd {
	if s.Status == "" || s.Status == "active" {
		return nil
	}
	return &ExportedEnd{Seq: lastSeq(s) + 1, Head: s.EndHead.String(), Status: s.Status,
		Ended: s.Ended.UTC().Format(time.RFC3339Nano), Result: s.Result}
}

// ExportedAction is one action of the ledger (ActionInfo) as Export, and
// inspect --json, write it.
type ExportedAction struct {
	Fingerprint string        `json:"fingerprint"` // 64 hex digits
	Run         string        `json:"run"`
	Seq         uint64        `json:"seq"`
	Index       uint32        `json:"index"`
	Tool        string        `json:"tool"`
	Args        ExportedValue `json:"args,omitempty"`
	Key         string        `json:"key"`
	Idempotent  bool          `json:"idempotent"`
	Status      string        `json:"status"` // ActionInfo.StatusName
	Result      ExportedValue `json:"result,omitempty"`
	Error       string        `json:"error,omitempty"`
	IntentPos   string        `json:"intent_pos,omitempty"`      // "segment:offset"; absent without an intent
	CertPos     string        `json:"certificate_pos,omitempty"` // "segment:offset"; absent without a certificate
	// ArgsBytes and ResultBytes are the whole sizes of Args and Result,
	// given only when the value was cut (an Inspector bounds what it holds:
	// see ActionInfo.ArgsSize).
	ArgsBytes   int `json:"args_bytes,omitempty"`
	ResultBytes int `json:"result_bytes,omitempty"`
	// Retry is the action's retry policy and attempts (ActionInfo.Retry);
	// absent for an action without a policy.
	Retry *ExportedRetry `json:"retry,omitempty"`
}

// ExportedRetry is RetryInfo as Export writes it: durations in
// milliseconds, times in RFC 3339 (UTC), gave_up a reason's name.
type ExportedRetry struct {
	MaxAttempts  uint32  `json:"max_attempts"`
	InitialMs    float64 `json:"initial_ms"`
	Multiplier   float64 `json:"multiplier"`
	MaxMs        float64 `json:"max_ms"`
	DeadlineMs   float64 `json:"deadline_ms"`
	Attempts     uint32  `json:"attempts"`
	FirstAttempt string  `json:"first_attempt,omitempty"`
	NextAttempt  string  `json:"next_attempt,omitempty"`
	GaveUp       string  `json:"gave_up,omitempty"` // "attempts exhausted", "deadline passed", "permanent error"
}

func newExportedRetry(r *RetryInfo) *ExportedRetry {
	if r == nil {
		return nil
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	t := func(t time.Time) string {
		if t.IsZero() || t.UnixNano() == 0 {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	e := &ExportedRetry{MaxAttempts: r.Policy.MaxAttempts, InitialMs: ms(r.Policy.Initial), Multiplier: r.Policy.Multiplier,
		MaxMs: ms(r.Policy.Max), DeadlineMs: ms(r.Policy.Deadline), Attempts: r.Attempts, FirstAttempt: t(r.First), NextAttempt: t(r.NextAttempt)}
	if r.GaveUp != ledger.NotGivenUp {
		e.GaveUp = r.GaveUp.String()
	}
	return e
}

// ExportedValue is a value of the store (an action's args or result) as
// Export writes it: the JSON value itself when the bytes are valid JSON, a
// JSON string when they are valid UTF-8 but not JSON, and an object
// {"base64": "..."} otherwise. An empty value is left out of its object.
//
// The encoding is for reading: bytes that are a JSON string and UTF-8 text
// that is not JSON can come out the same, so it does not decode back.
// Args are canonical JSON, so only a cut one (see ArgsBytes) is text.
type ExportedValue []byte

// MarshalJSON implements json.Marshaler.
func (v ExportedValue) MarshalJSON() ([]byte, error) {
	if json.Valid(v) {
		return v, nil
	}
	return marshalText(v)
}

// marshalText is b as a JSON string when it is valid UTF-8, and as
// {"base64": ...} otherwise.
func marshalText(b []byte) ([]byte, error) {
	if utf8.Valid(b) {
		return json.Marshal(string(b))
	}
	return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(b)})
}

// ExportedMessage is a message an atom sent, as Export writes it.
type ExportedMessage struct {
	Index   uint32        `json:"index"` // its place among the atom's messages: its id is run/seq/index
	To      string        `json:"to"`
	Payload ExportedValue `json:"payload"`
}

// ExportedMessageID names a message an atom consumed: the atom that sent
// it (run, seq) and its place among that atom's messages.
type ExportedMessageID struct {
	From  string `json:"from"`
	Seq   uint64 `json:"seq"`
	Index uint32 `json:"index"`
}

// NewExportedAtom returns a in the form Export writes. It shares a's
// values (the caller may not change them through either).
func NewExportedAtom(a *AtomInfo) ExportedAtom {
	e := ExportedAtom{Run: a.Run, Seq: a.Seq, Head: a.Head.String(), Pos: a.Pos.String(), Size: a.Size,
		RawSize: a.RawSize, Delta: NewExportedOps(a), Actions: NewExportedActions(a.Actions)}
	for i, m := range a.Sent {
		e.Sent = append(e.Sent, ExportedMessage{Index: uint32(i), To: m.To, Payload: m.Payload})
	}
	for _, id := range a.Consumed {
		e.Consumed = append(e.Consumed, ExportedMessageID{From: id.From, Seq: id.Seq, Index: id.Index})
	}
	if a.Branch != "" {
		b := &ExportedBranch{Name: a.Branch, Base: a.Base, Reads: make([]string, len(a.Reads))}
		for i, k := range a.Reads {
			b.Reads[i] = k.String()
		}
		e.Branch = b
	}
	return e
}

// NewExportedAction returns a in the form Export writes. It shares a's
// args and result.
func NewExportedAction(a ActionInfo) ExportedAction {
	v := ExportedAction{
		Fingerprint: a.Fingerprint.String(), Run: a.Run, Seq: a.Seq, Index: a.Index, Tool: a.Tool,
		Args: a.Args, Key: a.Key, Idempotent: a.Idempotent, Status: a.StatusName(),
		Result: a.Result, Error: a.Err, IntentPos: posString(a.IntentPos), CertPos: posString(a.CertPos),
		Retry: newExportedRetry(a.Retry),
	}
	if len(a.Args) < a.ArgsSize {
		v.ArgsBytes = a.ArgsSize
	}
	if len(a.Result) < a.ResultSize {
		v.ResultBytes = a.ResultSize
	}
	return v
}

// NewExportedActions returns each of as in the form Export writes; an
// empty list is an empty slice, never nil (it encodes as [], not null).
func NewExportedActions(as []ActionInfo) []ExportedAction {
	out := make([]ExportedAction, 0, len(as))
	for _, a := range as {
		out = append(out, NewExportedAction(a))
	}
	return out
}

// posString is p, or "" for the zero Pos (no such record).
func posString(p wal.Pos) string {
	if p == (wal.Pos{}) {
		return ""
	}
	return p.String()
}

// StatusName names the action's state for people: "done", "failed" or
// "resolved" once it has a certificate; without one, "running" when it
// belongs to the atom a live process is running now (Running: its exec may
// be running) and "in-doubt" otherwise (dispatched, outcome unknown).
func (a ActionInfo) StatusName() string {
	switch {
	case a.Status != ledger.StatusIntent:
		return a.Status.String()
	case a.Running:
		return "running"
	}
	return "in-doubt"
}

// Export writes the committed atoms of run from seq from through seq to,
// inclusive, to w as JSON Lines: one ExportedAtom per line, in seq order,
// each line an object as encoding/json writes it followed by "\n". It
// returns how many atoms it wrote (after an error of w, some of those may
// not have reached it).
//
// Every line is an atom. A value of an erasable memory key (a set_sealed
// op, engine.Options.ErasableKeys) is written opened with the keyring, or
// marked erased once its data key was erased (ExportedOp); never sealed.
// The atom that completes a rollback carries it,
// in the field "rollback" (ExportedRollback: the target and what it
// undid). The end of a run that ended is the field "end"
// (ExportedEnd) of its last atom's line, so an export that reaches the
// last atom says how the run ended; a run that ended before its first
// atom has no line to carry its end (inspect shows it).
//
// from 0 is seq 1 (a fork's first atom after its fork point: the seqs
// before are its parent's). to 0 is the run's last atom, and a to past the last
// atom stops there, so (0, 0) exports the whole run; a from past the last
// atom exports nothing. A from after a to other than 0, or a run the store
// does not have, is an error before anything is written.
//
// Export reads one atom at a time (Atom), so it holds one atom's values
// (at most 64 MiB of args and results, the rest cut; see ArgsBytes) however
// long the run. It buffers w and flushes it before it returns, also on
// error: what it wrote is then every atom before the one it could not read
// (an error matching record.ErrCorrupt, which is engine.ErrCorrupt, for a
// damaged record) or write. It stops with ctx's error once ctx is done.
func (in *Inspector) Export(ctx context.Context, w io.Writer, run string, from, to uint64) (int, error) {
	r := in.runs[run]
	if r == nil {
		return 0, fmt.Errorf("offline: export: store %s has no run %q", in.st.db.dir, run)
	}
	from = max(from, r.base+1) // a fork's own atoms; its parent's are the parent's to export
	if to == 0 {
		to = r.sum.LastSeq
	} else if from > to {
		return 0, fmt.Errorf("offline: export: run %q: from seq %d is after to seq %d", run, from, to)
	}
	to = min(to, r.sum.LastSeq)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	n := 0
	for seq := from; seq <= to; seq++ {
		a, err := in.Atom(ctx, run, seq)
		if err != nil {
			if ferr := bw.Flush(); ferr != nil {
				return n, fmt.Errorf("offline: export: write: %w", ferr)
			}
			return n, err
		}
		line := NewExportedAtom(a)
		if seq == r.sum.LastSeq {
			line.End = NewExportedEnd(r.sum)
		}
		for _, wi := range r.sum.Waits {
			switch {
			case wi.Seq == seq-1 && wi.Taken:
				v := NewExportedWait(wi)
				line.Waited = &v
			case wi.Seq == seq && seq == r.sum.LastSeq && !wi.Taken:
				v := NewExportedWait(wi)
				line.Wait = &v
			}
		}
		for _, rb := range r.sum.Rollbacks {
			if rb.Seq == seq && rb.Completed {
				v := NewExportedRollback(rb)
				line.Rollback = &v
			}
		}
		if err := enc.Encode(line); err != nil { // every field marshals: an error is w's
			return n, fmt.Errorf("offline: export: write run %q seq %d: %w", run, seq, err)
		}
		n++
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("offline: export: write: %w", err)
	}
	return n, nil
}
