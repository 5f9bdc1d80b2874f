package ledger

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers test for them with errors.Is; the errors returned
// by this package wrap them with the details (what, where).
var (
	// ErrInDoubt matches an *InDoubtError: an intent is durable but its
	// certificate is not, the action is not declared idempotent, and nobody
	// knows whether its side effect happened.
	ErrInDoubt = errors.New("ledger: action in doubt")
	// ErrUncertified, matched by an Exec's error, says that the exec
	// cannot vouch for its outcome: its effect may or may not have
	// happened (it ran past a bound, or its writer lost the store
	// meanwhile). Do writes no certificate: the action stays in doubt,
	// exactly as after a crash during exec, and Do returns an error that
	// matches ErrInDoubt (an *InDoubtError, for a Resolve) and the exec's.
	ErrUncertified = errors.New("ledger: outcome not certified")
	// ErrNoKey is returned for an action without an idempotency key. The
	// engine fills Action.Key (see DefaultKey) before fingerprinting.
	ErrNoKey = errors.New("ledger: action has no idempotency key")
	// ErrNoTool is returned for an action without a tool name.
	ErrNoTool = errors.New("ledger: action has no tool")
	// ErrAlreadyCertified is returned by Resolve and ResolveFailed for a
	// fingerprint whose certificate (done or resolved) is already known.
	ErrAlreadyCertified = errors.New("ledger: action already certified")
	// ErrInFlight is returned by Resolve and ResolveFailed while another
	// goroutine of this process is executing or recording the action.
	ErrInFlight = errors.New("ledger: action in flight")
	// ErrCorrupt is wrapped by every decoding error of an intent, a
	// certificate or a table; the message says what is wrong and at which
	// byte offset.
	ErrCorrupt = errors.New("ledger: corrupt record")
	// ErrInvalidArgs is wrapped by every error about an action's JSON
	// arguments; the message gives the byte offset in the arguments.
	ErrInvalidArgs = errors.New("ledger: invalid JSON args")
	// ErrBadPointer is wrapped by the error for a malformed RFC 6901 JSON
	// pointer in Action.Redact.
	ErrBadPointer = errors.New("ledger: malformed redact pointer")
	// ErrBadIntent is wrapped by Do, Resolve and ResolveFailed when the
	// intent they are given is unusable (nil, no tool, no key).
	ErrBadIntent = errors.New("ledger: bad intent")
	// ErrBadCompensation is wrapped by the error for an Action.Compensate
	// that cannot be recorded: no tool, invalid args or redact pointers,
	// or a compensation of its own.
	ErrBadCompensation = errors.New("ledger: bad compensation")
)

// InDoubtError is returned by Do for a non-idempotent action whose intent is
// durable and whose certificate is not (the process crashed, or failed to
// record the outcome, between dispatch and completion). It matches
// ErrInDoubt. The agent must ask the downstream system, using Key, whether
// the effect happened, then record what it found with the engine's
// Atom.ResolveInDoubt (it happened: here is its result) or
// ResolveInDoubtFailed (it did not: Do may try again, with Key).
type InDoubtError struct {
	Key         string
	Tool        string
	RunID       string
	Seq         uint64
	Index       uint32 // the call's index in the atom (Intent.Index)
	Fingerprint Fingerprint
}

func (e *InDoubtError) Error() string {
	return fmt.Sprintf("ledger: action in doubt: tool %q of run %q at seq %d (fingerprint %s) was dispatched "+
		"but its outcome was never recorded; reconcile with the downstream using idempotency key %q, "+
		"then call ResolveInDoubt with the result it reports (or ResolveInDoubtFailed if the effect did not happen)",
		e.Tool, e.RunID, e.Seq, e.Fingerprint.String()[:16], e.Key)
}

// Is reports whether target is ErrInDoubt.
func (e *InDoubtError) Is(target error) bool { return target == ErrInDoubt }

// corruptf returns an error wrapping ErrCorrupt that names what is wrong and
// the byte offset within the decoded buffer.
func corruptf(what string, off int, format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, what, off, fmt.Sprintf(format, args...))
}
