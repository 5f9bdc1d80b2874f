package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"

	"github.com/continuumdb/continuum/wal"
	"github.com/zeebo/blake3"
)

// Action is one external tool call as the agent describes it.
type Action struct {
	// Tool names the tool; it must not be empty.
	Tool string
	// Args are the call's arguments as a JSON document (empty means null).
	// They are canonicalised before fingerprinting and storing.
	Args []byte
	// Key is the idempotency key passed to Exec and, by the agent, to the
	// downstream system. The engine fills it with DefaultKey when the agent
	// leaves it empty; Fingerprint refuses an empty key (ErrNoKey).
	Key string
	// Idempotent declares that the downstream honours Key, so that an
	// in-doubt call may be made again with the same key.
	Idempotent bool
	// Redact lists RFC 6901 JSON pointers into Args whose values are
	// secrets: they are removed before fingerprinting and before storing,
	// so they never reach the log. Where one of these values comes back in
	// exec's error message or in its result, the certificate stores
	// Redacted in its place (see Certificate).
	Redact []string
	// RedactResult lists RFC 6901 JSON pointers into the result whose
	// values the certificate stores as the string Redacted (a result that
	// is not JSON is stored as Redacted whole). The fingerprint does not
	// depend on them.
	RedactResult []string
	// Compensate, if set, is the action that undoes this one (a saga
	// step): the engine's Run.Rollback runs it, through the ledger, when it
	// rolls the run back past this action. It is recorded with the intent,
	// so it is durable before exec is called. Its Tool is required; its
	// Args are canonicalised and its Redact pointers removed like this
	// action's; its Key, if empty, is CompensationKey of this action's
	// fingerprint when the compensation runs; its Idempotent says whether
	// an in-doubt compensation may be run again. It must not carry a
	// Compensate of its own, nor a RedactResult (ErrBadCompensation: the
	// rollback that runs it may run in a later process, which only has
	// what the intent recorded).
	//
	// The compensation is part of the fingerprint (see format.go): the
	// chain covers an atom's fingerprints, so it covers what would undo
	// each action, and an action with a compensation is a different
	// action from the same call without one. An action without Compensate
	// has the fingerprint it always had.
	Compensate *Action
	// Retry, if set, is how Do retries the action when exec fails (see
	// RetryPolicy and Do): recorded with every attempt's intent, so the
	// attempt count and the next attempt's time survive a crash. It is
	// part of the fingerprint (its Retryable func is not): an action
	// without Retry has the fingerprint it always had. A compensation has
	// none (ErrBadCompensation).
	Retry *RetryPolicy
}

// Compensation is the action that undoes an intent's action, as the intent
// records it.
type Compensation struct {
	Tool string
	Args []byte // canonical JSON with the compensation's Redact pointers removed
	// Key is the compensation's idempotency key as the agent gave it; ""
	// means CompensationKey(fingerprint of the action it undoes).
	Key        string
	Idempotent bool
}

// Equal reports whether c and o are the same compensation (both nil
// counts).
func (c *Compensation) Equal(o *Compensation) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.Tool == o.Tool && bytes.Equal(c.Args, o.Args) && c.Key == o.Key && c.Idempotent == o.Idempotent
}

// CompensationIntent builds the intent of compensation c of the action
// with fingerprint undoes, run by a rollback as call index of the atom at
// seq of run runID: tool, args and Idempotent are c's, the key c.Key or,
// if empty, CompensationKey(undoes). Its fingerprint covers undoes too
// (CompensationFingerprint), so it is never the fingerprint of an
// ordinary action.
func CompensationIntent(c *Compensation, undoes Fingerprint, runID string, seq uint64, index uint32) (*Intent, error) {
	if c == nil || c.Tool == "" {
		return nil, fmt.Errorf("%w: a compensation without a tool", ErrBadCompensation)
	}
	if undoes == (Fingerprint{}) {
		return nil, fmt.Errorf("%w: compensation %q undoes no action", ErrBadCompensation, c.Tool)
	}
	key := c.Key
	if key == "" {
		key = CompensationKey(undoes)
	}
	return &Intent{
		Fingerprint: fingerprintUndo(c.Tool, c.Args, key, nil, &undoes),
		RunID:       runID,
		Seq:         seq,
		Index:       index,
		Tool:        c.Tool,
		Args:        c.Args,
		Key:         key,
		Idempotent:  c.Idempotent,
		Undoes:      undoes,
	}, nil
}

// CompensationFingerprint is the fingerprint of the intent
// CompensationIntent builds for c, given its key (filled in).
func CompensationFingerprint(c *Compensation, undoes Fingerprint) Fingerprint {
	key := c.Key
	if key == "" {
		key = CompensationKey(undoes)
	}
	return fingerprintUndo(c.Tool, c.Args, key, nil, &undoes)
}

// CompensationKey is the default idempotency key of the compensation of
// the action with fingerprint fp: "ckc1-" and fp in hex. It depends on the
// action it undoes and on nothing else, so that every rollback that
// reaches an action, in this process or after any number of crashes,
// derives the same key, and the ledger runs the compensation at most once
// for the one effect the action had.
func CompensationKey(fp Fingerprint) string { return "ckc1-" + fp.String() }

// compensation validates and canonicalises a.Compensate (nil if none).
func compensation(a *Action) (*Compensation, error) {
	c := a.Compensate
	if c == nil {
		return nil, nil
	}
	switch {
	case c.Tool == "":
		return nil, fmt.Errorf("%w: action %q: its compensation has no tool", ErrBadCompensation, a.Tool)
	case c.Compensate != nil:
		return nil, fmt.Errorf("%w: action %q: its compensation %q has a compensation of its own", ErrBadCompensation, a.Tool, c.Tool)
	case c.Retry != nil:
		return nil, fmt.Errorf("%w: action %q: its compensation %q has a retry policy, which a rollback does not run", ErrBadCompensation, a.Tool, c.Tool)
	case len(c.RedactResult) > 0:
		return nil, fmt.Errorf("%w: action %q: its compensation %q has RedactResult, which an intent does not record", ErrBadCompensation, a.Tool, c.Tool)
	}
	args, err := CanonicalArgs(c.Args, c.Redact)
	if err != nil {
		return nil, fmt.Errorf("%w: action %q: its compensation %q: %w", ErrBadCompensation, a.Tool, c.Tool, err)
	}
	return &Compensation{Tool: c.Tool, Args: args, Key: c.Key, Idempotent: c.Idempotent}, nil
}

// Exec performs an action's side effect. It receives the action's
// idempotency key, which it should pass to the downstream system.
type Exec func(ctx context.Context, idempotencyKey string) ([]byte, error)

// Fingerprint identifies an action: BLAKE3-256, in derive-key mode under the
// context fingerprintContext, of the length-prefixed tool, canonical
// redacted args and idempotency key (see format.go).
type Fingerprint [32]byte

// String returns the fingerprint in lower-case hex.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// Fingerprint returns the action's fingerprint. It fails, without
// panicking, for an empty tool (ErrNoTool), an empty key (ErrNoKey), invalid
// JSON args (ErrInvalidArgs) and a malformed redact pointer (ErrBadPointer).
func (a Action) Fingerprint() (Fingerprint, error) {
	if a.Tool == "" {
		return Fingerprint{}, ErrNoTool
	}
	if a.Key == "" {
		return Fingerprint{}, ErrNoKey
	}
	comp, err := compensation(&a)
	if err != nil {
		return Fingerprint{}, err
	}
	pol, err := a.Retry.normalized()
	if err != nil {
		return Fingerprint{}, fmt.Errorf("ledger: action %q: %w", a.Tool, err)
	}
	buf := bufPool.Get().(*[]byte)
	args, err := appendCanonical((*buf)[:0], a.Args, a.Redact)
	var fp Fingerprint
	if err == nil {
		fp = fingerprintFull(a.Tool, args, a.Key, comp, nil, pol)
	}
	if cap(args) <= 64<<10 { // keep huge documents' buffers out of the pool
		*buf = args[:0]
		bufPool.Put(buf)
	}
	return fp, err
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

var hasherPool = sync.Pool{New: func() any { return blake3.NewDeriveKey(fingerprintContext) }}

// fingerprintOf hashes the fingerprint envelope of already canonical args
// and, if comp is not nil, of the compensation (format.go).
func fingerprintOf(tool string, canonArgs []byte, key string, comp *Compensation) Fingerprint {
	return fingerprintFull(tool, canonArgs, key, comp, nil, nil)
}

// fingerprintUndo is fingerprintOf that also hashes undoes, the action a
// compensation undoes, when it is not nil (format.go).
func fingerprintUndo(tool string, canonArgs []byte, key string, comp *Compensation, undoes *Fingerprint) Fingerprint {
	return fingerprintFull(tool, canonArgs, key, comp, undoes, nil)
}

// fingerprintFull is fingerprintUndo that also hashes the retry policy
// pol (normalized), when it is not nil (format.go).
func fingerprintFull(tool string, canonArgs []byte, key string, comp *Compensation, undoes *Fingerprint, pol *RetryPolicy) Fingerprint {
	h := hasherPool.Get().(*blake3.Hasher)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(tool)))
	_, _ = h.Write(n[:])
	_, _ = h.WriteString(tool)
	binary.LittleEndian.PutUint64(n[:], uint64(len(canonArgs)))
	_, _ = h.Write(n[:])
	_, _ = h.Write(canonArgs)
	binary.LittleEndian.PutUint64(n[:], uint64(len(key)))
	_, _ = h.Write(n[:])
	_, _ = h.WriteString(key)
	if comp != nil {
		for _, f := range [...][]byte{[]byte(comp.Tool), comp.Args, []byte(comp.Key)} {
			binary.LittleEndian.PutUint64(n[:], uint64(len(f)))
			_, _ = h.Write(n[:])
			_, _ = h.Write(f)
		}
	}
	if undoes != nil {
		binary.LittleEndian.PutUint64(n[:], uint64(len(undoes)))
		_, _ = h.Write(n[:])
		_, _ = h.Write(undoes[:])
	}
	if pol != nil {
		var pb [5 * binary.MaxVarintLen64]byte
		p := appendPolicy(pb[:0], pol)
		binary.LittleEndian.PutUint64(n[:], retryEnvelopeMark)
		_, _ = h.Write(n[:])
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		_, _ = h.Write(n[:])
		_, _ = h.Write(p)
	}
	var fp Fingerprint
	h.Sum(fp[:0])
	h.Reset()
	hasherPool.Put(h)
	return fp
}

// DefaultKey is the idempotency key of the index-th call of the atom at seq
// in run runID: "ck1-<len(runID)>:<runID>:<seq>:<index>". The length prefix
// makes it collision-free across (run, seq, index) whatever the run id
// holds, and it is deterministic, so a re-begun atom derives the same keys.
// The engine numbers only the atom's Do calls that leave Key empty (its
// Atom documents why).
func DefaultKey(runID string, seq uint64, index int) string {
	return string(appendDefaultKey(make([]byte, 0, len(runID)+40), runID, seq, index))
}

func appendDefaultKey(b []byte, runID string, seq uint64, index int) []byte {
	b = append(b, "ck1-"...)
	b = strconv.AppendInt(b, int64(len(runID)), 10)
	b = append(b, ':')
	b = append(b, runID...)
	b = append(b, ':')
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(index), 10)
	return b
}

// Status is the state of a fingerprint in the ledger.
type Status uint8

const (
	// StatusNone: no durable record (the zero Entry; also an action whose
	// intent is being written right now).
	StatusNone Status = iota
	// StatusIntent: a durable intent and no certificate yet. When no
	// goroutine of this process is running the action, it is in doubt.
	StatusIntent
	// StatusDone: exec succeeded and its certificate, with the result, is
	// durable. Exec is never called again for this fingerprint.
	StatusDone
	// StatusFailed: exec returned an error, recorded durably. A later Do
	// tries again.
	StatusFailed
	// StatusResolved: the agent reconciled an in-doubt action and recorded
	// its outcome with Resolve. Exec is never called again.
	StatusResolved
)

// String returns the status's name.
func (s Status) String() string {
	switch s {
	case StatusNone:
		return "none"
	case StatusIntent:
		return "intent"
	case StatusDone:
		return "done"
	case StatusFailed:
		return "failed"
	case StatusResolved:
		return "resolved"
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// certified reports whether s is a final status: exec is never called again.
func (s Status) certified() bool { return s == StatusDone || s == StatusResolved }

// Loc is where a record lives in the engine's log: the log's own position
// type, wal.Pos (an alias, not a copy: a wal.Pos is a Loc and needs no
// conversion). The ledger stores and returns it but never interprets it;
// the zero Loc means "none".
type Loc = wal.Pos

// Intent is the durable record written before exec is called.
type Intent struct {
	Fingerprint Fingerprint
	RunID       string
	Seq         uint64
	Index       uint32 // the call's index in the atom, the one DefaultKey takes
	Tool        string
	Args        []byte // canonical JSON with the Redact pointers removed
	Key         string
	Idempotent  bool
	// Compensation is the action that undoes this one (Action.Compensate),
	// nil if none. It is part of the fingerprint.
	Compensation *Compensation
	// Undoes, when not zero, says that this intent is itself a
	// compensation: of the action with that fingerprint, run by a
	// rollback (CompensationIntent). It is part of the fingerprint. A
	// compensation has no Compensation: a rollback never undoes an undo.
	Undoes Fingerprint
	// Retry is the action's retry policy (Action.Retry), normalized; nil
	// if none. It is part of the fingerprint. An intent that undoes
	// another has none.
	Retry *RetryPolicy
	// Attempt, First and Started, with Retry: which attempt this intent
	// starts (1-based), the start of the first attempt and of this one
	// (Unix nanoseconds, wall clock; Started >= First). NewIntent leaves
	// them zero: Do fills them in the copy of the intent it writes for
	// each attempt.
	Attempt        uint32
	First, Started int64

	// scrub removes the action's secrets from its certificate (in memory
	// only: NewIntent sets it, a decoded intent has none).
	scrub *scrubber
}

// ExplicitKey reports whether the action's key was given by its caller
// rather than derived (DefaultKey): another run may repeat such an action
// and get its certificate, so its records belong to the store rather than
// to the run (an encrypted store seals them with the store's key, and
// erasing the run keeps them).
func (in *Intent) ExplicitKey() bool {
	var buf [96]byte
	return string(appendDefaultKey(buf[:0], in.RunID, in.Seq, int(in.Index))) != in.Key
}

// Certificate is the durable record of an action's outcome. Result and Err
// are stored scrubbed: the values of the action's Redact pointers, where
// exec echoed them, and the values of its RedactResult pointers are
// replaced by Redacted. The caller of the Do that ran exec gets exec's
// result and error as they were; every later Do of the action (in this
// process or after a restart) gets the certificate's.
type Certificate struct {
	Fingerprint Fingerprint
	RunID       string
	Seq         uint64
	Index       uint32
	Status      Status // StatusDone, StatusFailed or StatusResolved
	Result      []byte // the result (done, resolved); empty when failed
	Err         string // exec's error message (failed)

	// ExplicitKey is the action's Intent.ExplicitKey, for the journal that
	// writes the certificate (in memory only: it is not encoded, and a
	// decoded certificate has it false).
	ExplicitKey bool

	// Attempt, on a failed certificate of an action with a retry policy,
	// says which attempt failed and what follows (retry or give up); nil
	// otherwise.
	Attempt *Attempt
}

// NewIntent builds the intent of action a, the index-th call of the atom at
// seq in run runID: it canonicalises and redacts the args once and computes
// the fingerprint from them, so Intent.Fingerprint equals a.Fingerprint().
// An empty a.Key is filled with DefaultKey(runID, seq, index).
func NewIntent(a Action, runID string, seq uint64, index uint32) (*Intent, error) {
	if a.Tool == "" {
		return nil, ErrNoTool
	}
	if a.Key == "" {
		a.Key = DefaultKey(runID, seq, int(index))
	}
	args, err := CanonicalArgs(a.Args, a.Redact)
	if err != nil {
		return nil, fmt.Errorf("ledger: action %q: %w", a.Tool, err)
	}
	scrub, err := newScrubber(a.Args, a.Redact, a.RedactResult)
	if err != nil {
		return nil, fmt.Errorf("ledger: action %q: %w", a.Tool, err)
	}
	comp, err := compensation(&a)
	if err != nil {
		return nil, err
	}
	pol, err := a.Retry.normalized()
	if err != nil {
		return nil, fmt.Errorf("ledger: action %q: %w", a.Tool, err)
	}
	return &Intent{
		scrub:        scrub,
		Compensation: comp,
		Retry:        pol,
		Fingerprint:  fingerprintFull(a.Tool, args, a.Key, comp, nil, pol),
		RunID:        runID,
		Seq:          seq,
		Index:        index,
		Tool:         a.Tool,
		Args:         args,
		Key:          a.Key,
		Idempotent:   a.Idempotent,
	}, nil
}

// WithDefaultKey returns the intent of the same tool and args as the
// index-th default-key call of in's atom: the key is DefaultKey(in.RunID,
// in.Seq, index) and the fingerprint is recomputed from the canonical args
// in already holds, without parsing them again.
func (in *Intent) WithDefaultKey(index uint32) *Intent {
	c := *in
	c.Index = index
	c.Key = DefaultKey(in.RunID, in.Seq, int(index))
	c.Fingerprint = in.fingerprint(c.Tool, c.Args, c.Key)
	return &c
}

// fingerprint is the fingerprint of in's action with that tool, args and
// key: its compensation and the action it undoes as in holds them.
func (in *Intent) fingerprint(tool string, args []byte, key string) Fingerprint {
	if in.Undoes != (Fingerprint{}) {
		return fingerprintFull(tool, args, key, in.Compensation, &in.Undoes, in.Retry)
	}
	return fingerprintFull(tool, args, key, in.Compensation, nil, in.Retry)
}

// CheckFingerprint recomputes the fingerprint from the intent's tool, args
// and key and reports an error wrapping ErrCorrupt if it differs from
// in.Fingerprint or if the args are not in canonical form.
func (in *Intent) CheckFingerprint() error {
	canon, err := CanonicalArgs(in.Args, nil)
	if err != nil {
		return fmt.Errorf("%w: intent args: %v", ErrCorrupt, err)
	}
	if string(canon) != string(in.Args) && !(len(in.Args) == 0 && string(canon) == "null") {
		return fmt.Errorf("%w: intent args are not canonical JSON", ErrCorrupt)
	}
	if c := in.Compensation; c != nil {
		canon, err := CanonicalArgs(c.Args, nil)
		if err != nil {
			return fmt.Errorf("%w: intent compensation args: %v", ErrCorrupt, err)
		}
		if string(canon) != string(c.Args) && !(len(c.Args) == 0 && string(canon) == "null") {
			return fmt.Errorf("%w: intent compensation args are not canonical JSON", ErrCorrupt)
		}
	}
	if got := in.fingerprint(in.Tool, canon, in.Key); got != in.Fingerprint {
		return fmt.Errorf("%w: intent fingerprint %s does not match its tool, args and key (%s)",
			ErrCorrupt, in.Fingerprint, got)
	}
	return nil
}
