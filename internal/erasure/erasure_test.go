package erasure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

var (
	errInvalidDelta   = errors.New("test: invalid delta")
	errInvalidOptions = errors.New("test: invalid options")
	errNotErasable    = errors.New("test: not erasable")
	errNothing        = errors.New("test: nothing to erase")
	errClosed         = errors.New("test: closed")
	refusals          = retention.Errors{NotEnded: errors.New("test: not ended"), HasForks: errors.New("test: has forks"),
		Deleted: errors.New("test: deleted"), Invalid: errInvalidOptions}
)

// store is a Store in memory: a real key table and keys, KEYS's writes
// counted (and failed at will), the log a list of records.
type store struct {
	t      *testing.T
	ring   seal.Keyring
	sealer *record.Sealer

	mu       sync.Mutex
	locked   bool
	table    *seal.Table
	written  int   // KEYS writes
	failKeys error // the next Replace fails with it
	recs     [][]byte
	failLog  error
	// failKeysAfterLog becomes failKeys when failLog fails an Append.
	failKeysAfterLog error
}

func newStore(t *testing.T, encrypted bool) *store {
	s := &store{t: t}
	if !encrypted {
		return s
	}
	ring, err := seal.NewKeyring(map[string][]byte{"k1": bytes.Repeat([]byte{7}, 32)}, "k1")
	if err != nil {
		t.Fatal(err)
	}
	s.ring, s.table = ring, new(seal.Table)
	keys := seal.NewKeys()
	k, err := s.table.Add(ring, "")
	if err != nil {
		t.Fatal(err)
	}
	keys.Put("", k)
	s.sealer = &record.Sealer{Store: [16]byte{1}, Keys: keys, KeysFile: "KEYS"}
	return s
}

func (s *store) Keys() Keys { return s }

func (s *store) Lock() (*seal.Table, *seal.Keys) {
	s.mu.Lock()
	s.locked = true
	return s.table, s.sealer.Keys
}

func (s *store) Unlock() { s.locked = false; s.mu.Unlock() }

func (s *store) Replace(next *seal.Table) error {
	if !s.locked {
		s.t.Error("Replace without the mutex")
	}
	if err := s.failKeys; err != nil {
		s.failKeys = nil
		return err
	}
	s.written++
	s.table = next
	return nil
}

func (s *store) Add(scope string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sealer.Keys.Scope(scope); ok {
		return nil
	}
	next := s.table.Clone()
	k, err := next.Add(s.ring, scope)
	if err != nil {
		return err
	}
	s.written++
	s.table = next
	s.sealer.Keys.Put(scope, k)
	return nil
}

func (s *store) Sealer() *record.Sealer { return s.sealer }

// Signing links with an unkeyed hasher; notes are unsigned, of store "".
func (s *store) Signing() retention.Signing {
	h, err := chain.NewHasher(nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return retention.Signing{Hasher: h}
}

func (s *store) Append(_ context.Context, recs [][]byte) error {
	if err := s.failLog; err != nil {
		s.failKeys = s.failKeysAfterLog
		return err
	}
	s.recs = append(s.recs, recs...)
	return nil
}

func newEraser(s *store, erasable ...string) *Eraser {
	return New(Config{Store: s, ErasableKeys: erasable, ErrInvalidDelta: errInvalidDelta,
		ErrInvalidOptions: errInvalidOptions, ErrNotErasable: errNotErasable, ErrNothingToErase: errNothing,
		ErrClosed: errClosed, Refusals: refusals})
}

// runWith gives run a data key and returns a frame with value v of memory
// key key sealed, as a commit leaves it.
func runWith(t *testing.T, s *store, e *Eraser, run, key string, v []byte) *frame.Frame {
	t.Helper()
	if err := s.Add(run); err != nil {
		t.Fatal(err)
	}
	d, err := e.Seal(run, new(frame.Delta).Set(key, v).Set("plain", []byte("p")), false)
	if err != nil {
		t.Fatal(err)
	}
	if !d.HasSealed() {
		t.Fatalf("memory key %q not sealed: %v", key, d)
	}
	f := &frame.Frame{Memory: map[string][]byte{}}
	if err := f.Apply(d); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestErasable: names and prefixes.
func TestErasable(t *testing.T) {
	e := newEraser(newStore(t, true), "ssn", "pii.*")
	for key, want := range map[string]bool{"ssn": true, "ssn2": false, "pii.": true, "pii.mail": true, "pii": false, "": false} {
		if got := e.Erasable(key); got != want {
			t.Errorf("Erasable(%q) = %v, want %v", key, got, want)
		}
	}
}

// TestSealOpen: a value of an erasable key is sealed with its scope's
// key (added first, KEYS written), opens on the way out, and reads as
// absent once its key is dropped; a caller's sealed op is refused.
func TestSealOpen(t *testing.T) {
	s := newStore(t, true)
	e := newEraser(s, "pii.*")
	f := runWith(t, s, e, "r", "pii.mail", []byte("a@b"))
	if _, ok := f.Sealed["pii.mail"]; !ok || string(f.Memory["plain"]) != "p" {
		t.Fatalf("frame %+v: want pii.mail sealed, plain in the clear", f)
	}
	open, err := e.Open(f)
	if err != nil || string(open.Memory["pii.mail"]) != "a@b" {
		t.Fatalf("Open: %v, %q", err, open.Memory["pii.mail"])
	}
	if err := e.CheckSealed("r", f); err != nil {
		t.Fatal(err)
	}

	_, err = e.Seal("r", new(frame.Delta).SetSealed("x", f.Sealed["pii.mail"]), false)
	if !errors.Is(err, errInvalidDelta) {
		t.Fatalf("a caller's set_sealed op: %v, want the invalid-delta sentinel", err)
	}
	long := "pii." + string(bytes.Repeat([]byte{'k'}, record.MaxMemoryKeyLen))
	if _, err := e.Seal("r", new(frame.Delta).Set(long, nil), false); !errors.Is(err, errInvalidDelta) {
		t.Fatalf("a key of %d bytes: %v, want the invalid-delta sentinel", len(long), err)
	}

	nos, err := e.Retire("r", "pii.mail")
	if err != nil || len(nos) != 1 {
		t.Fatalf("Retire: %v, %v", nos, err)
	}
	if err := e.DropNos(nos); err != nil {
		t.Fatal(err)
	}
	open, err = e.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := open.Memory["pii.mail"]; ok {
		t.Fatal("an erased value still opens")
	}
	if err := e.CheckSealed("r", f); err != nil {
		t.Fatalf("an erased key is not damage: %v", err)
	}
	if _, err := e.Retire("r", "pii.mail"); !errors.Is(err, errNothing) {
		t.Fatalf("Retire of an erased key: %v, want the nothing-to-erase sentinel", err)
	}
	if _, err := e.Retire("r", "plain"); !errors.Is(err, errNotErasable) {
		t.Fatalf("Retire of a key never sealed: %v, want the not-erasable sentinel", err)
	}
}

// TestCheckSealedMissingKey: a sealed value whose key KEYS never held is
// KEYS's damage, at Open's check and on the way out.
func TestCheckSealedMissingKey(t *testing.T) {
	s := newStore(t, true)
	e := newEraser(s, "k")
	f := runWith(t, s, e, "r", "k", []byte("v"))

	other := newStore(t, true) // another store's KEYS: lacks r's memory key
	o := newEraser(other)
	var ce *record.CorruptionError
	if err := o.CheckSealed("r", f); !errors.As(err, &ce) || ce.File != "KEYS" || ce.Run != "r" {
		t.Fatalf("CheckSealed with a KEYS that lacks the key: %v", err)
	}
	if _, err := o.Open(f); !errors.As(err, &ce) || !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("Open with a KEYS that lacks the key: %v", err)
	}
}

// TestPlaintext: a plaintext store seals nothing, and refuses a sealed
// value it cannot hold.
func TestPlaintext(t *testing.T) {
	s := newStore(t, false)
	e := newEraser(s, "k")
	d := new(frame.Delta).Set("k", []byte("v"))
	got, err := e.Seal("r", d, false)
	if err != nil || got != d {
		t.Fatalf("Seal in a plaintext store: %v, %v", got, err)
	}
	f := &frame.Frame{Memory: map[string][]byte{}, Sealed: map[string][]byte{"k": {seal.Magic, 1, 2}}}
	if _, err := e.Open(f); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("Open of a sealed value in a plaintext store: %v", err)
	}
	if e.Live("r") || e.Pending() != nil {
		t.Fatal("a plaintext store has live keys or pending erasures")
	}
	if keys, err := e.Heal([]KeyErasure{{Run: "r", Key: "k", Nos: []uint64{1}}}); keys != nil || err != nil {
		t.Fatalf("Heal in a plaintext store: %v, %v", keys, err)
	}
	// No KEYS to change: every change fails, none panics.
	_, retireErr := e.Retire("r", "k")
	for name, err := range map[string]error{"Mark": e.Mark("r", true), "DropRun": e.DropRun("r"), "DropNos": e.DropNos([]uint64{1}), "Retire": retireErr} {
		if !errors.Is(err, offline.ErrKeyring) {
			t.Errorf("%s in a plaintext store: %v, want offline.ErrKeyring", name, err)
		}
	}
	if nos, _ := e.LiveNamed([]KeyErasure{{Run: "r", Key: "k", Nos: []uint64{1}}}); nos != nil {
		t.Fatalf("LiveNamed in a plaintext store: %v", nos)
	}
}

// TestRunSteps: the KEYS steps of a run's erasure, a failed write of KEYS
// changing nothing, and the erase record's durability.
func TestRunSteps(t *testing.T) {
	s := newStore(t, true)
	e := newEraser(s, "m")
	runWith(t, s, e, "r", "m", []byte("v"))
	runWith(t, s, e, "keep", "m", []byte("v"))

	if err := e.Mark("none", true); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("Mark of a run without keys: %v", err)
	}
	if err := e.Unmark("none"); err != nil {
		t.Fatalf("Unmark of a run without a mark: %v", err)
	}
	s.failKeys = errors.New("disk full")
	if err := e.Mark("r", true); err == nil || len(e.Pending()) != 0 {
		t.Fatalf("a failed Mark: %v, pending %v", err, e.Pending())
	}
	// A record that does not become durable: the mark goes again.
	s.failLog = errors.New("log failed")
	if _, err, uerr := e.Begin(context.Background(), "r", 4, chain.Hash{1}, "why"); !errors.Is(err, s.failLog) || uerr != nil || len(e.Pending()) != 0 {
		t.Fatalf("Begin with a failing log: %v, unmark %v, pending %v", err, uerr, e.Pending())
	}
	s.failLog = nil
	er, err, _ := e.Begin(context.Background(), "r", 4, chain.Hash{1}, "why")
	if err != nil || er.Seq != 4 || er.Reason != "why" || len(s.recs) != 1 {
		t.Fatalf("Begin: %+v, %v, %d records", er, err, len(s.recs))
	}
	if p := e.Pending(); !slices.Equal(p, []string{"r"}) {
		t.Fatalf("Pending = %v, want [r] (a run and its memory key are one erasure)", p)
	}
	var rec record.Record
	if err := new(record.Decoder).Decode(s.recs[0], wal.Pos{Segment: 1}, "log", &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Kind != record.KindErase || rec.Run != "r" || rec.Seq != 4 || rec.Final != (chain.Hash{1}) || rec.Head != er.Head || rec.Reason != "why" {
		t.Fatalf("the erase record reads back as %+v", rec)
	}
	payload := record.AppendErasePayload(nil, er.At.UnixNano(), "why")
	if want := s.Signing().Hasher.Link("r", 4, chain.Hash{1}, payload); er.Head != want {
		t.Fatal("the erasure's link is not over its payload")
	}

	s.failKeys = errors.New("disk full")
	if err := e.DropRun("r"); err == nil || !e.Live("r") {
		t.Fatalf("a failed DropRun: %v, live %v", err, e.Live("r"))
	}
	if err := e.DropRun("r"); err != nil {
		t.Fatal(err)
	}
	if got := e.Stale([]string{"r", "keep", "none"}); !slices.Equal(got, []string{"keep"}) {
		t.Fatalf("Stale = %v, want [keep]", got)
	}
	if e.Live("r") || !e.Live("keep") || len(e.Pending()) != 0 {
		t.Fatalf("after DropRun: r live %v, keep live %v, pending %v", e.Live("r"), e.Live("keep"), e.Pending())
	}
	for _, scope := range []string{"r", seal.MemoryScope("r", "m")} {
		if _, ok := s.sealer.Keys.Scope(scope); ok {
			t.Fatalf("scope %q's key still in memory", scope)
		}
	}
}

// TestRecordKey: a memory key's erasure drops its keys only once its
// record is durable; FinishKeys and Heal drop those of records the log
// holds, and never a key of another scope.
func TestRecordKey(t *testing.T) {
	s := newStore(t, true)
	e := newEraser(s, "*")
	runWith(t, s, e, "r", "a", []byte("1"))
	runWith(t, s, e, "r", "b", []byte("2"))
	nos, err := e.Retire("r", "a")
	if err != nil {
		t.Fatal(err)
	}
	s.failLog = errors.New("log failed")
	if _, err := e.RecordKey(context.Background(), "r", "a", "why", 3, chain.Hash{}, nos); !errors.Is(err, s.failLog) {
		t.Fatalf("RecordKey with a failing log: %v", err)
	}
	if got, _ := e.LiveNamed([]KeyErasure{{Run: "r", Key: "a", Nos: nos}}); !slices.Equal(got, nos) {
		t.Fatalf("keys dropped though the record is not durable: live %v, want %v", got, nos)
	}
	s.failLog = nil
	s.failKeys = errors.New("disk full")
	if _, err := e.RecordKey(context.Background(), "r", "a", "why", 3, chain.Hash{}, nos); err == nil {
		t.Fatal("RecordKey with a failing KEYS write succeeded")
	}

	// The record is durable, KEYS not: Open finishes it.
	var rec record.Record
	if err := new(record.Decoder).Decode(s.recs[len(s.recs)-1], wal.Pos{Segment: 1}, "log", &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Kind != record.KindEraseKey || rec.Run != "r" || rec.Key != "a" || !slices.Equal(rec.KeyNos, nos) || rec.Seq != 3 {
		t.Fatalf("the erase-key record reads back as %+v", rec)
	}
	e.Replayed(&rec)
	bNos, _ := e.LiveNamed([]KeyErasure{{Run: "r", Key: "b", Nos: []uint64{1, 2, 3, 4, 5}}})
	if err := e.FinishKeys(); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.LiveNamed([]KeyErasure{{Run: "r", Key: "a", Nos: nos}}); len(got) != 0 {
		t.Fatalf("FinishKeys left %v live", got)
	}
	// A record that names b's number under a's key drops nothing.
	if keys, err := e.Heal([]KeyErasure{{Run: "r", Key: "a", Nos: bNos}}); keys != nil || err != nil {
		t.Fatalf("Heal of another key's number: %v, %v", keys, err)
	}
	if keys, err := e.Heal([]KeyErasure{{Run: "r", Key: "b", Nos: bNos}}); !slices.Equal(keys, []string{"r/b"}) || err != nil {
		t.Fatalf("Heal of b: %v, %v", keys, err)
	}
}

// TestReasonAndKey: the bounds of EraseKey's and Erase's arguments.
func TestReasonAndKey(t *testing.T) {
	e := newEraser(newStore(t, true))
	if r, err := e.Reason("erase", ""); r != "erased by request" || err != nil {
		t.Fatalf("Reason(\"\") = %q, %v", r, err)
	}
	if _, err := e.Reason("erase", string(make([]byte, record.MaxDeleteReason+1))); !errors.Is(err, errInvalidOptions) {
		t.Fatalf("a long reason: %v", err)
	}
	for _, key := range []string{"", string(make([]byte, record.MaxMemoryKeyLen+1))} {
		if err := e.CheckKey(key); !errors.Is(err, errInvalidOptions) {
			t.Fatalf("CheckKey of %d bytes: %v", len(key), err)
		}
	}
	if err := e.CheckKey(fmt.Sprint("k", 1)); err != nil {
		t.Fatal(err)
	}
}

// TestQueue: Do runs a job on the goroutine that serves Jobs and waits
// for it; a closing store or an ended ctx gives up before a job is taken,
// never after.
func TestQueue(t *testing.T) {
	e := newEraser(newStore(t, true))
	errClosed := errors.New("test: closed")
	stop := make(chan struct{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		for {
			select {
			case job := <-e.Jobs():
				job()
			case <-stop:
				return
			}
		}
	}()
	ran := false
	if err := e.Do(context.Background(), stop, errClosed, func() { ran = true }); err != nil || !ran {
		t.Fatalf("Do: %v, ran %v", err, ran)
	}
	close(stop)
	<-served
	if err := e.Do(context.Background(), stop, errClosed, func() { t.Error("a job ran after stop") }); err != errClosed {
		t.Fatalf("Do after stop: %v, want the closed error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Do(ctx, make(chan struct{}), errClosed, func() { t.Error("a job ran with its ctx done") }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do with ctx done: %v", err)
	}
}
