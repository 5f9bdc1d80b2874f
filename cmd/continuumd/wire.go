package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/offline"
)

// The protocol's JSON, one type per request and answer. openapi.json
// describes each under the same name (TestOpenAPISchemas compares their
// fields). Bytes travel as a string when they are valid UTF-8 and as
// NAME_base64 (standard base64) otherwise; a request may use either form,
// never both.

// beginRequest is the body of POST /v1/runs/{run}/attempts.
type beginRequest struct {
	// RequestID makes a repeated begin (after a lost answer) return the
	// attempt the first one made instead of finding the run held. Any
	// string the client does not reuse for another begin of the run.
	RequestID string `json:"request_id"`
	// Takeover abandons the attempt that holds the run's lease, if any
	// (its calls waiting for an outcome become in doubt, its atom is
	// failed), instead of answering run_held.
	Takeover bool `json:"takeover"`
	// LeaseMS is the attempt's lease in milliseconds; 0 means the server's
	// default. Every request on the attempt renews it.
	LeaseMS int64 `json:"lease_ms"`
	// Call is call 0 of the attempt, made with the begin: one round trip
	// for both (the answer's call). Not with Commit.
	Call *callRequest `json:"call"`
	// Commit commits the attempt with the begin: an atom without actions
	// in one round trip (the answer's commit). A begin repeated with the
	// same request_id after the commit answers it again (another delta is
	// commit_mismatch).
	Commit *commitRequest `json:"commit"`
	// Seq, when given, is the seq the client expects the atom to have
	// (the run's last committed seq + 1 as it last saw it): another is 409
	// seq_mismatch, nothing begun (details.next: the run's next seq). A
	// begin carrying its commit repeated after a restart of the server
	// (which forgets request ids) so cannot commit the delta twice.
	Seq *uint64 `json:"seq"`
}

// callRequest is the body of POST .../calls/{call}: one action of the
// atom (ledger.Action).
type callRequest struct {
	Tool         string          `json:"tool"`
	Args         json.RawMessage `json:"args"`
	Key          string          `json:"key"`
	Idempotent   bool            `json:"idempotent"`
	Redact       []string        `json:"redact"`
	RedactResult []string        `json:"redact_result"`
	// Compensate is the action that undoes this one (ledger.Action.Compensate):
	// a rollback past it runs it (POST /v1/runs/{run}/rollback), in the
	// client, exactly once.
	Compensate *compensateRequest `json:"compensate"`
	// Retry is the action's retry policy (ledger.RetryPolicy): the server
	// answers execute again, attempt by attempt, after each failed
	// outcome, waiting its backoff, until an outcome succeeds or the
	// policy gives the action up (failed, with gave_up). The attempts and
	// their schedule are durable: a restart of the server goes on with
	// them.
	Retry *retryRequest `json:"retry"`
}

// retryRequest is a call's retry policy, durations in milliseconds. Every
// field is part of the action's identity (its fingerprint).
type retryRequest struct {
	MaxAttempts uint32  `json:"max_attempts"`
	InitialMs   int64   `json:"initial_ms"`
	Multiplier  float64 `json:"multiplier"`
	MaxMs       int64   `json:"max_ms"`
	DeadlineMs  int64   `json:"deadline_ms"`
}

func (r *retryRequest) policy() *ledger.RetryPolicy {
	return &ledger.RetryPolicy{MaxAttempts: r.MaxAttempts, Initial: time.Duration(r.InitialMs) * time.Millisecond, Multiplier: r.Multiplier,
		Max: time.Duration(r.MaxMs) * time.Millisecond, Deadline: time.Duration(r.DeadlineMs) * time.Millisecond}
}

// compensateRequest is a call's compensation: an action without a
// compensation or a redact_result of its own.
type compensateRequest struct {
	Tool       string          `json:"tool"`
	Args       json.RawMessage `json:"args"`
	Key        string          `json:"key"`
	Idempotent bool            `json:"idempotent"`
	Redact     []string        `json:"redact"`
}

// outcomeRequest is the body of POST .../calls/{call}/outcome: what the
// client's execution of the action returned. Exactly one of a result
// (result or result_base64) and error. An error says the effect did not
// happen (it is certified as failed, and a later call executes again).
type outcomeRequest struct {
	Result       *string `json:"result"`
	ResultBase64 *string `json:"result_base64"`
	Error        *string `json:"error"`
	// Attempt is the attempt of a call with a retry policy this outcome
	// is of (the answer's attempt); required for such a call, so that a
	// repeated outcome of an earlier attempt is never taken for a later
	// one's.
	Attempt uint32 `json:"attempt"`
	// Next is the attempt's next call (number call + 1), made once the
	// outcome is certified: one round trip for both (the answer's next).
	Next *callRequest `json:"next"`
	// Commit commits the attempt once the outcome is certified (the
	// answer's commit): the last action's outcome and the atom's commit in
	// one round trip.
	Commit *commitRequest `json:"commit"`
}

// resolveRequest is the body of POST .../calls/{call}/resolve: what the
// client found when it asked the downstream about an in-doubt call.
// Exactly one of a result (the effect happened: result or result_base64)
// and failed (it did not: the reason). With failed, retry asks to execute
// the action again at once, under the in-doubt key.
type resolveRequest struct {
	Result       *string `json:"result"`
	ResultBase64 *string `json:"result_base64"`
	Failed       *string `json:"failed"`
	Retry        bool    `json:"retry"`
}

// commitRequest is the body of POST .../commit.
type commitRequest struct {
	Delta []json.RawMessage `json:"delta"`
}

// failRequest is the body of POST .../fail.
type failRequest struct {
	Reason string `json:"reason"`
}

// endRequest is the body of POST /v1/runs/{run}/end (engine Run.End).
type endRequest struct {
	// Status is how the run ended: completed, failed or cancelled.
	Status string `json:"status"`
	// Result is the run's outcome, for whoever lists it (optional; at most
	// engine.MaxEndResult bytes).
	Result       *string `json:"result"`
	ResultBase64 *string `json:"result_base64"`
}

var endStatuses = map[string]engine.Status{
	"completed": engine.StatusCompleted, "failed": engine.StatusFailed, "cancelled": engine.StatusCancelled,
}

// forkRequest is the body of POST /v1/runs/{run}/fork (engine DB.Fork):
// a new run ID that starts from the run's state at seq At.
type forkRequest struct {
	// At is the source run's committed seq the fork starts from: 0 (its
	// beginning) to its last_seq. Required.
	At *uint64 `json:"at"`
	// ID is the new run's id, which must name no run yet.
	ID string `json:"id"`
}

// eraseRequest is the body of POST /v1/runs/{run}/erase (engine DB.Erase)
// and of POST /v1/runs/{run}/memory/{key}/erase (engine DB.EraseKey).
type eraseRequest struct {
	// Reason is recorded in the erase record (at most
	// engine.MaxDeleteReason bytes; "" records "erased by request").
	Reason string `json:"reason"`
}

// deletedRunJSON is a deleted run as its delete or erase record says
// (engine.DeletedRun).
type deletedRunJSON struct {
	ID     string    `json:"id"`
	Seq    uint64    `json:"seq"`   // the deletion's link: the end's seq + 1
	Final  string    `json:"final"` // the run's head at its end
	Head   string    `json:"head"`  // the deletion's link
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
	// Erasure is the run's erasure (null if it was only deleted): by the
	// same record as the deletion (the same seq), or after it.
	Erasure *erasureJSON `json:"erasure"`
}

// erasureJSON is the erasure of a deleted run (engine.Erasure).
type erasureJSON struct {
	Seq    uint64    `json:"seq"`
	Head   string    `json:"head"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

func deletedRunToJSON(d engine.DeletedRun) deletedRunJSON {
	out := deletedRunJSON{ID: d.ID, Seq: d.Seq, Final: hexHash(d.Final), Head: hexHash(d.Head), At: d.At.UTC(), Reason: d.Reason}
	if e := d.Erasure; e != nil {
		out.Erasure = &erasureJSON{Seq: e.Seq, Head: hexHash(e.Head), At: e.At.UTC(), Reason: e.Reason}
	}
	return out
}

// erasedKeyJSON is the erasure of one memory key of a run
// (engine.ErasedKey).
type erasedKeyJSON struct {
	Run    string    `json:"run"`
	Key    string    `json:"key"`
	Seq    uint64    `json:"seq"`  // the run's last seq when the key was erased
	Head   string    `json:"head"` // the erasure's link (beside the run's chain, from its head at seq)
	KeyNos []uint64  `json:"key_nos"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

func erasedKeyToJSON(e engine.ErasedKey) erasedKeyJSON {
	nos := e.KeyNos
	if nos == nil {
		nos = []uint64{}
	}
	return erasedKeyJSON{Run: e.Run, Key: e.Key, Seq: e.Seq, Head: hexHash(e.Head), KeyNos: nos, At: e.At.UTC(), Reason: e.Reason}
}

// verifyRequest is the body of POST /v1/verify.
type verifyRequest struct {
	Deep bool `json:"deep"`
	// PublicKey is the text of a public key file (continuumctl keygen's
	// FILE.pub): signatures are then checked and required.
	PublicKey    string `json:"public_key"`
	UnsignedTail uint64 `json:"unsigned_tail"`
}

// decodeJSON decodes body, one JSON object, into v: unknown fields,
// trailing data and wrong types are refused with an error naming the
// field. An empty body decodes as {}.
func decodeJSON(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if aerr := checkUTF8(body); aerr != nil {
		return aerr
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, "")
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("", "the body holds more than one JSON value (trailing data after byte %d)", dec.InputOffset())
	}
	return nil
}

// checkUTF8 refuses a body that is not UTF-8 (JSON's encoding, RFC 8259),
// naming the field whose string holds the first invalid byte. Bytes that
// are not text travel as NAME_base64; encoding/json would otherwise
// replace invalid bytes by U+FFFD without a word, so that a tool name, a
// memory key or a reason would be stored other than it was sent. It does
// the same with an escaped lone surrogate (a \uD800-\uDFFF escape that is
// not half of a pair): no character, which encoding/json also replaces by
// U+FFFD.
func checkUTF8(body []byte) *apiError {
	if utf8.Valid(body) {
		off := loneSurrogate(body)
		if off < 0 {
			return nil
		}
		field := fieldAt(body, int64(off))
		at := ""
		if field != "" {
			at = " (in " + field + ")"
		}
		return badRequest(field, "the body escapes a lone surrogate at byte %d%s (%.6s): it is no character; send bytes that are not text as NAME_base64", off, at, body[off:])
	}
	off := 0
	for off < len(body) {
		r, n := utf8.DecodeRune(body[off:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		off += n
	}
	field := fieldAt(body, int64(off))
	at := ""
	if field != "" {
		at = " (in " + field + ")"
	}
	return badRequest(field, "the body is not UTF-8 at byte %d%s: JSON is UTF-8; send bytes that are not text as NAME_base64", off, at)
}

// loneSurrogate returns the offset of body's first \u escape of a UTF-16
// surrogate that is not half of a pair (a high one, \uD800-\uDBFF,
// escaped right before a low one, \uDC00-\uDFFF), or -1. It reads every
// backslash as the start of an escape, as in a JSON string (the only
// place one may be); a body that is not JSON is left to the decoder.
func loneSurrogate(body []byte) int {
	hex4 := func(i int) rune {
		if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
			return -1
		}
		var n rune
		for _, c := range body[i+2 : i+6] {
			switch {
			case '0' <= c && c <= '9':
				n = n<<4 | rune(c-'0')
			case 'a' <= c|0x20 && c|0x20 <= 'f':
				n = n<<4 | rune(c|0x20-'a'+10)
			default:
				return -1
			}
		}
		return n
	}
	for i := 0; i < len(body); {
		j := bytes.IndexByte(body[i:], '\\')
		if j < 0 {
			return -1
		}
		i += j
		r := hex4(i)
		switch {
		case r < 0: // another escape (or not JSON)
			i += 2
			continue
		case r >= 0xd800 && r < 0xdc00:
			if lo := hex4(i + 6); lo >= 0xdc00 && lo < 0xe000 {
				i += 12
				continue
			}
			return i
		case r >= 0xdc00 && r < 0xe000:
			return i
		}
		i += 6
	}
	return -1
}

// Bounds of fieldAt's path: deeper than fieldDepth levels it ends in
// "..." (a body of a million "[" would otherwise be walked token by token
// into a path of megabytes, in an error answer), and each key is cut to
// fieldKey bytes.
const (
	fieldDepth = 32
	fieldKey   = 64
)

// fieldAt returns the path of the JSON value of body that holds byte off
// ("delta[2].key", "tool"), as far as the JSON before it is well formed;
// within fieldDepth levels (a deeper one ends the path in "...") and with
// keys of at most fieldKey bytes.
func fieldAt(body []byte, off int64) string {
	type level struct {
		array bool
		index int
		key   string
		inKey bool // an object whose next string is a key
	}
	var stack []level
	path := func() string {
		var b strings.Builder
		for _, l := range stack {
			switch {
			case l.array:
				fmt.Fprintf(&b, "[%d]", l.index)
			case l.key != "":
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				if len(l.key) > fieldKey {
					b.WriteString(strings.ToValidUTF8(l.key[:fieldKey], ""))
					b.WriteString("...")
				} else {
					b.WriteString(l.key)
				}
			}
		}
		return b.String()
	}
	// valueDone moves the innermost container past one value.
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		l := &stack[len(stack)-1]
		if l.array {
			l.index++
		} else {
			l.inKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return path()
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) == fieldDepth {
					return path() + "..."
				}
				stack = append(stack, level{array: t == '[', inKey: t == '{'})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
			continue
		case string:
			if len(stack) > 0 && !stack[len(stack)-1].array && stack[len(stack)-1].inKey {
				stack[len(stack)-1].key, stack[len(stack)-1].inKey = t, false
				if dec.InputOffset() > off {
					return path()
				}
				continue
			}
		}
		if dec.InputOffset() > off {
			return path()
		}
		valueDone()
	}
}

// jsonError turns an error of encoding/json into an answer that names the
// field (prefix is the path of the value decoded, "delta[2]" say).
func jsonError(err error, prefix string) *apiError {
	join := func(f string) string {
		switch {
		case prefix == "":
			return f
		case f == "":
			return prefix
		}
		return prefix + "." + f
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return badRequest(prefix, "malformed JSON at byte %d: %v", se.Offset, err)
	case errors.As(err, &te):
		f := join(te.Field)
		if f == "" {
			return badRequest("", "the body must be a JSON object, not a JSON %s", te.Value)
		}
		return badRequest(f, "%s must be %s, not %s", f, jsonWant(te.Type), te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return badRequest(prefix, "the JSON ends before its value is complete")
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return badRequest(join(name), "unknown field %q", join(name))
	}
	return badRequest(prefix, "%s", strings.TrimPrefix(msg, "json: "))
}

// jsonWant says in JSON's words what a Go type takes.
func jsonWant(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("an integer from %d to %d", -(int64(1) << (t.Bits() - 1)), int64(1)<<(t.Bits()-1)-1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("an integer from 0 to %d", uint64(1)<<t.Bits()-1)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a " + t.String()
}

// pickBytes returns the bytes a request gives as NAME (UTF-8 text) or
// NAME_base64. Both set is an error; neither gives ok false.
func pickBytes(name string, text, b64 *string) (b []byte, ok bool, aerr *apiError) {
	switch {
	case text != nil && b64 != nil:
		return nil, false, badRequest(name, "give %s or %s_base64, not both", name, name)
	case text != nil:
		return []byte(*text), true, nil
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, false, badRequest(name+"_base64", "%s_base64 is not standard base64: %v", name, err)
		}
		return b, true, nil
	}
	return nil, false, nil
}

// putBytes sets NAME or NAME_base64 of o to b, whichever represents it.
func putBytes(o map[string]any, name string, b []byte) {
	if utf8.Valid(b) {
		o[name] = string(b)
	} else {
		o[name+"_base64"] = base64.StdEncoding.EncodeToString(b)
	}
}

// putText is putBytes for a Go string (which the engine may hold in any
// bytes, when a Go agent wrote it).
func putText(o map[string]any, name, s string) {
	if utf8.ValidString(s) {
		o[name] = s
	} else {
		o[name+"_base64"] = base64.StdEncoding.EncodeToString([]byte(s))
	}
}

// action returns the ledger action of a call request, with the field its
// problems concern.
func (r *callRequest) action() (ledger.Action, *apiError) {
	if r.Tool == "" {
		return ledger.Action{}, badRequest("tool", "tool is required (the name of the tool the action calls)")
	}
	act := ledger.Action{Tool: r.Tool, Key: r.Key, Idempotent: r.Idempotent, Redact: r.Redact, RedactResult: r.RedactResult}
	if len(r.Args) > 0 {
		act.Args = []byte(r.Args)
	}
	if c := r.Compensate; c != nil {
		if c.Tool == "" {
			return ledger.Action{}, badRequest("compensate.tool", "a compensation's tool is required (the tool that undoes the action)")
		}
		act.Compensate = &ledger.Action{Tool: c.Tool, Key: c.Key, Idempotent: c.Idempotent, Redact: c.Redact}
		if len(c.Args) > 0 {
			act.Compensate.Args = []byte(c.Args)
		}
	}
	if p := r.Retry; p != nil {
		if p.InitialMs < 0 || p.MaxMs < 0 || p.DeadlineMs < 0 {
			return ledger.Action{}, badRequest("retry", "retry durations must not be negative")
		}
		act.Retry = p.policy()
		if _, err := ledger.NewIntent(ledger.Action{Tool: "t", Key: "k", Retry: act.Retry}, "r", 1, 0); err != nil {
			return ledger.Action{}, badRequest("retry", "%v", err)
		}
	}
	return act, nil
}

// same reports whether two requests of one call number ask for the same
// action, and if not, the first field that differs.
func (r *callRequest) same(o *callRequest) (string, bool) {
	switch {
	case r.Tool != o.Tool:
		return "tool", false
	case r.Key != o.Key:
		return "key", false
	case r.Idempotent != o.Idempotent:
		return "idempotent", false
	case !equalStrings(r.Redact, o.Redact):
		return "redact", false
	case !equalStrings(r.RedactResult, o.RedactResult):
		return "redact_result", false
	case (r.Retry == nil) != (o.Retry == nil) || (r.Retry != nil && *r.Retry != *o.Retry):
		return "retry", false
	case (r.Compensate == nil) != (o.Compensate == nil):
		return "compensate", false
	case r.Compensate != nil && (r.Compensate.Tool != o.Compensate.Tool || r.Compensate.Key != o.Compensate.Key ||
		r.Compensate.Idempotent != o.Compensate.Idempotent || !equalStrings(r.Compensate.Redact, o.Compensate.Redact) ||
		!bytes.Equal(compactJSON(r.Compensate.Args), compactJSON(o.Compensate.Args))):
		return "compensate", false
	}
	a, errA := ledger.CanonicalArgs(r.Args, r.Redact)
	b, errB := ledger.CanonicalArgs(o.Args, o.Redact)
	if errA != nil || errB != nil {
		a, b = compactJSON(r.Args), compactJSON(o.Args)
	}
	if !bytes.Equal(a, b) {
		return "args", false
	}
	return "", true
}

func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// runJSON is a run as the protocol describes it (engine.RunInfo).
type runJSON struct {
	ID            string     `json:"id"`
	Created       time.Time  `json:"created"`
	LastSeq       uint64     `json:"last_seq"`
	Head          string     `json:"head"`
	SnapshotSeq   uint64     `json:"snapshot_seq"`
	CheckpointSeq uint64     `json:"checkpoint_seq"`
	Running       uint64     `json:"running"`
	Interrupted   uint64     `json:"interrupted"`
	Lease         *leaseJSON `json:"lease"`
	// Status is active, completed, failed or cancelled; Ended and Result
	// say when and with what it ended (null and absent while active).
	Status       string     `json:"status"`
	Ended        *time.Time `json:"ended"`
	Result       *string    `json:"result,omitempty"`
	ResultBase64 *string    `json:"result_base64,omitempty"`
	// Parent and ForkedAt: the run this one was forked from and the seq it
	// starts from ("" and 0: not a fork).
	Parent   string `json:"parent"`
	ForkedAt uint64 `json:"forked_at"`
}

// leaseJSON says which seq the attempt holding a run works on and until
// when its lease runs. The attempt's id is not shown: it is its holder's
// capability.
type leaseJSON struct {
	Seq     uint64    `json:"seq"`
	Expires time.Time `json:"expires"`
}

func runInfoJSON(info engine.RunInfo, lease *leaseJSON) runJSON {
	r := runJSON{
		ID: info.ID, Created: info.Created.UTC(), LastSeq: info.LastSeq, Head: hexHash(info.Head),
		SnapshotSeq: info.SnapshotSeq, CheckpointSeq: info.CheckpointSeq,
		Running: info.Running, Interrupted: info.Interrupted, Lease: lease,
		Status: info.Status.String(), Parent: info.Parent, ForkedAt: info.ForkedAt,
	}
	if info.Status != engine.StatusActive {
		ended := info.Ended.UTC()
		r.Ended = &ended
		if info.Result != nil {
			r.Result, r.ResultBase64 = textOrBase64(info.Result)
		}
	}
	return r
}

func hexHash(h chain.Hash) string { return hex.EncodeToString(h[:]) }

// actionStateJSON is one action of an interrupted atom.
type actionStateJSON struct {
	// Call is the call number of the action in the attempt that was
	// abandoned; absent after a server restart (the engine's record has
	// the default-key index, not the call number).
	Call        *int   `json:"call,omitempty"`
	Index       uint32 `json:"index"`
	Fingerprint string `json:"fingerprint"`
	Status      string `json:"status"`
	Tool        string `json:"tool"`
	Key         string `json:"key"`
	Idempotent  bool   `json:"idempotent"`
}

// interruptedJSON describes the attempt of a seq that ended neither
// committed nor failed by its client.
type interruptedJSON struct {
	Seq uint64 `json:"seq"`
	// Reason: "restart" (the server stopped while the atom ran: a crash or
	// a shutdown), "lease_expired" or "takeover".
	Reason  string            `json:"reason"`
	Actions []actionStateJSON `json:"actions"`
}

// beginResponse answers POST /v1/runs/{run}/attempts.
type beginResponse struct {
	Attempt      string           `json:"attempt"`
	Run          string           `json:"run"`
	Seq          uint64           `json:"seq"`
	LeaseMS      int64            `json:"lease_ms"`
	LeaseExpires time.Time        `json:"lease_expires"`
	Interrupted  *interruptedJSON `json:"interrupted"`
	// Call answers the begin's call (beginRequest.Call).
	Call *callResponse `json:"call,omitempty"`
	// Commit answers the begin's commit (beginRequest.Commit).
	Commit *commitResponse `json:"commit,omitempty"`
	// Branch and Base: a branch's name and the seq whose state it reads
	// (POST .../branches; its seq is 0 until it commits).
	Branch string  `json:"branch,omitempty"`
	Base   *uint64 `json:"base,omitempty"`
}

// callResponse answers a call, its outcome and its resolution.
type callResponse struct {
	Call int `json:"call"`
	// Status: "execute" (run the tool with key, then report its outcome),
	// "done" (result certified), "failed" (certified as not having taken
	// effect: error), "in_doubt" (an earlier execution's outcome is
	// unknown: ask the downstream with key, then resolve), "pending" (the
	// server is still recording: repeat the request).
	Status       string  `json:"status"`
	Tool         string  `json:"tool"`
	Key          string  `json:"key"`
	Index        uint32  `json:"index"`
	Fingerprint  string  `json:"fingerprint"`
	Result       *string `json:"result,omitempty"`
	ResultBase64 *string `json:"result_base64,omitempty"`
	Error        string  `json:"error,omitempty"`
	// Replayed: the result comes from a certificate made before this call
	// (an earlier attempt, another run of the same action): nothing was
	// executed for it now.
	Replayed bool `json:"replayed,omitempty"`
	// Resolved: the result was recorded by a resolution, not an outcome.
	Resolved bool `json:"resolved,omitempty"`
	// Attempt, for a call with a retry policy, is the attempt to execute
	// (with execute; its outcome names it) or the last one made.
	Attempt uint32 `json:"attempt,omitempty"`
	// GaveUp, with failed, says why the call's retry policy gave the
	// action up: "attempts exhausted", "deadline passed" or "permanent
	// error".
	GaveUp string `json:"gave_up,omitempty"`
	// Next answers the outcome's next call (outcomeRequest.Next).
	Next *callResponse `json:"next,omitempty"`
	// Commit answers the outcome's commit (outcomeRequest.Commit).
	Commit *commitResponse `json:"commit,omitempty"`
}

func (c *callResponse) setResult(b []byte) { c.Result, c.ResultBase64 = textOrBase64(b) }

// textOrBase64 is b as the pointer fields NAME and NAME_base64 of an
// answer carry it: text if it is UTF-8, else base64 (the other nil).
func textOrBase64(b []byte) (text, b64 *string) {
	s := string(b)
	if !utf8.Valid(b) {
		s = base64.StdEncoding.EncodeToString(b)
		return nil, &s
	}
	return &s, nil
}

// commitResponse answers a commit.
type commitResponse struct {
	Run  string `json:"run"`
	Seq  uint64 `json:"seq"`
	Head string `json:"head"`
}

// failResponse answers a fail.
type failResponse struct {
	Run    string `json:"run"`
	Seq    uint64 `json:"seq"`
	Reason string `json:"reason"`
}

// attemptJSON answers GET .../attempts/{attempt} and heartbeats.
type attemptJSON struct {
	Attempt      string         `json:"attempt"`
	Run          string         `json:"run"`
	Seq          uint64         `json:"seq"`
	State        string         `json:"state"` // open, committed, failed, abandoned
	Reason       string         `json:"reason,omitempty"`
	LeaseMS      int64          `json:"lease_ms"`
	LeaseExpires time.Time      `json:"lease_expires"`
	Head         string         `json:"head,omitempty"` // committed: the atom's head
	Calls        []callResponse `json:"calls"`
	// Branch and Base: a branch's name and the seq whose state it reads
	// (its seq is 0 until it commits).
	Branch string  `json:"branch,omitempty"`
	Base   *uint64 `json:"base,omitempty"`
}

func statusName(s ledger.Status) string {
	switch s {
	case ledger.StatusIntent:
		return "in_doubt"
	case ledger.StatusDone:
		return "done"
	case ledger.StatusFailed:
		return "failed"
	case ledger.StatusResolved:
		return "resolved"
	}
	return "none"
}

// atomJSON is a committed atom (GET /v1/runs/{run}/atoms/{seq}).
func atomJSON(info *engine.AtomInfo) map[string]any {
	ops := offline.NewExportedOps(info) // sealed memory values opened, erased ones marked
	acts := make([]map[string]any, 0, len(info.Actions))
	for _, a := range info.Actions {
		m := map[string]any{
			"fingerprint": a.Fingerprint.String(), "index": a.Index, "idempotent": a.Idempotent,
			"status": statusName(a.Status),
		}
		putText(m, "tool", a.Tool)
		putText(m, "key", a.Key)
		if json.Valid(a.Args) {
			m["args"] = json.RawMessage(a.Args)
		}
		if a.Status == ledger.StatusDone || a.Status == ledger.StatusResolved {
			putBytes(m, "result", a.Result)
		}
		if a.Err != "" {
			putText(m, "error", a.Err)
		}
		acts = append(acts, m)
	}
	if ops == nil {
		ops = []offline.ExportedOp{}
	}
	return map[string]any{"run": info.Run, "seq": info.Seq, "head": hexHash(info.Head), "delta": ops, "actions": acts}
}
