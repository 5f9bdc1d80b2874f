package erasure

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/record"
)

// TestOpenResult: a run's sealed end result opens under its key, reads as
// none without a word once the key is erased, and as none with a warning
// when it does not open otherwise; a plaintext store's is returned as is.
func TestOpenResult(t *testing.T) {
	var logged bytes.Buffer
	quietly := func(e *Eraser) *Eraser {
		e.cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
		return e
	}
	plainStore := quietly(newEraser(newStore(t, false)))
	if got := plainStore.OpenResult("r", 5, []byte("done")); string(got) != "done" {
		t.Fatalf("a plaintext store's result: %q", got)
	}

	s := newStore(t, true)
	e := quietly(newEraser(s))
	if err := s.Add("r"); err != nil {
		t.Fatal(err)
	}
	sealed, err := s.sealer.Seal(nil, []byte("done"), record.KindEnd, "r", 5)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.OpenResult("r", 5, sealed); string(got) != "done" || logged.Len() != 0 {
		t.Fatalf("the run's result: %q, logged %q", got, logged.String())
	}
	// Sealed for another seq (or run): damage, served as none, and said.
	if got := e.OpenResult("r", 6, sealed); got != nil || !strings.Contains(logged.String(), "does not open") {
		t.Fatalf("a result of another seq: %q, logged %q", got, logged.String())
	}
	logged.Reset()
	if err := e.Mark("r", true); err != nil {
		t.Fatal(err)
	}
	if err := e.DropRun("r"); err != nil {
		t.Fatal(err)
	}
	if got := e.OpenResult("r", 5, sealed); got != nil || logged.Len() != 0 {
		t.Fatalf("an erased run's result: %q, logged %q", got, logged.String())
	}
}
