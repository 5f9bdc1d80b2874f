package agentloop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Sentinel errors; match them with errors.Is. The errors Drive returns
// wrap them with the run and seq they concern.
var (
	// ErrInvalidLoop is returned by Drive for a Loop that cannot run: no
	// Run or Model, a tool without Func, a tool named "" or ModelTool.
	ErrInvalidLoop = errors.New("agentloop: invalid loop")
	// ErrUnknownOutcome is what a ToolFunc returns (wrapped, or as it is)
	// when it cannot tell whether its call took effect: a timeout or a
	// connection that broke after the request was sent. The loop then
	// leaves the call in doubt, exactly as a crash at that moment would,
	// and settles it with Reconcile (see Tool).
	ErrUnknownOutcome = errors.New("agentloop: the tool cannot tell whether its call took effect")
	// ErrUnsettled is returned by Drive when a tool call is in doubt and
	// was not settled: there is no Reconcile, it kept failing, or the tool
	// kept reporting ErrUnknownOutcome. The run stays active; a later
	// Drive tries again.
	ErrUnsettled = errors.New("agentloop: a tool call is in doubt and could not be settled")
	// ErrBadResponse is returned by Drive when the model call's certificate
	// at a step is not a response this package wrote (the run was written
	// by another program, or with another version). The run stays active.
	ErrBadResponse = errors.New("agentloop: the certified model response cannot be read")
	// ErrConcurrentWriter is returned by Drive when another writer
	// committed an atom of the run while the loop was driving it.
	ErrConcurrentWriter = errors.New("agentloop: another writer changed the run")
)

// Transient marks err, returned by a ToolFunc, as a failure worth trying
// again rather than an answer for the model: the step fails and is
// retried (Loop.Retry), and the tool is called again with the same key.
// Only a tool whose call took no effect, or that is Idempotent, may
// return it. Transient(nil) is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err}
}

type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// stepError is a step's failure that another attempt may cure (a model
// error, a transient tool error, a failed reconcile). endable says
// whether running out of attempts may end the run as failed: not while a
// call is in doubt, which would leave it unsettled for good.
type stepError struct {
	err     error
	endable bool
}

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

func retryable(err error, endable bool) error { return &stepError{err: err, endable: endable} }

// unknownOutcome is the panic that leaves a tool call in doubt: the
// ledger keeps an action whose exec does not return in doubt (its intent
// durable, no certificate), as after a crash. The loop recovers it.
type unknownOutcome struct{ err error }

func validUTF8(s string) bool { return utf8.ValidString(s) }

// strictUnmarshal decodes exactly one JSON value into v, refusing unknown
// fields and trailing data.
func strictUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}
