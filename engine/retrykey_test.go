package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

// keyRecorder is an exec that records the keys it is called with and fails
// while fail says so.
type keyRecorder struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyRecorder) exec(fail bool, result string) ledger.Exec {
	return func(_ context.Context, key string) ([]byte, error) {
		k.mu.Lock()
		k.keys = append(k.keys, key)
		k.mu.Unlock()
		if fail {
			return nil, errThrottled
		}
		return []byte(result), nil
	}
}

func openRetryStore(t *testing.T, fs vfs.FS) *engine.DB {
	t.Helper()
	db, err := engine.Open("store", &engine.Options{FS: fs, NoSync: true, DictSamples: -1})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestRejectedDoTakesNoKey: a Do rejected before it writes an intent (no
// tool, args that are not JSON, a cancelled context) takes no default-key index: the next Do gets index 0.
func TestRejectedDoTakesNoKey(t *testing.T) {
	ctx := context.Background()
	db := openRetryStore(t, vfs.NewMem())
	defer db.Close()
	run, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	atom, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rec keyRecorder
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	rejected := []struct {
		ctx context.Context
		act ledger.Action
	}{
		{ctx, ledger.Action{Tool: "", Args: []byte(`{}`)}},
		{ctx, ledger.Action{Tool: "t", Args: []byte(`{not json`)}},
		{cancelled, ledger.Action{Tool: "t", Args: []byte(`{"a":1}`)}},
	}
	for i, c := range rejected {
		if _, err := atom.Do(c.ctx, c.act, rec.exec(false, "x")); err == nil {
			t.Fatalf("rejected Do %d (%+v) succeeded", i, c.act)
		}
	}
	if len(rec.keys) != 0 {
		t.Fatalf("exec called by rejected Do calls with keys %q", rec.keys)
	}
	if _, err := atom.Do(ctx, ledger.Action{Tool: "t", Args: []byte(`{"a":1}`)}, rec.exec(false, "x")); err != nil {
		t.Fatal(err)
	}
	if want := []string{ledger.DefaultKey("r", 1, 0)}; !slices.Equal(rec.keys, want) {
		t.Fatalf("first accepted Do called exec with keys %q, want %q", rec.keys, want)
	}
	// The atom is done after Commit: a Do on it is refused and moves no
	// key of the next atom, which numbers from 0 again.
	if err := atom.Commit(ctx, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: "done"})); err != nil {
		t.Fatal(err)
	}
	if _, err := atom.Do(ctx, ledger.Action{Tool: "t", Args: []byte(`{}`)}, rec.exec(false, "x")); !errors.Is(err, engine.ErrAtomDone) {
		t.Fatalf("Do on a committed atom: %v, want ErrAtomDone", err)
	}
}

// TestRetryOfFailedDoKeepsKey: retrying a Do whose exec failed, in the same
// atom (same tool, same sanitized args, default key), calls exec with the
// failed call's key; other actions between the failure and the retry, and
// after it, get the keys they would have had if the first try had worked.
// After a restart the committed atom's actions are certified under those
// keys.
func TestRetryOfFailedDoKeepsKey(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	db := openRetryStore(t, fs)
	run, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	atom, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) string { return ledger.DefaultKey("r", 1, i) }
	charge := ledger.Action{Tool: "charge", Args: []byte(`{"cents":1200, "card":"4242"}`), Redact: []string{"/card"}}
	// The same action as the Do sees it after sanitizing: other secret
	// value, other spacing.
	chargeAgain := ledger.Action{Tool: "charge", Args: []byte(`{"card":"5555","cents":1200}`), Redact: []string{"/card"}}
	mail := ledger.Action{Tool: "mail", Args: []byte(`{"to":"a"}`)}
	other := ledger.Action{Tool: "charge", Args: []byte(`{"cents":99,"card":"4242"}`), Redact: []string{"/card"}}

	var charges, mails, others keyRecorder
	if _, err := atom.Do(ctx, charge, charges.exec(true, "")); !errors.Is(err, errThrottled) {
		t.Fatalf("first charge: %v", err)
	}
	if _, err := atom.Do(ctx, charge, charges.exec(true, "")); !errors.Is(err, errThrottled) {
		t.Fatalf("second charge: %v", err)
	}
	if _, err := atom.Do(ctx, mail, mails.exec(false, "sent")); err != nil {
		t.Fatal(err)
	}
	if _, err := atom.Do(ctx, other, others.exec(false, "ok")); err != nil {
		t.Fatal(err)
	}
	if res, err := atom.Do(ctx, chargeAgain, charges.exec(false, "charged")); err != nil || string(res) != "charged" {
		t.Fatalf("charge retry: %q %v", res, err)
	}
	// A second success of the same action is another call: a new index.
	if _, err := atom.Do(ctx, charge, charges.exec(false, "charged twice")); err != nil {
		t.Fatal(err)
	}
	if want := []string{key(0), key(0), key(0), key(3)}; !slices.Equal(charges.keys, want) {
		t.Errorf("charge calls used keys %q, want %q", charges.keys, want)
	}
	if want := []string{key(1)}; !slices.Equal(mails.keys, want) {
		t.Errorf("mail used keys %q, want %q", mails.keys, want)
	}
	if want := []string{key(2)}; !slices.Equal(others.keys, want) {
		t.Errorf("the other charge used keys %q, want %q", others.keys, want)
	}
	if err := atom.Commit(ctx, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: "done"})); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// After a restart, each action is certified under its key: a Do with
	// that key returns the result without calling exec.
	db = openRetryStore(t, fs)
	defer db.Close()
	run, err = db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	atom, err = run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		act  ledger.Action
		key  string
		want string
	}{{charge, key(0), "charged"}, {mail, key(1), "sent"}, {other, key(2), "ok"}, {charge, key(3), "charged twice"}} {
		c.act.Key = c.key
		res, err := atom.Do(ctx, c.act, func(context.Context, string) ([]byte, error) {
			return nil, errors.New("exec called for a certified action")
		})
		if err != nil || string(res) != c.want {
			t.Errorf("%s key %s after restart: %q %v, want %q", c.act.Tool, c.key, res, err, c.want)
		}
	}
}

// TestConcurrentRetriesShareNoKey: calls of one action that fail at once
// give back their indexes, which any later Do of the action may take (a
// first try too); n calls that each fail once and then succeed use n keys,
// each succeeding exactly once.
func TestConcurrentRetriesShareNoKey(t *testing.T) {
	ctx := context.Background()
	db := openRetryStore(t, vfs.NewMem())
	defer db.Close()
	run, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	atom, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	act := ledger.Action{Tool: "t", Args: []byte(`{}`)}
	var failed, ok keyRecorder
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if _, err := atom.Do(ctx, act, failed.exec(true, "")); !errors.Is(err, errThrottled) {
				errs <- fmt.Errorf("first try: %v", err)
				return
			}
			if _, err := atom.Do(ctx, act, ok.exec(false, "done")); err != nil {
				errs <- fmt.Errorf("retry: %v", err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var want []string
	for i := range n {
		want = append(want, ledger.DefaultKey("r", 1, i))
	}
	slices.Sort(want)
	slices.Sort(ok.keys)
	if !slices.Equal(ok.keys, want) {
		t.Fatalf("retries succeeded with keys %q, want each of %q once", ok.keys, want)
	}
	for _, k := range failed.keys {
		if !slices.Contains(want, k) {
			t.Errorf("a failed try used key %q, beyond the %d the calls need", k, n)
		}
	}
}
