package snapshot

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleLogger routes Pebble's log lines to slog: its informational chatter
// at Debug (so a default logger stays quiet), its errors at Error.
type pebbleLogger struct {
	l *slog.Logger
	// quiet reports whether the store has failed: its first failure is
	// logged once by the store, and what Pebble says after it goes to Debug.
	quiet func() bool
}

var _ pebble.Logger = pebbleLogger{}

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l.Enabled(context.Background(), slog.LevelDebug) {
		p.l.Debug(pebbleMsg(format, args))
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	if p.quiet != nil && p.quiet() {
		p.l.Debug(pebbleMsg(format, args))
		return
	}
	p.l.Error(pebbleMsg(format, args))
}

// pebbleMsg formats a Pebble log line, prefixed "pebble: " once.
func pebbleMsg(format string, args []any) string {
	msg := fmt.Sprintf(format, args...)
	if !strings.HasPrefix(msg, "pebble: ") {
		msg = "pebble: " + msg
	}
	return msg
}

// Fatalf is called by Pebble on a state it cannot continue from (its default
// logger exits the process), such as a failed WAL write or sync in a commit.
// It must not return: Pebble would carry on as if the operation had
// succeeded. It logs and panics with a *fatalError, which Store.apply
// recovers on the committing goroutine and turns into a sticky ErrFailed;
// see the package's Caveats for Pebble's own goroutines.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := pebbleMsg(format, args)
	p.l.Error(msg)
	panic(&fatalError{msg: msg})
}

// fatalError is the panic value of pebbleLogger.Fatalf.
type fatalError struct{ msg string }

func (e *fatalError) Error() string { return e.msg }
