package fence

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/continuumdb/continuum/ledger"
)

// TestPriorAndWaitLedger: an intent or a failure is prior; only an intent
// without a certificate waits for InDoubtAfter.
func TestPriorAndWaitLedger(t *testing.T) {
	l := ledger.New()
	in, err := ledger.NewIntent(ledger.Action{Tool: "charge", Args: []byte(`{}`)}, "run", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := &Fence{InDoubtAfter: time.Now().Add(time.Hour)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a wait returns at once, with ctx's error
	if Prior(l, in) || WaitLedger(ctx, f, in, l) != nil {
		t.Fatal("an unknown action is prior or waits")
	}
	l.ApplyIntent(in, ledger.Loc{Segment: 1, Offset: 1})
	if !Prior(l, in) {
		t.Fatal("an intent is not prior")
	}
	if err := WaitLedger(ctx, f, in, l); !errors.Is(err, ledger.ErrInDoubt) || !errors.Is(err, context.Canceled) {
		t.Fatalf("an intent's wait: %v", err)
	}
	if err := WaitLedger(ctx, &Fence{}, in, l); err != nil {
		t.Fatalf("no InDoubtAfter: %v", err)
	}
	cert := &ledger.Certificate{Fingerprint: in.Fingerprint, RunID: "run", Seq: 1, Status: ledger.StatusFailed, Err: "no"}
	l.ApplyCertificate(cert, ledger.Loc{Segment: 1, Offset: 2}, false)
	if !Prior(l, in) || WaitLedger(ctx, f, in, l) != nil {
		t.Fatal("a failure: prior, and no wait")
	}
	cert.Status, cert.Err = ledger.StatusDone, ""
	l.ApplyCertificate(cert, ledger.Loc{Segment: 1, Offset: 3}, false)
	if Prior(l, in) {
		t.Fatal("a done action is prior")
	}
}
