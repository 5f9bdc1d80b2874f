package journal

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// core is a Core over a real log in memory, without sealing.
type core struct {
	t       *testing.T
	log     *wal.Log
	comp    *frame.Compressor
	l       *ledger.Ledger
	wg      sync.WaitGroup
	mu      sync.Mutex
	failed  error
	samples int
}

func newCore(t *testing.T) *core {
	l, err := wal.Open("/wal", &wal.Options{FS: vfs.NewMem(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &core{t: t, log: l, comp: frame.NewCompressor(frame.NewDicts()), l: ledger.New()}
}

func (c *core) Encode(dst []byte, k record.Kind, body []byte) []byte {
	return record.AppendLedger(dst, k, body, c.comp, 0)
}
func (c *core) Sealer() *record.Sealer { return nil }
func (c *core) Sample([]byte)          { c.mu.Lock(); c.samples++; c.mu.Unlock() }
func (c *core) Append(ctx context.Context, rec []byte) (wal.Pos, error) {
	return c.log.Append(ctx, rec)
}
func (c *core) AppendAsync(rec []byte) *wal.Waiter { return c.log.AppendAsync(rec) }
func (c *core) Go(f func()) {
	c.wg.Add(1)
	go func() { defer c.wg.Done(); f() }()
}
func (c *core) Failed(err error)                     { c.mu.Lock(); c.failed = err; c.mu.Unlock() }
func (c *core) Appended(int)                         {}
func (c *core) ReadAt(pos wal.Pos) ([]byte, error)   { return c.log.ReadAt(pos) }
func (c *core) Decoder() *record.Decoder             { return &record.Decoder{Comp: c.comp, Ledger: true} }
func (c *core) File(seg uint64) string               { return wal.SegmentName(seg) }
func (c *core) Ledger() *ledger.Ledger               { return c.l }
func (c *core) WaitLedger(ctx context.Context) error { return nil }

var errTooLarge = errors.New("too large")

func intent(t *testing.T, key string, idempotent bool) *ledger.Intent {
	in, err := ledger.NewIntent(ledger.Action{Tool: "t", Args: []byte(`{"a":1}`), Key: key, Idempotent: idempotent}, "run", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestStrict: both records durable when the call returns, read back by
// position, and the certified result found from the log when the ledger
// holds only its location.
func TestStrict(t *testing.T) {
	ctx := context.Background()
	c := newCore(t)
	j := Journal{Core: c, Max: 1 << 20, ErrTooLarge: errTooLarge}
	in := intent(t, "k", false)
	res, err := c.l.Do(ctx, j, in, func(context.Context, string) ([]byte, error) { return []byte(`"out"`), nil })
	if err != nil || string(res) != `"out"` {
		t.Fatalf("Do = %q, %v", res, err)
	}
	e, ok := c.l.Lookup(in.Fingerprint)
	if !ok || e.Status != ledger.StatusDone || e.IntentLoc == (ledger.Loc{}) || e.CertLoc == (ledger.Loc{}) {
		t.Fatalf("entry %+v, want done with both locations", e)
	}
	got, err := ReadIntent(c, e.IntentLoc)
	if err != nil || got.Fingerprint != in.Fingerprint {
		t.Fatalf("ReadIntent = %+v, %v", got, err)
	}
	cert, err := ReadCertificate(c, e.CertLoc)
	if err != nil || string(cert.Result) != `"out"` {
		t.Fatalf("ReadCertificate = %+v, %v", cert, err)
	}
	// A kind other than the one the index names is corruption.
	if _, err := ReadIntent(c, e.CertLoc); !errors.Is(err, record.ErrCorrupt) || !strings.Contains(err.Error(), "not the intent") {
		t.Fatalf("ReadIntent of a certificate: %v, want corruption", err)
	}
	// Action reads back what the ledger locates; an unknown action is none.
	if e2, i2, c2, err := Action(c, in.Fingerprint); err != nil || e2.Status != ledger.StatusDone ||
		i2 == nil || i2.Fingerprint != in.Fingerprint || c2 == nil || string(c2.Result) != `"out"` {
		t.Fatalf("Action = %+v, %+v, %+v, %v", e2, i2, c2, err)
	}
	if e2, i2, c2, err := Action(c, intent(t, "unknown", false).Fingerprint); err != nil || e2.Status != ledger.StatusNone || e2.IntentLoc != (ledger.Loc{}) || i2 != nil || c2 != nil {
		t.Fatalf("Action of an unknown action = %+v, %+v, %+v, %v", e2, i2, c2, err)
	}
	// A ledger that holds the location only reads the result from the log.
	c.l = ledger.New()
	c.l.ApplyCertificate(cert, e.CertLoc, false)
	if r, err := CertifiedResult(c, in.Fingerprint); err != nil || string(r) != `"out"` {
		t.Fatalf("CertifiedResult = %q, %v", r, err)
	}
	// A location whose certificate certifies another action is corruption.
	other := intent(t, "other", false)
	c.l.ApplyCertificate(&ledger.Certificate{Fingerprint: other.Fingerprint, RunID: "run", Seq: 1, Status: ledger.StatusDone}, e.CertLoc, false)
	if _, err := CertifiedResult(c, other.Fingerprint); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("CertifiedResult of a misplaced certificate: %v, want corruption", err)
	}
	if _, err := CertifiedResult(c, intent(t, "unknown", false).Fingerprint); !errors.Is(err, record.ErrNoCertificate) {
		t.Fatalf("CertifiedResult of an unknown action: %v, want ErrNoCertificate", err)
	}
	if c.samples != 2 {
		t.Fatalf("%d bodies sampled, want 2", c.samples)
	}
}

// TestRelaxed: an idempotent action's records are enqueued, the call
// returns before they are durable, and the certificate's location reaches
// the ledger only after the call landed.
func TestRelaxed(t *testing.T) {
	ctx := context.Background()
	c := newCore(t)
	landed := make(chan struct{})
	j := Journal{Core: c, Relaxed: true, Landed: landed, Max: 1 << 20, ErrTooLarge: errTooLarge}
	in := intent(t, "k", true)
	if _, err := c.l.Do(ctx, j, in, func(context.Context, string) ([]byte, error) { return []byte(`1`), nil }); err != nil {
		t.Fatal(err)
	}
	close(landed)
	c.wg.Wait()
	e, ok := c.l.Lookup(in.Fingerprint)
	if !ok || e.Status != ledger.StatusDone || e.CertLoc == (ledger.Loc{}) {
		t.Fatalf("entry %+v, want done with the certificate's location", e)
	}
	if cert, err := ReadCertificate(c, e.CertLoc); err != nil || string(cert.Result) != `1` {
		t.Fatalf("ReadCertificate = %+v, %v", cert, err)
	}
	// An action with a retry policy has its intent durable in relaxed mode
	// too: the write returns its location.
	r := intent(t, "r", true)
	r.Retry = &ledger.RetryPolicy{MaxAttempts: 2}
	loc, err := j.WriteIntent(ctx, r)
	if err != nil || loc == (ledger.Loc{}) {
		t.Fatalf("WriteIntent with a retry policy = %v, %v; want a location", loc, err)
	}
}

// TestTooLarge: a body over Max is refused and nothing is written.
func TestTooLarge(t *testing.T) {
	c := newCore(t)
	j := Journal{Core: c, Max: 10, ErrTooLarge: errTooLarge}
	before := c.log.End()
	if _, err := j.WriteIntent(context.Background(), intent(t, "k", false)); !errors.Is(err, errTooLarge) || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("WriteIntent = %v, want errTooLarge", err)
	}
	if c.log.End() != before || c.samples != 0 {
		t.Fatal("a refused record reached the log or the sampler")
	}
}
