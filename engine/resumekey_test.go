package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/ledger"
)

// TestResumedCallDiffers: after a crash left email.send (call 0) in doubt,
// the resumed atom's sms.send at index 0 is refused with an
// ActionChangedError naming run, seq, index and both tools, rather than
// taking email.send's key; Commit is not reached with the old call
// unsettled. Once email.send is abandoned (ResolveInDoubtFailed), sms.send
// runs with a key no earlier call used, and the call after it keeps index
// 1's default key. A second crash before sms.send's certificate derives
// the same key again: sms.send is then in doubt, not run twice.
func TestResumedCallDiffers(t *testing.T) {
	email := ledger.Action{Tool: "email.send", Args: []byte(`{"to":"a@example.com"}`)}
	sms := ledger.Action{Tool: "sms.send", Args: []byte(`{"to":"+100"}`)}
	crashed, _ := crashInFlight(t, email) // call 0 in doubt
	key0 := ledger.DefaultKey("r", 1, 0)

	db2 := openTest(t, crashed, testOptions(crashed))
	run2, _ := db2.Run(ctx, "r")
	a2, _ := run2.Begin(ctx)
	if !a2.Interrupted() || a2.Seq() != 1 {
		t.Fatalf("resumed atom: interrupted %v seq %d", a2.Interrupted(), a2.Seq())
	}
	ran := 0
	_, err := a2.Do(ctx, sms, func(context.Context, string) ([]byte, error) { ran++; return []byte("sms sent"), nil })
	var ce *ActionChangedError
	if !errors.As(err, &ce) || !errors.Is(err, ErrActionChanged) {
		t.Fatalf("Do of sms.send where email.send is in doubt: %v, want an ActionChangedError", err)
	}
	if ran != 0 || ce.Run != "r" || ce.Seq != 1 || ce.Index != 0 || ce.OldTool != "email.send" || ce.NewTool != "sms.send" ||
		ce.InDoubt == nil || ce.InDoubt.Key != key0 {
		t.Fatalf("ActionChangedError %+v (exec ran %d times)", ce, ran)
	}
	for _, w := range []string{`"r"`, "seq 1", "call 0", "email.send", "sms.send", key0} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %s", err, w)
		}
	}
	// Abandon the old call explicitly: the new one runs, with a new key.
	if err := a2.ResolveInDoubtFailed(ctx, ce.InDoubt, "the agent sent an SMS instead"); err != nil {
		t.Fatal(err)
	}
	var smsKey string
	var crashed2 *vfs.MemFS
	if _, err := a2.Do(ctx, sms, func(ctx context.Context, key string) ([]byte, error) {
		smsKey = key
		crashed2 = crashed.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		return []byte("sms sent"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if smsKey == "" || smsKey == key0 {
		t.Fatalf("sms.send ran with key %q, which email.send used", smsKey)
	}
	var key1 string
	if _, err := a2.Do(ctx, ledger.Action{Tool: "log.write", Args: []byte(`{}`)}, func(ctx context.Context, key string) ([]byte, error) {
		key1 = key
		return []byte("ok"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := ledger.DefaultKey("r", 1, 1); key1 != want {
		t.Errorf("the call after the replaced one: key %q, want index 1's %q", key1, want)
	}
	if err := a2.Commit(ctx, msg("sms instead")); err != nil {
		t.Fatal(err)
	}
	db2.Close()

	// Crashed after sms.send dispatched: the resumed atom's sms.send at
	// index 0 derives the same key and is in doubt, not run again.
	db3 := openTest(t, crashed2, testOptions(crashed2))
	run3, _ := db3.Run(ctx, "r")
	a3, _ := run3.Begin(ctx)
	_, err = a3.Do(ctx, sms, func(context.Context, string) ([]byte, error) {
		t.Error("sms.send ran twice")
		return nil, nil
	})
	var ie *ledger.InDoubtError
	if !errors.As(err, &ie) || ie.Key != smsKey {
		t.Fatalf("sms.send after a second crash: %v, want in doubt with key %q", err, smsKey)
	}
}

// TestResumedCallSettledOld: a resumed atom that calls the same
// action at the in-doubt index gets the in-doubt error (the old key), and a
// settled old call of another action lets the new one take a fresh key.
func TestResumedCallSettledOld(t *testing.T) {
	email := ledger.Action{Tool: "email.send", Args: []byte(`{"to":"a@example.com"}`)}
	sms := ledger.Action{Tool: "sms.send", Args: []byte(`{"to":"+100"}`)}
	crashed, _ := crashInFlight(t, email)
	db2 := openTest(t, crashed, testOptions(crashed))
	run2, _ := db2.Run(ctx, "r")
	a2, _ := run2.Begin(ctx)
	_, err := a2.Do(ctx, email, func(context.Context, string) ([]byte, error) { return nil, nil })
	var ie *ledger.InDoubtError
	if !errors.As(err, &ie) || ie.Key != ledger.DefaultKey("r", 1, 0) {
		t.Fatalf("Do of the same action: %v, want in doubt with index 0's key", err)
	}
	// Settled as happened (Resolve): the sms is another call at index 0.
	if err := a2.Resolve(ctx, email, []byte("delivered")); err != nil {
		t.Fatal(err)
	}
	var key string
	if _, err := a2.Do(ctx, sms, func(ctx context.Context, k string) ([]byte, error) { key = k; return []byte("ok"), nil }); err != nil {
		t.Fatal(err)
	}
	if key == ledger.DefaultKey("r", 1, 0) {
		t.Fatalf("sms.send got email.send's key %q", key)
	}
	if err := a2.Commit(ctx, msg("both")); err != nil {
		t.Fatal(err)
	}
}

// TestActionChangedErrorZero: a zero ActionChangedError (no InDoubt) has a
// text and matches ErrActionChanged, rather than panic.
func TestActionChangedErrorZero(t *testing.T) {
	var e ActionChangedError
	if e.Error() == "" || !errors.Is(&e, ErrActionChanged) {
		t.Fatalf("zero ActionChangedError: %q", e.Error())
	}
}

// TestFailedAttemptCallDiffers: an attempt that failed (Fail) after its
// email.send (call 0) was left in doubt protects that call as a crash
// does: the next attempt's sms.send at index 0 is refused with an
// ActionChangedError instead of running under email.send's key, in the
// same process, after an interrupted atom is failed, and after a crash
// that replays the Fail from the log; once email.send is abandoned,
// sms.send runs with a key of its own. The same action again is in doubt,
// never run twice.
func TestFailedAttemptCallDiffers(t *testing.T) {
	email := ledger.Action{Tool: "email.send", Args: []byte(`{"to":"a@example.com"}`)}
	sms := ledger.Action{Tool: "sms.send", Args: []byte(`{"to":"+100"}`)}
	key0 := ledger.DefaultKey("r", 1, 0)
	refused := func(t *testing.T, a *Atom) *ActionChangedError {
		t.Helper()
		_, err := a.Do(ctx, sms, func(_ context.Context, key string) ([]byte, error) {
			t.Errorf("sms.send ran under %q while email.send is in doubt", key)
			return nil, nil
		})
		var ce *ActionChangedError
		if !errors.As(err, &ce) || ce.OldTool != "email.send" || ce.InDoubt == nil || ce.InDoubt.Key != key0 {
			t.Fatalf("sms.send after a failed attempt left email.send in doubt: %v", err)
		}
		return ce
	}

	t.Run("same process", func(t *testing.T) {
		mem := vfs.NewMem()
		db := openTest(t, mem, testOptions(mem))
		run, _ := db.Run(ctx, "r")
		a, _ := run.Begin(ctx)
		_, err := a.Do(ctx, email, func(context.Context, string) ([]byte, error) {
			return nil, fmt.Errorf("%w: the process lost its answer", ledger.ErrUncertified)
		})
		if !errors.Is(err, ledger.ErrInDoubt) {
			t.Fatalf("email.send: %v, want in doubt", err)
		}
		if err := a.Fail(ctx, "gave up"); err != nil {
			t.Fatal(err)
		}
		b, _ := run.Begin(ctx)
		ce := refused(t, b)
		// The same action again is the same call: in doubt.
		if _, err := b.Do(ctx, email, func(context.Context, string) ([]byte, error) {
			t.Error("email.send ran twice")
			return nil, nil
		}); !errors.Is(err, ledger.ErrInDoubt) {
			t.Fatalf("email.send again: %v, want in doubt", err)
		}
		if err := b.ResolveInDoubtFailed(ctx, ce.InDoubt, "sent an SMS instead"); err != nil {
			t.Fatal(err)
		}
		var smsKey string
		if _, err := b.Do(ctx, sms, func(_ context.Context, key string) ([]byte, error) { smsKey = key; return []byte("ok"), nil }); err != nil {
			t.Fatal(err)
		}
		// Index 0 went to email.send's repeat: sms.send is index 1's call.
		if smsKey != ledger.DefaultKey("r", 1, 1) {
			t.Fatalf("sms.send ran under %q, want index 1's default key, not email.send's %q", smsKey, key0)
		}
		if err := b.Commit(ctx, msg("sms")); err != nil {
			t.Fatal(err)
		}
		// The next seq has no earlier attempt: its calls keep their keys.
		c, _ := run.Begin(ctx)
		var k string
		if _, err := c.Do(ctx, sms, func(_ context.Context, key string) ([]byte, error) { k = key; return []byte("ok"), nil }); err != nil || k != ledger.DefaultKey("r", 2, 0) {
			t.Fatalf("seq 2's call: key %q, %v", k, err)
		}
		db.Close()
	})

	t.Run("an interrupted atom failed", func(t *testing.T) {
		crashed, _ := crashInFlight(t, email)
		db := openTest(t, crashed, testOptions(crashed))
		run, _ := db.Run(ctx, "r")
		a, _ := run.Begin(ctx)
		if !a.Interrupted() {
			t.Fatal("the re-begun atom is not the interrupted one")
		}
		if err := a.Fail(ctx, "gave up"); err != nil {
			t.Fatal(err)
		}
		b, _ := run.Begin(ctx)
		if b.Interrupted() {
			t.Fatal("an atom after a Fail reports itself interrupted")
		}
		refused(t, b)
		// After a crash, the log's Fail record keeps the calls too.
		after := crashed.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		db.Close()
		db2 := openTest(t, after, testOptions(after))
		run2, _ := db2.Run(ctx, "r")
		c, _ := run2.Begin(ctx)
		refused(t, c)
		db2.Close()
	})
}
