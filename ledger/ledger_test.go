package ledger

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func mustIntent(t testing.TB, tool, args string, seq uint64, idx uint32, idempotent bool) *Intent {
	t.Helper()
	in, err := NewIntent(Action{Tool: tool, Args: []byte(args), Idempotent: idempotent}, "run", seq, idx)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestDoRunsOnceAndCertifies(t *testing.T) {
	ctx := context.Background()
	j, l, ex := newMemJournal(), New(), newExecCounter()
	in := mustIntent(t, "email.send", `{"to":"a@b.c"}`, 1, 0, false)
	res, err := l.Do(ctx, j, in, ex.exec)
	if err != nil || string(res) != "r:"+in.Key {
		t.Fatalf("Do = %q, %v", res, err)
	}
	if j.len() != 2 {
		t.Fatalf("journal has %d records, want intent + certificate", j.len())
	}
	for range 3 {
		res, err = l.Do(ctx, j, in, ex.exec)
		if err != nil || string(res) != "r:"+in.Key {
			t.Fatalf("second Do = %q, %v", res, err)
		}
	}
	if n := ex.count(in.Key); n != 1 {
		t.Fatalf("exec called %d times, want 1", n)
	}
	if j.len() != 2 {
		t.Fatalf("a certified Do wrote records: %d", j.len())
	}
	e, ok := l.Lookup(in.Fingerprint)
	if !ok || e.Status != StatusDone || e.InFlight || string(e.Result) != "r:"+in.Key ||
		e.IntentLoc != (Loc{Segment: 1, Offset: 0}) || e.CertLoc != (Loc{Segment: 1, Offset: 1}) {
		t.Fatalf("Lookup = %+v, %v", e, ok)
	}
	// The returned result is the caller's: scribbling on it changes nothing.
	res[0] = 'X'
	e.Result[0] = 'Y'
	if again, _ := l.Do(ctx, j, in, ex.exec); string(again) != "r:"+in.Key {
		t.Fatalf("result aliased: %q", again)
	}
	if l.Len() != 1 {
		t.Fatalf("Len = %d", l.Len())
	}
}

// TestI3CertifiedNeverReExecuted: once a certificate is durable, no Do of
// that fingerprint calls exec again, after any number of crashes, whether
// the result is held in memory, read back from the log, or found through a
// persisted table, idempotent or not.
func TestI3CertifiedNeverReExecuted(t *testing.T) {
	ctx := context.Background()
	j, ex := newMemJournal(), newExecCounter()
	in := mustIntent(t, "payments.charge", `{"amount":100,"currency":"EUR"}`, 5, 1, false)
	if _, err := New().Do(ctx, j, in, ex.exec); err != nil {
		t.Fatal(err)
	}
	tbl := j.recover(t, false).AppendTable(nil)
	recovered := map[string]func() *Ledger{
		"replay keeping results": func() *Ledger { return j.recover(t, true) },
		"replay without results": func() *Ledger { return j.recover(t, false) },
		"table only": func() *Ledger {
			l := New()
			if err := l.LoadTable(bytes.Clone(tbl)); err != nil {
				t.Fatal(err)
			}
			return l
		},
	}
	for name, open := range recovered {
		for _, idem := range []bool{false, true} {
			l := open()
			again := *in
			again.Idempotent = idem
			reads := j.reads()
			res, err := l.Do(ctx, j, &again, func(context.Context, string) ([]byte, error) {
				t.Fatalf("%s: exec called for a certified action", name)
				return nil, nil
			})
			if err != nil || string(res) != "r:"+in.Key {
				t.Fatalf("%s: Do = %q, %v", name, res, err)
			}
			if name == "replay keeping results" && j.reads() != reads {
				t.Fatalf("%s: the hit path read the log", name)
			}
			if err := l.Resolve(ctx, j, in, []byte("x")); !errors.Is(err, ErrAlreadyCertified) {
				t.Fatalf("%s: Resolve of a certified action: %v", name, err)
			}
		}
	}
	if n := ex.count(in.Key); n != 1 {
		t.Fatalf("exec called %d times", n)
	}
}

func TestDoConcurrentSameFingerprint(t *testing.T) {
	ctx := context.Background()
	j, l := newMemJournal(), New()
	in := mustIntent(t, "bucket.create", `{"name":"logs"}`, 1, 0, true)
	var calls atomic.Int32
	release := make(chan struct{})
	exec := func(ctx context.Context, key string) ([]byte, error) {
		calls.Add(1)
		<-release // hold the flight open until every goroutine has arrived
		return []byte("created:" + key), nil
	}
	const n = 64
	var wg sync.WaitGroup
	var started sync.WaitGroup
	results := make([][]byte, n)
	errs := make([]error, n)
	started.Add(n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			results[i], errs[i] = l.Do(ctx, j, in, exec)
		}()
	}
	started.Wait()
	close(release)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || string(results[i]) != "created:"+in.Key {
			t.Fatalf("goroutine %d: %q, %v", i, results[i], errs[i])
		}
	}
	if c := calls.Load(); c != 1 {
		t.Fatalf("exec called %d times, want 1", c)
	}
	if j.len() != 2 {
		t.Fatalf("journal has %d records, want 2", j.len())
	}
}

// TestDoConcurrentManyFingerprints runs many goroutines over a few
// fingerprints, some failing at first: every fingerprint ends certified
// with exactly one successful exec.
func TestDoConcurrentManyFingerprints(t *testing.T) {
	ctx := context.Background()
	j, l := newMemJournal(), New()
	const fps, workers = 16, 32
	ins := make([]*Intent, fps)
	for i := range ins {
		ins[i] = mustIntent(t, "tool", `{"i":`+string(rune('0'+i%10))+`}`, uint64(i), uint32(i), i%2 == 0)
	}
	var success [fps]atomic.Int32
	var attempts [fps]atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 50 {
				i := (w + k) % fps
				_, err := l.Do(ctx, j, ins[i], func(ctx context.Context, key string) ([]byte, error) {
					if attempts[i].Add(1) <= 2 {
						return nil, errors.New("transient")
					}
					success[i].Add(1)
					return []byte(key), nil
				})
				if err != nil && !strings.Contains(err.Error(), "transient") {
					t.Errorf("Do %d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	for i := range fps {
		if s := success[i].Load(); s != 1 {
			t.Errorf("fingerprint %d: %d successful execs, want 1", i, s)
		}
		if e, _ := l.Lookup(ins[i].Fingerprint); e.Status != StatusDone {
			t.Errorf("fingerprint %d: status %v", i, e.Status)
		}
	}
}

func TestDoExecErrorThenRetry(t *testing.T) {
	ctx := context.Background()
	j, l, ex := newMemJournal(), New(), newExecCounter()
	in := mustIntent(t, "http.post", `{}`, 1, 0, false)
	boom := errors.New("503 service unavailable")
	ex.err = boom
	_, err := l.Do(ctx, j, in, ex.exec)
	if !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want the exec error", err)
	}
	if e, _ := l.Lookup(in.Fingerprint); e.Status != StatusFailed {
		t.Fatalf("status %v after exec error", e.Status)
	}
	// The failure is durable: after a crash the action is failed, not in doubt.
	if r := j.recover(t, false); len(r.InDoubt()) != 0 {
		t.Fatalf("failed action in doubt after recovery")
	} else if e, _ := r.Lookup(in.Fingerprint); e.Status != StatusFailed {
		t.Fatalf("recovered status %v", e.Status)
	}
	res, err := l.Do(ctx, j, in, ex.exec)
	if err != nil || string(res) != "r:"+in.Key {
		t.Fatalf("retry: %q, %v", res, err)
	}
	if ex.count(in.Key) != 2 {
		t.Fatalf("exec calls %d, want 2", ex.count(in.Key))
	}
	// intent, failed certificate, intent, done certificate
	if j.len() != 4 {
		t.Fatalf("journal has %d records", j.len())
	}
	c, err := DecodeCertificate(j.records()[1])
	if err != nil || c.Status != StatusFailed || c.Err != boom.Error() {
		t.Fatalf("failure certificate %+v, %v", c, err)
	}
}

// crashDuringExec leaves in the journal an intent without certificate, as a
// crash between dispatch and completion does, and returns the recovered
// ledger.
func crashDuringExec(t *testing.T, j *memJournal, in *Intent) *Ledger {
	t.Helper()
	j.crashAfter(1) // the intent is written, then the process dies
	_, err := New().Do(context.Background(), j, in, func(ctx context.Context, key string) ([]byte, error) {
		return []byte("lost"), nil
	})
	if !errors.Is(err, errCrashed) {
		t.Fatalf("Do during crash: %v", err)
	}
	j.revive()
	return j.recover(t, true)
}

func TestDoInDoubtIdempotent(t *testing.T) {
	ctx := context.Background()
	j, ex := newMemJournal(), newExecCounter()
	in := mustIntent(t, "bucket.create", `{"name":"b"}`, 3, 0, true)
	l := crashDuringExec(t, j, in)
	if got := l.InDoubt(); len(got) != 1 || got[0] != in.Fingerprint {
		t.Fatalf("InDoubt = %v", got)
	}
	if s := l.Stats(); s.InDoubt != 1 || s.Entries != 1 {
		t.Fatalf("Stats = %+v", s)
	}
	records := j.len()
	res, err := l.Do(ctx, j, in, ex.exec)
	if err != nil || string(res) != "r:"+in.Key {
		t.Fatalf("Do = %q, %v", res, err)
	}
	if ex.count(in.Key) != 1 || len(ex.calls) != 1 {
		t.Fatalf("exec calls %v, want one with key %q", ex.calls, in.Key)
	}
	if j.len() != records+1 {
		t.Fatalf("wrote %d records, want only the certificate", j.len()-records)
	}
	if len(l.InDoubt()) != 0 {
		t.Fatal("still in doubt")
	}
}

func TestDoInDoubtNotIdempotentThenResolve(t *testing.T) {
	ctx := context.Background()
	j := newMemJournal()
	in := mustIntent(t, "email.send", `{"to":"x"}`, 3, 2, false)
	l := crashDuringExec(t, j, in)
	never := func(context.Context, string) ([]byte, error) {
		t.Fatal("exec called for an in-doubt non-idempotent action")
		return nil, nil
	}
	_, err := l.Do(ctx, j, in, never)
	if !errors.Is(err, ErrInDoubt) {
		t.Fatalf("Do = %v, want ErrInDoubt", err)
	}
	var doubt *InDoubtError
	if !errors.As(err, &doubt) || doubt.Key != in.Key || doubt.Tool != "email.send" || doubt.RunID != "run" ||
		doubt.Seq != 3 || doubt.Fingerprint != in.Fingerprint {
		t.Fatalf("InDoubtError = %+v", doubt)
	}
	if err := l.Resolve(ctx, j, in, []byte("sent-by-hand")); err != nil {
		t.Fatal(err)
	}
	res, err := l.Do(ctx, j, in, never)
	if err != nil || string(res) != "sent-by-hand" {
		t.Fatalf("Do after Resolve = %q, %v", res, err)
	}
	if err := l.Resolve(ctx, j, in, []byte("again")); !errors.Is(err, ErrAlreadyCertified) {
		t.Fatalf("second Resolve = %v", err)
	}
	// The resolution is durable.
	r := j.recover(t, false)
	if e, _ := r.Lookup(in.Fingerprint); e.Status != StatusResolved {
		t.Fatalf("recovered status %v", e.Status)
	}
	if res, err := r.Do(ctx, j, in, never); err != nil || string(res) != "sent-by-hand" {
		t.Fatalf("recovered Do = %q, %v", res, err)
	}
}

func TestResolveFailedAllowsRetry(t *testing.T) {
	ctx := context.Background()
	j, ex := newMemJournal(), newExecCounter()
	in := mustIntent(t, "email.send", `{"to":"y"}`, 4, 0, false)
	l := crashDuringExec(t, j, in)
	if err := l.ResolveFailed(ctx, j, in, "downstream has no such message"); err != nil {
		t.Fatal(err)
	}
	if e, _ := l.Lookup(in.Fingerprint); e.Status != StatusFailed {
		t.Fatalf("status %v", e.Status)
	}
	res, err := l.Do(ctx, j, in, ex.exec)
	if err != nil || string(res) != "r:"+in.Key || ex.count(in.Key) != 1 {
		t.Fatalf("Do after ResolveFailed = %q, %v (%d calls)", res, err, ex.count(in.Key))
	}
}

func TestResolveWithoutRecord(t *testing.T) {
	ctx := context.Background()
	j, l := newMemJournal(), New()
	in := mustIntent(t, "t", `1`, 1, 0, false)
	if err := l.Resolve(ctx, j, in, nil); err != nil {
		t.Fatal(err)
	}
	if j.len() != 1 {
		t.Fatalf("Resolve wrote %d records, want just the certificate", j.len())
	}
	res, err := l.Do(ctx, j, in, func(context.Context, string) ([]byte, error) {
		t.Fatal("exec called after Resolve")
		return nil, nil
	})
	if err != nil || res == nil || len(res) != 0 {
		t.Fatalf("Do = %q (nil %v), %v; want an empty result", res, res == nil, err)
	}
}

func TestWriteIntentFailureSkipsExec(t *testing.T) {
	ctx := context.Background()
	j, l, ex := newMemJournal(), New(), newExecCounter()
	in := mustIntent(t, "t", `{"a":1}`, 1, 0, true)
	diskFull := errors.New("no space left on device")
	j.injectIntentErr(diskFull)
	if _, err := l.Do(ctx, j, in, ex.exec); !errors.Is(err, diskFull) {
		t.Fatalf("Do = %v, want the intent error", err)
	}
	if len(ex.calls) != 0 {
		t.Fatal("exec called although the intent was not durable")
	}
	if _, ok := l.Lookup(in.Fingerprint); ok {
		t.Fatal("a fingerprint without durable record is in the index")
	}
	if l.Len() != 0 || j.len() != 0 {
		t.Fatalf("Len %d, journal %d", l.Len(), j.len())
	}
	if _, err := l.Do(ctx, j, in, ex.exec); err != nil || ex.count(in.Key) != 1 {
		t.Fatalf("later Do: %v, %d calls", err, ex.count(in.Key))
	}
}

func TestWriteCertificateFailureLeavesInDoubt(t *testing.T) {
	ctx := context.Background()
	j, l, ex := newMemJournal(), New(), newExecCounter()
	in := mustIntent(t, "t", `{"a":2}`, 1, 0, false)
	ioErr := errors.New("input/output error")
	j.injectCertErr(ioErr)
	if _, err := l.Do(ctx, j, in, ex.exec); !errors.Is(err, ioErr) || !strings.Contains(err.Error(), "in doubt") {
		t.Fatalf("Do = %v", err)
	}
	if e, _ := l.Lookup(in.Fingerprint); e.Status != StatusIntent || e.InFlight {
		t.Fatalf("entry %+v, want an intent not in flight", e)
	}
	if _, err := l.Do(ctx, j, in, ex.exec); !errors.Is(err, ErrInDoubt) {
		t.Fatalf("second Do = %v, want ErrInDoubt", err)
	}
	if ex.count(in.Key) != 1 {
		t.Fatalf("exec calls %d", ex.count(in.Key))
	}
	// Exec error and certificate error together: both are visible.
	in2 := mustIntent(t, "t", `{"a":3}`, 1, 1, true)
	execErr := errors.New("exec broke")
	ex.err = execErr
	j.injectCertErr(ioErr)
	_, err := l.Do(ctx, j, in2, ex.exec)
	if !errors.Is(err, execErr) || !errors.Is(err, ioErr) {
		t.Fatalf("Do = %v, want both errors", err)
	}
	if e, _ := l.Lookup(in2.Fingerprint); e.Status != StatusIntent {
		t.Fatalf("status %v", e.Status)
	}
}

func TestCertificateSurvivesCancel(t *testing.T) {
	j, l := newMemJournal(), New()
	in := mustIntent(t, "t", `1`, 1, 0, false)
	ctx, cancel := context.WithCancel(context.Background())
	res, err := l.Do(ctx, j, in, func(context.Context, string) ([]byte, error) {
		cancel() // the caller gives up while the effect happens
		return []byte("done"), nil
	})
	if err != nil || string(res) != "done" {
		t.Fatalf("Do = %q, %v", res, err)
	}
	if e, _ := l.Lookup(in.Fingerprint); e.Status != StatusDone {
		t.Fatalf("status %v: the certificate must be written despite the cancel", e.Status)
	}
}

func TestInFlight(t *testing.T) {
	ctx := context.Background()
	j, l := newMemJournal(), New()
	in := mustIntent(t, "slow", `1`, 1, 0, false)
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := l.Do(ctx, j, in, func(context.Context, string) ([]byte, error) {
			close(entered)
			<-release
			return []byte("ok"), nil
		})
		done <- err
	}()
	<-entered
	if e, ok := l.Lookup(in.Fingerprint); !ok || !e.InFlight || e.Status != StatusIntent {
		t.Fatalf("Lookup in flight = %+v, %v", e, ok)
	}
	if s := l.Stats(); s.InFlight != 1 || s.InDoubt != 0 {
		t.Fatalf("Stats %+v", s)
	}
	if len(l.InDoubt()) != 0 {
		t.Fatal("an action in flight is not in doubt")
	}
	if err := l.Resolve(ctx, j, in, nil); !errors.Is(err, ErrInFlight) {
		t.Fatalf("Resolve in flight = %v", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Do(wctx, j, in, nil); err == nil {
		t.Fatal("Do with nil exec accepted")
	}
	wctx, cancel = context.WithCancel(ctx)
	waitErr := make(chan error, 1)
	go func() {
		_, err := l.Do(wctx, j, in, func(context.Context, string) ([]byte, error) {
			t.Error("exec called twice")
			return nil, nil
		})
		waitErr <- err
	}()
	cancel()
	if err := <-waitErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting Do after cancel = %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestExecPanicLeavesInDoubt(t *testing.T) {
	ctx := context.Background()
	j, l := newMemJournal(), New()
	in := mustIntent(t, "t", `1`, 1, 0, false)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the exec panic", r)
			}
		}()
		_, _ = l.Do(ctx, j, in, func(context.Context, string) ([]byte, error) { panic("boom") })
	}()
	if e, _ := l.Lookup(in.Fingerprint); e.Status != StatusIntent || e.InFlight {
		t.Fatalf("entry after panic %+v", e)
	}
	if _, err := l.Do(ctx, j, in, nil); err == nil {
		t.Fatal("nil exec accepted")
	}
	if _, err := l.Do(ctx, j, in, func(context.Context, string) ([]byte, error) { return nil, nil }); !errors.Is(err, ErrInDoubt) {
		t.Fatalf("Do after panic = %v", err)
	}
	// Checkpoint must not deadlock after a panic.
	if tbl := l.Checkpoint(nil, nil); len(tbl) != tableHeaderSize+tableEntrySize {
		t.Fatalf("table of %d bytes", len(tbl))
	}
}

func TestDoBadInput(t *testing.T) {
	ctx := context.Background()
	j, l := newMemJournal(), New()
	exec := func(context.Context, string) ([]byte, error) { return nil, nil }
	good := mustIntent(t, "t", `1`, 1, 0, false)
	noKey := *good
	noKey.Key = ""
	noTool := *good
	noTool.Tool = ""
	for name, tc := range map[string]struct {
		in   *Intent
		j    Journal
		exec Exec
		want error
	}{
		"nil intent":  {nil, j, exec, ErrBadIntent},
		"no key":      {&noKey, j, exec, ErrNoKey},
		"no tool":     {&noTool, j, exec, ErrNoTool},
		"nil exec":    {good, j, nil, ErrBadIntent},
		"nil journal": {good, nil, exec, ErrBadIntent},
	} {
		if _, err := l.Do(ctx, tc.j, tc.in, tc.exec); !errors.Is(err, tc.want) {
			t.Errorf("%s: Do = %v, want %v", name, err, tc.want)
		}
		if tc.exec != nil {
			if err := l.Resolve(ctx, tc.j, tc.in, nil); !errors.Is(err, tc.want) {
				t.Errorf("%s: Resolve = %v, want %v", name, err, tc.want)
			}
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Do(cctx, j, good, exec); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do with a cancelled context = %v", err)
	}
	if j.len() != 0 {
		t.Fatal("bad input reached the journal")
	}
	l.ApplyIntent(nil, Loc{})
	l.ApplyCertificate(nil, Loc{}, true)
	l.ApplyCertificate(&Certificate{Status: Status(77)}, Loc{}, true)
	if l.Len() != 0 {
		t.Fatal("bad replay input entered the index")
	}
}

// TestSecretsNeverReachTheLog runs an action with redacted secrets and
// checks no record holds them.
func TestSecretsNeverReachTheLog(t *testing.T) {
	ctx := context.Background()
	j, l, ex := newMemJournal(), New(), newExecCounter()
	in, err := NewIntent(Action{Tool: "db.migrate",
		Args:   []byte(`{"dsn":"postgres://u:hunter2@db","steps":[{"sql":"x","token":"tok-XYZZY"}]}`),
		Redact: []string{"/dsn", "/steps/0/token"}}, "run", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Do(ctx, j, in, ex.exec); err != nil {
		t.Fatal(err)
	}
	for i, r := range j.records() {
		if bytes.Contains(r, []byte("hunter2")) || bytes.Contains(r, []byte("XYZZY")) {
			t.Fatalf("record %d holds a secret: %q", i, r)
		}
	}
}

func TestReadCertificateErrors(t *testing.T) {
	ctx := context.Background()
	j := newMemJournal()
	a := mustIntent(t, "t", `"a"`, 1, 0, false)
	b := mustIntent(t, "t", `"b"`, 1, 1, false)
	for _, in := range []*Intent{a, b} {
		if _, err := New().Do(ctx, j, in, newExecCounter().exec); err != nil {
			t.Fatal(err)
		}
	}
	l := New()
	// A certificate location that points at b's certificate for a.
	l.ApplyCertificate(&Certificate{Fingerprint: a.Fingerprint, Status: StatusDone}, Loc{Segment: 1, Offset: 3}, false)
	if _, err := l.Do(ctx, j, a, nil); err == nil {
		t.Fatal("nil exec accepted")
	}
	never := func(context.Context, string) ([]byte, error) { t.Fatal("exec called"); return nil, nil }
	if _, err := l.Do(ctx, j, a, never); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Do with a mismatched certificate = %v", err)
	}
	l.ApplyCertificate(&Certificate{Fingerprint: b.Fingerprint, Status: StatusDone}, Loc{Segment: 1, Offset: 99}, false)
	if _, err := l.Do(ctx, j, b, never); err == nil || !strings.Contains(err.Error(), "offset 99") {
		t.Fatalf("Do with a missing certificate = %v", err)
	}
}

func TestReplayOrder(t *testing.T) {
	fp := Fingerprint{1}
	in := &Intent{Fingerprint: fp}
	tests := []struct {
		name string
		ops  []func(*Ledger)
		want Status
	}{
		{"intent", []func(*Ledger){func(l *Ledger) { l.ApplyIntent(in, Loc{Segment: 1, Offset: 1}) }}, StatusIntent},
		{"intent, done", []func(*Ledger){
			func(l *Ledger) { l.ApplyIntent(in, Loc{Segment: 1, Offset: 1}) },
			func(l *Ledger) {
				l.ApplyCertificate(&Certificate{Fingerprint: fp, Status: StatusDone}, Loc{Segment: 1, Offset: 2}, true)
			},
		}, StatusDone},
		{"done, stray intent", []func(*Ledger){
			func(l *Ledger) {
				l.ApplyCertificate(&Certificate{Fingerprint: fp, Status: StatusDone}, Loc{Segment: 1, Offset: 2}, true)
			},
			func(l *Ledger) { l.ApplyIntent(in, Loc{Segment: 1, Offset: 3}) },
		}, StatusDone},
		{"failed, retry intent", []func(*Ledger){
			func(l *Ledger) {
				l.ApplyCertificate(&Certificate{Fingerprint: fp, Status: StatusFailed}, Loc{Segment: 1, Offset: 2}, true)
			},
			func(l *Ledger) { l.ApplyIntent(in, Loc{Segment: 1, Offset: 3}) },
		}, StatusIntent},
		{"done then failed", []func(*Ledger){
			func(l *Ledger) {
				l.ApplyCertificate(&Certificate{Fingerprint: fp, Status: StatusDone}, Loc{Segment: 1, Offset: 2}, true)
			},
			func(l *Ledger) {
				l.ApplyCertificate(&Certificate{Fingerprint: fp, Status: StatusFailed}, Loc{Segment: 1, Offset: 3}, true)
			},
		}, StatusDone},
		{"resolved", []func(*Ledger){
			func(l *Ledger) {
				l.ApplyCertificate(&Certificate{Fingerprint: fp, Status: StatusResolved}, Loc{Segment: 1, Offset: 2}, false)
			},
		}, StatusResolved},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := New()
			for _, op := range tc.ops {
				op(l)
			}
			if e, _ := l.Lookup(fp); e.Status != tc.want {
				t.Fatalf("status %v, want %v", e.Status, tc.want)
			}
			// The same through a table.
			l2 := New()
			if err := l2.LoadTable(l.AppendTable(nil)); err != nil {
				t.Fatal(err)
			}
			if e, _ := l2.Lookup(fp); e.Status != tc.want {
				t.Fatalf("status via table %v, want %v", e.Status, tc.want)
			}
		})
	}
}

// TestWaitersGetFailure: goroutines waiting on a flight whose exec fails
// get its error, and exec is not run again by them.
func TestWaitersGetFailure(t *testing.T) {
	ctx := context.Background()
	j, l := newMemJournal(), New()
	in := mustIntent(t, "t", `1`, 1, 0, false)
	boom := errors.New("boom")
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	exec := func(context.Context, string) ([]byte, error) {
		if calls.Add(1) == 1 {
			close(entered)
		}
		<-release
		return nil, boom
	}
	errs := make(chan error, 8)
	go func() { _, err := l.Do(ctx, j, in, exec); errs <- err }()
	<-entered
	for range 7 {
		go func() { _, err := l.Do(ctx, j, in, exec); errs <- err }()
	}
	// Give the waiters a chance to queue; correctness does not depend on it.
	time.Sleep(10 * time.Millisecond)
	close(release)
	for range 8 {
		if err := <-errs; !errors.Is(err, boom) {
			t.Fatalf("Do = %v, want boom", err)
		}
	}
	if c := calls.Load(); c > 8 || c < 1 {
		t.Fatalf("exec calls %d", c)
	}
}

// TestZeroLedger checks that a zero Ledger works like New's: no nil-map
// panic on the first insert, whatever the entry point.
func TestZeroLedger(t *testing.T) {
	ctx := context.Background()
	in := mustIntent(t, "t", `1`, 1, 0, false)
	for name, op := range map[string]func(l *Ledger) error{
		"Do": func(l *Ledger) error {
			_, err := l.Do(ctx, newMemJournal(), in, newExecCounter().exec)
			return err
		},
		"Resolve":     func(l *Ledger) error { return l.Resolve(ctx, newMemJournal(), in, nil) },
		"ApplyIntent": func(l *Ledger) error { l.ApplyIntent(in, Loc{}); return nil },
		"ApplyCertificate": func(l *Ledger) error {
			l.ApplyCertificate(&Certificate{Fingerprint: in.Fingerprint, Status: StatusDone}, Loc{}, true)
			return nil
		},
		"Checkpoint": func(l *Ledger) error { l.Checkpoint(nil, nil); return nil },
	} {
		var l Ledger
		if err := op(&l); err != nil {
			t.Fatalf("%s on a zero Ledger: %v", name, err)
		}
		if name != "Checkpoint" && l.Len() != 1 {
			t.Fatalf("%s on a zero Ledger: Len %d", name, l.Len())
		}
	}
}

// TestUncancelled: a certificate's context cannot be cancelled, and one
// nothing could cancel is passed on as it is.
func TestUncancelled(t *testing.T) {
	bg := context.Background()
	if got := uncancelled(bg); got != bg {
		t.Fatalf("uncancelled(Background) = %v, want Background itself", got)
	}
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(bg, key{}, "v"))
	cancel()
	got := uncancelled(ctx)
	if got.Err() != nil || got.Done() != nil || got.Value(key{}) != "v" {
		t.Fatalf("uncancelled of a cancelled context: Err %v, Done %v, value %v", got.Err(), got.Done(), got.Value(key{}))
	}
	dl, cancel2 := context.WithDeadline(bg, time.Now().Add(-time.Second))
	defer cancel2()
	if got := uncancelled(dl); got.Err() != nil {
		t.Fatalf("uncancelled of an expired context: %v", got.Err())
	}
	if _, ok := uncancelled(dl).Deadline(); ok {
		t.Fatal("uncancelled keeps the deadline")
	}
}
