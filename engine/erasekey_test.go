package engine

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

// The values of the memory-key erasure tests: emailSecret is what
// EraseKey must make unrecoverable; ssnSecret is another erasable key's
// and nameKept a plain key's, which must stay.
const (
	emailSecret = "EMAIL-41c7"
	ssnSecret   = "SSN-0b88"
	nameKept    = "NAME-c3d2"
)

func erasableOpts(fs vfs.FS, ring seal.Keyring) *Options {
	o := encOpts(fs, ring)
	o.ErasableKeys = []string{"email", "pii/*"}
	o.SnapshotEvery = 2 // frames in snapshots and frame files hold sealed values too
	return o
}

// commitSets commits one atom of run id setting each pair of kv.
func commitSets(t testing.TB, db *DB, id string, kv ...string) {
	t.Helper()
	r, err := db.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := new(frame.Delta)
	for i := 0; i < len(kv); i += 2 {
		d.Set(kv[i], []byte(kv[i+1]))
	}
	if err := a.Commit(ctx, d); err != nil {
		t.Fatal(err)
	}
}

// memoryValues decodes every atom of the log under dir with sealer and
// returns, per memory key, how many of its sealed values opened and how
// many were sealed with an erased key; it fails if a value of an erasable
// key is in a delta unsealed.
func memoryValues(t testing.TB, fs vfs.FS, dir string, sealer *record.Sealer) (opened, erased map[string]int) {
	t.Helper()
	log, err := wal.Open(fs.PathJoin(dir, layout.WALDir), &wal.Options{FS: fs, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	dec := &record.Decoder{Comp: frame.NewCompressor(frame.NewDicts()), Sealed: true, Sealer: sealer}
	c, err := record.NewCursor(log, func(id uint64) string { return fmt.Sprint("segment ", id) }, wal.Pos{}, dec)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opened, erased = map[string]int{}, map[string]int{}
	for c.Next() {
		r := c.Record()
		if r.Kind != record.KindAtom || r.Erased {
			continue
		}
		_, body, err := dec.DecodeAtom(nil, r, "segment")
		if err != nil {
			t.Fatal(err)
		}
		d, err := frame.DecodeDelta(body.Delta)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range d.Ops() {
			switch {
			case o.Kind == "set" && (o.Key == "email" || strings.HasPrefix(o.Key, "pii/")):
				t.Fatalf("run %s seq %d sets erasable key %q unsealed", r.Run, r.Seq, o.Key)
			case o.Kind != "set_sealed":
				continue
			}
			switch _, err := sealer.OpenValue(nil, o.Value, o.Key); {
			case err == nil:
				opened[o.Key]++
			case errors.Is(err, seal.ErrErased):
				erased[o.Key]++
			default:
				t.Fatalf("run %s seq %d: the value of %q: %v", r.Run, r.Seq, o.Key, err)
			}
		}
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	return opened, erased
}

// checkMemory checks memory key k of f: want "" means absent.
func checkMemory(t testing.TB, what string, f *frame.Frame, k, want string) {
	t.Helper()
	if f == nil {
		t.Fatalf("%s: no state", what)
	}
	got, ok := f.Memory[k]
	switch {
	case want == "" && ok:
		t.Fatalf("%s: %s = %q, want it absent (erased)", what, k, got)
	case want != "" && string(got) != want:
		t.Fatalf("%s: %s = %q (present %v), want %q", what, k, got, ok, want)
	case len(f.Sealed) != 0:
		t.Fatalf("%s: the state handed out holds sealed values %v", what, f.Sealed)
	}
}

// TestEraseKey: the values of an erasable memory key are sealed with a
// key of their own; EraseKey makes every one of them unrecoverable (in
// the log, frame files, snapshots and a fork), while the run's other keys,
// later values of the key, the chain and verify are whole.
func TestEraseKey(t *testing.T) {
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err := Open("s", erasableOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	storeID := db.storeID
	commitSets(t, db, "r", "email", emailSecret+"-1", "name", nameKept)
	commitSets(t, db, "r", "pii/ssn", ssnSecret)
	commitSets(t, db, "r", "email", emailSecret+"-3")
	commitSets(t, db, "r", "note", "n")
	fork, err := db.Fork(ctx, "r", 3, "f")
	if err != nil {
		t.Fatal(err)
	}
	checkMemory(t, "fork before the erasure", fork.State(), "email", emailSecret+"-3")
	r := mustRun(db, "r")
	checkMemory(t, "r before the erasure", r.State(), "email", emailSecret+"-3")
	if err := db.checkpoint(false); err != nil { // frame files, sealed values in them
		t.Fatal(err)
	}
	sealer, _ := storeSealer(t, fs, "s", storeID, ring)
	if opened, _ := memoryValues(t, fs, "s", sealer); opened["email"] != 2 || opened["pii/ssn"] != 1 {
		t.Fatalf("before the erasure: sealed values opened %v: the check below is blind", opened)
	}

	if _, err := db.EraseKey(ctx, "r", "name", ""); !errors.Is(err, ErrNotErasable) {
		t.Fatalf("EraseKey of a plain key: %v, want ErrNotErasable", err)
	}
	ek, err := db.EraseKey(ctx, "r", "email", "request 9")
	if err != nil {
		t.Fatal(err)
	}
	if ek.Run != "r" || ek.Key != "email" || ek.Seq != 4 || len(ek.KeyNos) != 1 || ek.Reason != "request 9" {
		t.Fatalf("EraseKey = %+v", ek)
	}
	if _, err := db.EraseKey(ctx, "r", "email", ""); !errors.Is(err, ErrNothingToErase) {
		t.Fatalf("a second EraseKey: %v, want ErrNothingToErase", err)
	}
	checkMemory(t, "r after the erasure", r.State(), "email", "")
	checkMemory(t, "r after the erasure", r.State(), "name", nameKept)
	checkMemory(t, "r after the erasure", r.State(), "pii/ssn", ssnSecret)
	for seq := uint64(1); seq <= 4; seq++ {
		f, err := r.StateAt(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		checkMemory(t, fmt.Sprint("r at seq ", seq), f, "email", "")
	}
	checkMemory(t, "the fork after its parent's erasure", fork.State(), "email", "")
	// A value written after the erasure takes a new key, and stays.
	commitSets(t, db, "r", "email", emailSecret+"-new")
	checkMemory(t, "r after a new value", r.State(), "email", emailSecret+"-new")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	sealer, tbl := storeSealer(t, fs, "s", storeID, ring)
	opened, erased := memoryValues(t, fs, "s", sealer)
	if opened["email"] != 1 || erased["email"] != 2 || opened["pii/ssn"] != 1 {
		t.Fatalf("after the erasure: sealed values opened %v, erased %v", opened, erased)
	}
	scope := seal.MemoryScope("r", "email")
	var states []bool
	for _, e := range tbl.Entries() {
		if e.Scope == scope {
			states = append(states, e.Erased)
		}
	}
	if len(states) != 2 || !states[0] || states[1] {
		t.Fatalf("KEYS entries of r's email (erased?): %v, want the erased one and the new one", states)
	}
	// No file holds a value in the clear; the frame files and snapshots
	// hold the erased values sealed, which their frames carry unopened.
	for name, b := range storeFiles(t, fs, "s") {
		for _, secret := range []string{emailSecret, ssnSecret, nameKept} {
			if bytes.Contains(b, []byte(secret)) {
				t.Fatalf("%s holds %q in the clear", name, secret)
			}
		}
	}

	for _, ring := range []seal.Keyring{ring, nil} {
		rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs, Deep: ring != nil, Keyring: ring})
		if err != nil || !rep.OK {
			t.Fatalf("verify (keyring %v): %v %+v", ring != nil, err, rep.Failures)
		}
		if len(rep.ErasedKeys) != 1 || rep.ErasedKeys[0].RunID != "r" || rep.ErasedKeys[0].Key != "email" || rep.ErasedKeys[0].Reason != "request 9" {
			t.Fatalf("verify (keyring %v): erased keys %+v", ring != nil, rep.ErasedKeys)
		}
	}

	db, err = Open("s", erasableOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	r = mustRun(db, "r")
	checkMemory(t, "r after a restart", r.State(), "email", emailSecret+"-new")
	checkMemory(t, "r after a restart", r.State(), "pii/ssn", ssnSecret)
	f3, err := r.StateAt(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	checkMemory(t, "r at seq 3 after a restart", f3, "email", "")
	checkMemory(t, "the fork after a restart", mustRun(db, "f").State(), "email", "")

	// Erasing the run whole erases its memory keys' data keys too.
	for _, id := range []string{"r", "f"} {
		if err := mustRun(db, id).End(ctx, StatusCompleted, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Erase(ctx, "f", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Erase(ctx, "r", ""); err != nil {
		t.Fatal(err)
	}
	for _, e := range db.KeyEntries() {
		if seal.RunOf(e.Scope) == "r" && !e.Erased {
			t.Fatalf("after r's erasure KEYS still holds a live key of scope %q", e.Scope)
		}
	}
	if _, err := db.EraseKey(ctx, "r", "email", ""); !errors.Is(err, ErrRunDeleted) {
		t.Fatalf("EraseKey of an erased run: %v, want ErrRunDeleted", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs, Deep: true, Keyring: ring})
	if err != nil || !rep.OK {
		t.Fatalf("verify after the run's erasure: %v %+v", err, rep.Failures)
	}

	// Options: erasable keys need a keyring.
	if _, err := Open("p", &Options{FS: vfs.NewMem(), ErasableKeys: []string{"email"}}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("ErasableKeys without a Keyring: %v, want ErrInvalidOptions", err)
	}
}

// TestEraseKeyPowerLoss cuts the power at every operation of an EraseKey,
// with another run committing beside it, in both durability modes: after
// the restart the key is erased (its values unreadable, KEYS without the
// keys its record names) or not at all (its values whole, and erasable
// then); the other keys and runs lose nothing acknowledged.
func TestEraseKeyPowerLoss(t *testing.T) {
	base := vfs.NewCrashableMem()
	ring := testRing(t, "k1", "k1")
	o := erasableOpts(base, ring)
	o.NoSync = false
	db, err := Open("s", o)
	if err != nil {
		t.Fatal(err)
	}
	commitSets(t, db, "r", "email", emailSecret, "name", nameKept)
	commitSets(t, db, "r", "pii/ssn", ssnSecret)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	everyPowerCut(t, 3, 1, "the trial", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("crash at op %d: "+format, append([]any{target}, args...)...)
		}
		opts := func(fs vfs.FS) *Options { return erasableOpts(fs, ring) }
		db, fs, erasedAck, ops := cutBeside(t, base, opts, mode, pct, target, func(db *DB) error {
			_, err := db.EraseKey(ctx, "r", "email", "")
			return err
		})
		o := opts(fs)
		o.NoSync, o.Durability = false, mode
		r := mustRun(db, "r")
		f := r.State()
		checkMemory(t, "r after the restart", f, "name", nameKept)
		checkMemory(t, "r after the restart", f, "pii/ssn", ssnSecret)
		_, present := f.Memory["email"]
		if erasedAck && present {
			fail("EraseKey returned nil, the value is readable after the restart")
		}
		keyLive := false
		for _, e := range db.KeyEntries() {
			if e.Scope == seal.MemoryScope("r", "email") && !e.Erased {
				keyLive = true
			}
		}
		if keyLive != present {
			fail("email present %v, its data key live %v", present, keyLive)
		}
		if err := db.Close(); err != nil {
			fail("close: %v", err)
		}
		// What Open left: an erase-key record in the log exactly when the
		// key is erased (a durable record with the key live is an
		// erasure Open failed to finish).
		verifyErased := func(after string, want bool) {
			t.Helper()
			for _, ring := range []seal.Keyring{ring, nil} {
				rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs, Deep: ring != nil, Keyring: ring})
				if err != nil || !rep.OK {
					fail("verify %s (keyring %v): %v %+v", after, ring != nil, err, rep.Failures)
				}
				if (len(rep.ErasedKeys) > 0) != want {
					fail("verify %s (keyring %v): erased keys %+v, want some %v", after, ring != nil, rep.ErasedKeys, want)
				}
			}
		}
		verifyErased("after the restart", !present)
		if present {
			checkMemory(t, "r, not erased", f, "email", emailSecret)
			db, err := Open("s", o)
			if err != nil {
				fail("reopen: %v", err)
			}
			if _, err := db.EraseKey(ctx, "r", "email", ""); err != nil {
				fail("EraseKey after the restart: %v", err)
			}
			if err := db.Close(); err != nil {
				fail("close: %v", err)
			}
			verifyErased("after a second EraseKey", true)
		}
		return ops
	})
}

// TestEraseKeyTamper: verify tells a memory key erased by policy from one
// whose data key was dropped by hand, from a KEYS older than the erasure
// (which the engine then erases again), and from a forged erase-key
// record; Open erases no key that a record names for another memory key.
func TestEraseKeyTamper(t *testing.T) {
	ring := testRing(t, "k1", "k1")
	store := func(t *testing.T) (vfs.FS, *DB) {
		fs := vfs.NewMem()
		db, err := Open("s", erasableOpts(fs, ring))
		if err != nil {
			t.Fatal(err)
		}
		commitSets(t, db, "r", "email", emailSecret, "pii/ssn", ssnSecret)
		return fs, db
	}
	failing := func(t *testing.T, fs vfs.FS, detail string) {
		t.Helper()
		for _, rep := range verifyBoth(t, fs, ring) {
			found := false
			for _, f := range rep.Failures {
				found = found || f.RunID == "r" && strings.Contains(f.Detail, detail)
			}
			if rep.OK || !found {
				t.Fatalf("verify: ok %v, failures %+v; want one saying %q", rep.OK, rep.Failures, detail)
			}
		}
	}
	keyNo := func(db *DB, key string) uint64 {
		for _, e := range db.KeyEntries() {
			if e.Scope == seal.MemoryScope("r", key) && !e.Erased {
				return e.No
			}
		}
		t.Fatalf("no live data key of %q", key)
		return 0
	}

	t.Run("key erased without a record", func(t *testing.T) {
		fs, db := store(t)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		tbl := keysOf(t, fs, db)
		tbl.Erase(seal.MemoryScope("r", "email"))
		putKeys(t, fs, db, tbl)
		failing(t, fs, "no valid erase-key record names it")
	})

	t.Run("forged record", func(t *testing.T) {
		fs, db := store(t)
		r := mustRun(db, "r")
		r.mu.Lock()
		seq, head, _ := r.chainHeadLocked()
		r.mu.Unlock()
		nos := []uint64{keyNo(db, "email")}
		at := time.Now().UnixNano()
		// Its link covers another reason than the one it holds.
		link := db.hasher.Link("r", seq, head, record.AppendEraseKeyPayload(nil, at, "email", nos, "the real reason"))
		note, _ := gcCore{db}.Signing().Note("r", seq, link, false)
		if _, err := db.append(ctx, record.AppendEraseKey(nil, "r", seq, head, link, at, "email", nos, "a forged reason", note)); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		for _, rep := range verifyBoth(t, fs, ring) {
			if rep.OK || !failsAt(rep, "r", seq) || len(rep.ErasedKeys) != 0 {
				t.Fatalf("a forged erase-key record: ok %v, failures %+v, erased keys %+v", rep.OK, rep.Failures, rep.ErasedKeys)
			}
		}
	})

	t.Run("record naming another key's data key", func(t *testing.T) {
		fs, db := store(t)
		r := mustRun(db, "r")
		r.mu.Lock()
		seq, head, _ := r.chainHeadLocked()
		r.mu.Unlock()
		nos := []uint64{keyNo(db, "pii/ssn")} // the record says "email"
		at := time.Now().UnixNano()
		link := db.hasher.Link("r", seq, head, record.AppendEraseKeyPayload(nil, at, "email", nos, "x"))
		note, _ := gcCore{db}.Signing().Note("r", seq, link, false)
		if _, err := db.append(ctx, record.AppendEraseKey(nil, "r", seq, head, link, at, "email", nos, "x", note)); err != nil {
			t.Fatal(err)
		}
		crash(db) // the record is after the replay position: Open reads it
		db, err := Open("s", erasableOpts(fs, ring))
		if err != nil {
			t.Fatal(err)
		}
		checkMemory(t, "r after Open read the record", mustRun(db, "r").State(), "pii/ssn", ssnSecret)
		checkMemory(t, "r after Open read the record", mustRun(db, "r").State(), "email", emailSecret)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		failing(t, fs, "does not hold for that key")
	})

	t.Run("older KEYS", func(t *testing.T) {
		fs, db := store(t)
		old := keysOf(t, fs, db)
		if _, err := db.EraseKey(ctx, "r", "email", ""); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		putKeys(t, fs, db, old)
		failing(t, fs, "still holds its data key")
		// The engine erases the key again once it has read the log's
		// erase-key records.
		db, err := Open("s", erasableOpts(fs, ring))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.checkRegistry(); err != nil {
			t.Fatal(err)
		}
		checkMemory(t, "r after the engine erased the key again", mustRun(db, "r").State(), "email", "")
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		for _, rep := range verifyBoth(t, fs, ring) {
			if !rep.OK || len(rep.ErasedKeys) != 1 {
				t.Fatalf("after the engine erased the key again: %+v, erased keys %+v", rep.Failures, rep.ErasedKeys)
			}
		}
	})
}

// TestEraseKeyDeepVerify: a deep verify opens every sealed value; one
// sealed for another memory key (moved) fails it; Commit refuses a delta
// that holds set_sealed ops of its own.
func TestEraseKeyDeepVerify(t *testing.T) {
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err := Open("s", erasableOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	commitSets(t, db, "r", "email", emailSecret, "pii/ssn", ssnSecret)
	r := mustRun(db, "r")
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).SetSealed("email", []byte("not sealed by the engine"))); !errors.Is(err, ErrInvalidDelta) {
		t.Fatalf("Commit of a set_sealed op: %v, want ErrInvalidDelta", err)
	}
	if err := a.Fail(ctx, "refused"); err != nil {
		t.Fatal(err)
	}
	// The value of pii/ssn, sealed for its key, set under email.
	moved, err := db.sealer.SealValue(nil, []byte(ssnSecret), "r", "pii/ssn")
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	seq, prev := r.mu.lastSeq+1, r.mu.head
	r.mu.Unlock()
	body := record.AppendAtomBody(nil, nil, frame.AppendDelta(nil, new(frame.Delta).SetSealed("email", moved)))
	sealed, err := db.sealer.SealAtomBody(nil, "r", seq, db.comp.Compress(nil, body, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	head := db.hasher.Link("r", seq, prev, sealed)
	if _, err := db.append(ctx, append(record.AppendAtomHeader(nil, "r", seq, head), sealed...)); err != nil {
		t.Fatal(err)
	}
	crash(db)
	rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs, Deep: true, Keyring: ring})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range rep.Failures {
		found = found || f.RunID == "r" && f.Seq == seq && strings.Contains(f.Detail, `sealed value of memory key "email" does not open`)
	}
	if rep.OK || !found {
		t.Fatalf("deep verify of a moved sealed value: ok %v, failures %+v", rep.OK, rep.Failures)
	}
	// Without the keyring the chain is whole: the value is not opened.
	if rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs}); err != nil || !rep.OK {
		t.Fatalf("verify without the keyring: %v %+v", err, rep.Failures)
	}
}

// TestEraseKeyRollback: a rollback returns a run to a frame whose
// erasable values stay sealed (its replace_frame carries them as they
// are): the value of the seq it returns to reads back, and an erasure
// after the rollback reaches it too.
func TestEraseKeyRollback(t *testing.T) {
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err := Open("s", erasableOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	commitSets(t, db, "r", "email", emailSecret+"-1", "name", nameKept)
	commitSets(t, db, "r", "email", emailSecret+"-2")
	r := mustRun(db, "r")
	if _, err := r.Rollback(ctx, 1, RollbackOptions{Exec: func(Undo) ledger.Exec { return nil }}); err != nil {
		t.Fatal(err)
	}
	checkMemory(t, "r after the rollback to seq 1", r.State(), "email", emailSecret+"-1")
	if _, err := db.EraseKey(ctx, "r", "email", ""); err != nil {
		t.Fatal(err)
	}
	checkMemory(t, "r after the erasure", r.State(), "email", "")
	checkMemory(t, "r after the erasure", r.State(), "name", nameKept)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, rep := range verifyBoth(t, fs, ring) {
		if !rep.OK || len(rep.ErasedKeys) != 1 {
			t.Fatalf("verify: %+v, erased keys %+v", rep.Failures, rep.ErasedKeys)
		}
	}
}

// TestDataKeysConcurrent: runs created and erasable keys first written by
// many goroutines at once (their data keys added to KEYS in shared
// writes) each get a key that KEYS holds durably: every value reads back
// after a restart.
func TestDataKeysConcurrent(t *testing.T) {
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err := Open("s", erasableOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	const runs, keys = 8, 6
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := db.Run(ctx, fmt.Sprint("run-", i))
			for k := 0; k < keys && err == nil; k++ {
				var a *Atom
				if a, err = r.Begin(ctx); err == nil {
					err = a.Commit(ctx, new(frame.Delta).Set(fmt.Sprint("pii/", k), []byte(fmt.Sprint("v", i, "-", k))))
				}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	crash(db)
	db, err = Open("s", erasableOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	scopes := map[string]int{}
	for _, e := range db.KeyEntries() {
		scopes[e.Scope]++
	}
	for i := range runs {
		f := mustRun(db, fmt.Sprint("run-", i)).State()
		for k := range keys {
			checkMemory(t, fmt.Sprint("run-", i), f, fmt.Sprint("pii/", k), fmt.Sprint("v", i, "-", k))
			if n := scopes[seal.MemoryScope(fmt.Sprint("run-", i), fmt.Sprint("pii/", k))]; n != 1 {
				t.Fatalf("KEYS holds %d keys of run-%d's pii/%d, want 1", n, i, k)
			}
		}
	}
}

// TestEraseRunMemoryKeyLive: a key table that holds a memory key's data key
// live for a run erased whole is reported: what the key sealed still
// opens.
func TestEraseRunMemoryKeyLive(t *testing.T) {
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err := Open("s", erasableOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	commitSets(t, db, "r", "email", emailSecret)
	old := keysOf(t, fs, db)
	if err := mustRun(db, "r").End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Erase(ctx, "r", ""); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// The key table from before the erasure, with the run's own key
	// erased and its memory key's left live.
	tbl := old.Clone()
	tbl.Erase("r")
	putKeys(t, fs, db, tbl)
	for _, rep := range verifyBoth(t, fs, ring) {
		found := false
		for _, f := range rep.Failures {
			found = found || f.RunID == "r" && strings.Contains(f.Detail, `memory key "email": what it sealed can still be opened`)
		}
		if rep.OK || !found {
			t.Fatalf("a memory key's data key live for an erased run: ok %v, failures %+v", rep.OK, rep.Failures)
		}
	}
}

// TestEraseKeyReplaceFrame: a caller's replace_frame op, built from the
// state it read (its values in the clear), has its erasable values sealed
// as a set's are, so that an erasure reaches them; one whose frame holds
// sealed values of its own is refused.
func TestEraseKeyReplaceFrame(t *testing.T) {
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err := Open("s", erasableOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	commitSets(t, db, "r", "email", emailSecret+"-1", "name", nameKept)
	r := mustRun(db, "r")
	f := r.State()
	f.Memory["email"] = []byte(emailSecret + "-2")
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	forged := f.Clone()
	forged.Sealed = map[string][]byte{"pii/x": []byte("not the engine's")}
	if err := a.Commit(ctx, new(frame.Delta).ReplaceFrame(forged)); !errors.Is(err, ErrInvalidDelta) {
		t.Fatalf("a replace_frame holding sealed values: %v, want ErrInvalidDelta", err)
	}
	if err := a.Commit(ctx, new(frame.Delta).ReplaceFrame(f)); err != nil {
		t.Fatal(err)
	}
	checkMemory(t, "r after its replace_frame", r.State(), "email", emailSecret+"-2")
	if _, err := db.EraseKey(ctx, "r", "email", ""); err != nil {
		t.Fatal(err)
	}
	checkMemory(t, "r after the erasure", r.State(), "email", "")
	checkMemory(t, "r after the erasure", r.State(), "name", nameKept)
	for name, b := range storeFiles(t, fs, "s") {
		if bytes.Contains(b, []byte(emailSecret)) {
			t.Fatalf("%s holds the value in the clear", name)
		}
	}
}

// TestOlderKeysMemoryKey: a KEYS older than a memory key's first value
// (the run's key in it, the memory key's not) opens, since no file Open
// reads names memory keys; the run's frame coming into memory is then
// refused as KEYS's damage, so that neither State nor a Commit goes on
// past the value it cannot open.
func TestOlderKeysMemoryKey(t *testing.T) {
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err := Open("s", erasableOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	commitSets(t, db, "r", "name", nameKept)
	old := keysOf(t, fs, db)
	commitSets(t, db, "r", "email", emailSecret)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	putKeys(t, fs, db, old)
	db, err = Open("s", erasableOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := mustRun(db, "r")
	if f, err := r.StateE(); f != nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), layout.KeysName) {
		t.Fatalf("StateE with a KEYS that lacks the memory key's data key: %v, %v; want a corruption naming KEYS", f, err)
	}
	a, err := r.Begin(ctx)
	if err == nil {
		err = a.Commit(ctx, new(frame.Delta).Set("email", []byte("new")))
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a commit past the value that does not open: %v, want ErrCorrupt", err)
	}
}
