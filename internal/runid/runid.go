// Package runid is the rule for run ids, defined once for every layer that
// stores them (the engine's log records and CHECKPOINT, the snapshot
// store's keys): a run id is 1 to MaxLen bytes of valid UTF-8 without
// control characters (U+0000 to U+001F, U+007F). Such an id prints as it
// is in logs, reports and the command line, and fits every length field
// that stores it.
//
// A layer checks the ids it is given with Check and reports a failure with
// its own prefix and sentinel; a decoder that reads an id Check refuses
// reports corruption, since no writer stores one.
package runid

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxLen bounds a run id, in bytes. It is part of the stored formats:
// decoders refuse a longer id as corrupt, so it may grow, never shrink.
const MaxLen = 256

// ErrInvalid is matched (errors.Is) by every error of Check.
var ErrInvalid = errors.New("invalid run id")

// Error says why an id cannot name a run. It matches ErrInvalid. Its text,
// "invalid run id: " and Reason, carries no package prefix: the caller's
// package adds its own.
type Error struct {
	ID string
	// Reason is why: "empty", "300 bytes, at most 256", `"\xff" is not
	// valid UTF-8`, `"a\nb" has a control character at byte 1`.
	Reason string
}

func (e *Error) Error() string { return "invalid run id: " + e.Reason }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Check reports why id cannot name a run (an *Error), or nil.
func Check(id string) error {
	switch {
	case id == "":
		return &Error{ID: id, Reason: "empty"}
	case len(id) > MaxLen:
		return &Error{ID: id, Reason: fmt.Sprintf("%d bytes, at most %d", len(id), MaxLen)}
	}
	ascii := true
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c >= 0x7f {
			ascii = false
			break
		}
	}
	if ascii { // the common case: printable ASCII
		return nil
	}
	if !utf8.ValidString(id) {
		return &Error{ID: id, Reason: fmt.Sprintf("%q is not valid UTF-8", id)}
	}
	for i, r := range id {
		if r < 0x20 || r == 0x7f {
			return &Error{ID: id, Reason: fmt.Sprintf("%q has a control character at byte %d", id, i)}
		}
	}
	return nil
}
