package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

// The agent data of the erasure tests: goneSecret is run gone's, which
// Erase must make unrecoverable; keptSecret is run kept's, which must
// stay; sharedResult is the result of an action with an explicit key
// that both run, which belongs to the store and stays.
const (
	goneSecret   = "GONE-5a1f"
	keptSecret   = "KEPT-93b0"
	sharedResult = `"SHARED-7d2c"`
)

// eraseWorkload writes run gone (ended, its atoms, default-key actions,
// an explicit-key action, a message to kept that kept never consumes, and
// its end result all holding goneSecret) and run kept (active, repeating
// gone's explicit-key action, holding keptSecret). It returns the
// fingerprints of gone's default-key actions.
func eraseWorkload(t testing.TB, db *DB) []ledger.Fingerprint {
	t.Helper()
	ctx := context.Background()
	var fps []ledger.Fingerprint
	for _, id := range []string{"gone", "kept"} {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		secret := keptSecret
		if id == "gone" {
			secret = goneSecret
		}
		for i := range 4 {
			a, err := r.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			act := ledger.Action{Tool: "lookup", Args: []byte(fmt.Sprintf(`{"q":"%s-%d"}`, secret, i))}
			res, err := a.Do(ctx, act, func(context.Context, string) ([]byte, error) {
				return []byte(fmt.Sprintf(`"result %s %d"`, secret, i)), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if id == "gone" {
				in, err := ledger.NewIntent(act, id, a.Seq(), 0)
				if err != nil {
					t.Fatal(err)
				}
				fps = append(fps, in.Fingerprint)
			}
			d := new(frame.Delta).Set(fmt.Sprintf("key-%d", i), []byte(secret+" value")).ToolOutput(fmt.Sprint("call-", i), "lookup", res)
			if i == 1 {
				shared, err := a.Do(ctx, ledger.Action{Tool: "charge", Key: "shared-1", Args: []byte(`{"amount":7}`)},
					func(context.Context, string) ([]byte, error) {
						if id == "kept" {
							t.Error("the explicit-key action ran twice")
						}
						return []byte(sharedResult), nil
					})
				if err != nil || string(shared) != sharedResult {
					t.Fatalf("run %s: explicit-key action: %q, %v", id, shared, err)
				}
				d.Set("charge", shared)
			}
			if id == "gone" && i == 2 {
				if err := a.Send(ctx, "kept", []byte("message "+goneSecret)); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Commit(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		if id == "gone" {
			if err := r.End(ctx, StatusCompleted, []byte("final "+goneSecret)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return fps
}

// checkKept checks run kept's state, which no erasure of gone may touch.
func checkKept(t testing.TB, db *DB) {
	t.Helper()
	r, err := db.Run(context.Background(), "kept")
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 4; seq++ {
		f, err := r.StateAt(context.Background(), seq)
		if err != nil {
			t.Fatalf("kept at seq %d: %v", seq, err)
		}
		if got := string(f.Memory[fmt.Sprintf("key-%d", seq-1)]); got != keptSecret+" value" {
			t.Fatalf("kept at seq %d: key-%d = %q", seq, seq-1, got)
		}
		if seq >= 2 && string(f.Memory["charge"]) != sharedResult {
			t.Fatalf("kept at seq %d: the shared result is %q", seq, f.Memory["charge"])
		}
	}
}

// storeSealer opens KEYS of the store at dir with ring, as a reader of
// the store would.
func storeSealer(t testing.TB, fs vfs.FS, dir string, id [16]byte, ring seal.Keyring) (*record.Sealer, *seal.Table) {
	t.Helper()
	b, err := layout.ReadFile(fs, fs.PathJoin(dir, layout.KeysName))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := layout.ParseKeys("KEYS", id, b)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := tbl.Open(ring)
	if err != nil {
		t.Fatal(err)
	}
	return &record.Sealer{Store: id, Keys: ks}, tbl
}

// readableRuns decodes every record of the log under dir with sealer and
// returns, per run, how many of its records opened (but those of actions
// with explicit keys, which are the store's) and how many were sealed with
// an erased key.
func readableRuns(t testing.TB, fs vfs.FS, dir string, sealer *record.Sealer) (opened, erased map[string]int) {
	t.Helper()
	log, err := wal.Open(fs.PathJoin(dir, layout.WALDir), &wal.Options{FS: fs, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	dec := &record.Decoder{Comp: frame.NewCompressor(frame.NewDicts()), Ledger: true, Sealed: true, Sealer: sealer}
	c, err := record.NewCursor(log, func(id uint64) string { return fmt.Sprint("segment ", id) }, wal.Pos{}, dec)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opened, erased = map[string]int{}, map[string]int{}
	explicit := map[ledger.Fingerprint]bool{} // the store's, not the run's
	for c.Next() {
		r := c.Record()
		switch {
		case r.Erased:
			erased[r.Run]++
		case r.Intent != nil && r.Intent.ExplicitKey():
			explicit[r.Intent.Fingerprint] = true
		case r.Cert != nil && explicit[r.Cert.Fingerprint]:
		case r.Opened:
			opened[r.Run]++
		}
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	return opened, erased
}

// TestErase: Erase of an ended run of an encrypted store leaves nothing of
// it that the keyring can open, in the store or in an earlier copy of its
// log, while the other runs, the action with an explicit key that both
// ran, the chain and verify (with the keyring and without) are whole; an
// erased run is refused as erased, and Erase is refused where it cannot
// erase.
func TestErase(t *testing.T) {
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err := Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	fps := eraseWorkload(t, db)
	storeID := db.storeID
	for _, fp := range fps {
		if _, ok := db.ledger.Lookup(fp); !ok {
			t.Fatalf("action %x of gone is not in the ledger before the erasure: the check below is blind", fp[:8])
		}
	}
	// A copy of the log as it was: what a backup or a replica holds.
	backup := vfs.NewMem()
	if err := db.checkpoint(false); err != nil {
		t.Fatal(err)
	}
	for name, b := range storeFiles(t, fs, "s/wal") {
		if err := backup.MkdirAll("s/wal", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := layout.WriteFileAtomic(backup, name, b, true); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := db.Erase(ctx, "kept", ""); !errors.Is(err, ErrRunNotEnded) {
		t.Fatalf("Erase of an active run: %v, want ErrRunNotEnded", err)
	}
	d, err := db.Erase(ctx, "gone", "user request 17")
	if err != nil {
		t.Fatal(err)
	}
	if d.Erasure == nil || d.Erasure.Reason != "user request 17" || d.Erasure.Seq != d.Seq || d.Seq != 6 {
		t.Fatalf("Erase = %+v (erasure %+v)", d, d.Erasure)
	}
	if again, err := db.Erase(ctx, "gone", "again"); err != nil || again.Erasure == nil || *again.Erasure != *d.Erasure {
		t.Fatalf("a second Erase: %+v, %v; want the first's", again, err)
	}
	if _, err := db.Run(ctx, "gone"); !errors.Is(err, ErrRunErased) || !errors.Is(err, ErrRunDeleted) {
		t.Fatalf("Run of the erased run: %v, want ErrRunErased", err)
	}
	for _, fp := range fps {
		if _, ok := db.ledger.Lookup(fp); ok {
			t.Fatalf("the ledger still knows action %x of the erased run", fp[:8])
		}
	}
	if inbox, err := mustRun(db, "kept").Inbox(ctx); err != nil || len(inbox) != 0 {
		t.Fatalf("kept's inbox after gone's erasure: %+v, %v", inbox, err)
	}
	checkKept(t, db)
	commitOne(t, db, "kept", "after", "the erasure")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// KEYS keeps gone's entry, erased, without its wrapped key.
	sealer, tbl := storeSealer(t, fs, "s", storeID, ring)
	goneErased := false
	for _, e := range tbl.Entries() {
		if e.Scope == "gone" {
			goneErased = e.Erased && len(e.Wrapped) == 0
		}
		if e.Erasing {
			t.Fatalf("KEYS still marks %q erasing", e.Scope)
		}
	}
	if !goneErased {
		t.Fatalf("KEYS: gone's key is not erased: %+v", tbl.Entries())
	}
	// Nothing of gone opens, in the log or in the copy of it.
	for _, dir := range []struct {
		fs   vfs.FS
		name string
	}{{fs, "the store"}, {backup, "the earlier copy of the log"}} {
		opened, erased := readableRuns(t, dir.fs, "s", sealer)
		if opened["gone"] != 0 || erased["gone"] < 4+4+1 || opened["kept"] < 4 {
			t.Fatalf("%s: records opened %v, erased %v", dir.name, opened, erased)
		}
	}
	// The derived files sealed with the store's key (ledger table, INBOX)
	// hold nothing of gone; no file holds gone's data in the clear, and
	// gone has no frame file.
	files := storeFiles(t, fs, "s")
	for name, b := range files {
		if bytes.Contains(b, []byte(goneSecret)) || bytes.Contains(b, []byte(keptSecret)) {
			t.Fatalf("%s holds agent data in the clear", name)
		}
		base := name[strings.LastIndexByte(name, '/')+1:]
		if strings.HasPrefix(base, "ledger-") || base == layout.InboxName {
			kind := record.PlaceLedgerTable
			if base == layout.InboxName {
				kind = record.PlaceInbox
			}
			opened := false
			for gen := uint64(1); gen < 64 && !opened; gen++ {
				if plain, err := sealer.OpenStoreFile(b, kind, gen); err == nil {
					opened = true
					if bytes.Contains(plain, []byte(goneSecret)) {
						t.Fatalf("%s holds the erased run's data", name)
					}
				}
			}
			if !opened {
				t.Fatalf("%s does not open with the store's key: the check is blind", name)
			}
		}
	}
	if _, ok := files["s/"+layout.FramesDir+"/"+layout.FrameFileBase("gone")]; ok {
		t.Fatal("the erased run's frame file is still there")
	}

	// Verify, with the keyring (deep) and without: the chain is whole,
	// the run is listed erased, not damaged.
	for _, ring := range []seal.Keyring{ring, nil} {
		rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs, Deep: ring != nil, Keyring: ring})
		if err != nil || !rep.OK {
			t.Fatalf("verify (keyring %v): %v %+v", ring != nil, err, rep.Failures)
		}
		if len(rep.Deleted) != 1 || rep.Deleted[0].RunID != "gone" || rep.Deleted[0].Erasure == nil {
			t.Fatalf("verify (keyring %v): deleted %+v", ring != nil, rep.Deleted)
		}
	}

	db, err = Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	checkKept(t, db)
	if _, err := db.Run(ctx, "gone"); !errors.Is(err, ErrRunErased) {
		t.Fatalf("Run of the erased run after a restart: %v", err)
	}
	del, err := db.Deleted()
	if err != nil || len(del) != 1 || del[0].Erasure == nil || *del[0].Erasure != *d.Erasure {
		t.Fatalf("Deleted after a restart: %+v, %v", del, err)
	}
	if _, err := db.GC(ctx); err != nil {
		t.Fatalf("GC over the erased run's records: %v", err)
	}
	checkKept(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// A plaintext store has no key to shred.
	pdb, err := Open("p", testOptions(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()
	commitOne(t, pdb, "r", "k", "v")
	if err := mustRun(pdb, "r").End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pdb.Erase(ctx, "r", ""); !errors.Is(err, ErrKeyring) {
		t.Fatalf("Erase on a plaintext store: %v, want ErrKeyring", err)
	}
}

// TestEraseDeletedAndForks: a run deleted earlier is erased after its
// deletion; a run with a fork that is not erased is refused until the
// fork is erased.
func TestEraseDeletedAndForks(t *testing.T) {
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err := Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	commitOne(t, db, "parent", "k", goneSecret)
	commitOne(t, db, "parent", "k2", goneSecret)
	child, err := db.Fork(ctx, "parent", 1, "child")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Run{mustRun(db, "parent"), child} {
		if err := r.End(ctx, StatusCompleted, nil); err != nil {
			t.Fatal(err)
		}
	}
	del, err := db.Delete(ctx, "child")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Erase(ctx, "parent", ""); !errors.Is(err, ErrRunHasForks) || !strings.Contains(err.Error(), `"child"`) {
		t.Fatalf("Erase of a run with a deleted fork not erased: %v, want ErrRunHasForks naming it", err)
	}
	ec, err := db.Erase(ctx, "child", "")
	if err != nil {
		t.Fatal(err)
	}
	if ec.Seq != del[0].Seq || ec.Erasure == nil || ec.Erasure.Seq != del[0].Seq+1 || ec.Reason != del[0].Reason {
		t.Fatalf("Erase of a deleted run: %+v (erasure %+v), deletion %+v", ec, ec.Erasure, del[0])
	}
	if _, err := db.Erase(ctx, "parent", ""); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ring := range []seal.Keyring{ring, nil} {
		rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs, Deep: ring != nil, Keyring: ring})
		if err != nil || !rep.OK {
			t.Fatalf("verify (keyring %v): %v %+v", ring != nil, err, rep.Failures)
		}
		if len(rep.Deleted) != 2 || rep.Deleted[0].Erasure == nil || rep.Deleted[1].Erasure == nil {
			t.Fatalf("verify (keyring %v): deleted %+v", ring != nil, rep.Deleted)
		}
	}
	db, err = Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.Deleted()
	if err != nil || len(got) != 2 || got[0].ID != "child" || got[0].Seq != del[0].Seq || got[0].Erasure == nil || got[0].Erasure.Seq != del[0].Seq+1 {
		t.Fatalf("Deleted after a restart: %+v, %v", got, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestErasePowerLoss cuts the power at every filesystem operation of an
// Erase, with a run committing beside it, in both durability modes: after
// the restart the run is either whole and erasable, or erased, never half
// (Open finishes an erasure whose record is durable, and undoes one whose
// record is not); an Erase that returned nil is erased; the other runs
// are whole; and the store verifies with the keyring and without.
func TestErasePowerLoss(t *testing.T) {
	base := vfs.NewCrashableMem()
	ring := testRing(t, "k1", "k1")
	o := encOpts(base, ring)
	o.NoSync = false
	db, err := Open("s", o)
	if err != nil {
		t.Fatal(err)
	}
	eraseWorkload(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	everyPowerCut(t, 4, 2, "the trial", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		return eraseTrial(t, base, ring, mode, pct, target)
	})
}

// cutBeside opens the store "s" of base (options of opts, fsync on, in
// mode) over a power cut at operation target, runs op on it with a run
// "live" committing beside it, and reopens what the cut left: it returns
// the reopened store, its file system, whether op returned nil before the
// cut began, and how many operations the trial counted (everyPowerCut's
// bound). It fails the test if an acknowledged atom of "live" is lost.
func cutBeside(t *testing.T, base *vfs.MemFS, opts func(vfs.FS) *Options, mode Durability, pct int, target uint64, op func(*DB) error) (*DB, vfs.FS, bool, uint64) {
	t.Helper()
	mem, cut := newPowerCut(base, pct, target)
	o := opts(errorfs.Wrap(cut.mem, cut))
	o.NoSync, o.Durability = false, mode
	acked := uint64(0) // the live run's last acknowledged seq
	done := false
	if db, err := Open("s", o); err == nil {
		beside := agentBeside(db, "live", rand.New(rand.NewPCG(1, target)), 3, cut, &acked)
		err := op(db)
		done = err == nil && !cut.cutBefore()
		<-beside
		db.Close()
	} else if !cut.cutBefore() {
		t.Fatalf("crash at op %d: open: %v", target, err)
	}
	ops := cut.n.Load()
	fs := cut.survivor(mem)
	o = opts(fs)
	o.NoSync, o.Durability = false, mode
	db, err := Open("s", o)
	if err != nil {
		t.Fatalf("crash at op %d: reopen: %v", target, err)
	}
	if acked > 0 {
		if live, err := db.Run(ctx, "live"); err != nil || live.LastSeq() < acked {
			t.Fatalf("crash at op %d: live run after the restart: %v; %d were acknowledged", target, err, acked)
		}
	}
	return db, fs, done, ops
}

func eraseTrial(t *testing.T, base *vfs.MemFS, ring seal.Keyring, mode Durability, pct int, target uint64) uint64 {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("crash at op %d: "+format, append([]any{target}, args...)...)
	}
	opts := func(fs vfs.FS) *Options { return encOpts(fs, ring) }
	db, fs, erased, ops := cutBeside(t, base, opts, mode, pct, target, func(db *DB) error {
		_, err := db.Erase(ctx, "gone", "")
		return err
	})
	checkKept(t, db)
	del, err := db.Deleted()
	if err != nil {
		fail("Deleted: %v", err)
	}
	for _, e := range db.KeyEntries() {
		if e.Erasing {
			fail("KEYS still marks %q erasing after Open", e.Scope)
		}
		if e.Scope == "gone" && e.Erased != (len(del) == 1) {
			fail("gone: key erased %v, deleted runs %+v", e.Erased, del)
		}
	}
	switch _, err := db.Run(ctx, "gone"); {
	case errors.Is(err, ErrRunErased):
	case err != nil:
		fail("run gone: %v", err)
	case erased:
		fail("Erase returned nil, run gone is there after the restart")
	default:
		// Not erased: whole, and erasable now.
		if f, err := mustRun(db, "gone").StateE(); err != nil || string(f.Memory["key-3"]) != goneSecret+" value" {
			fail("gone, not erased, after the restart: %v", err)
		}
		if _, err := db.Erase(ctx, "gone", ""); err != nil {
			fail("Erase after the restart: %v", err)
		}
	}
	if err := db.Close(); err != nil {
		fail("close: %v", err)
	}
	for _, ring := range []seal.Keyring{ring, nil} {
		rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs, Deep: ring != nil, Keyring: ring})
		if err != nil || !rep.OK {
			fail("verify (keyring %v): %v %+v", ring != nil, err, rep.Failures)
		}
		if len(rep.Deleted) != 1 || rep.Deleted[0].Erasure == nil {
			fail("verify (keyring %v): deleted %+v", ring != nil, rep.Deleted)
		}
	}
	return ops
}

// endedRuns opens an encrypted store at dir on fs with runs ids, each with
// one atom and ended.
func endedRuns(t *testing.T, fs vfs.FS, ring seal.Keyring, ids ...string) *DB {
	t.Helper()
	db, err := Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		commitOne(t, db, id, "k", goneSecret)
		if err := mustRun(db, id).End(ctx, StatusCompleted, nil); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// verifyBoth verifies the store without the keyring and deeply with it,
// and returns both reports.
func verifyBoth(t *testing.T, fs vfs.FS, ring seal.Keyring) []*chain.Report {
	t.Helper()
	var out []*chain.Report
	for _, ring := range []seal.Keyring{nil, ring} {
		rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs, Deep: ring != nil, Keyring: ring})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rep)
	}
	return out
}

// keysOf reads KEYS of the store at "s" on fs, as a tool editing it would.
func keysOf(t *testing.T, fs vfs.FS, db *DB) *seal.Table {
	t.Helper()
	b, err := layout.ReadFile(fs, "s/"+layout.KeysName)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := layout.ParseKeys("KEYS", db.storeID, b)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// putKeys replaces KEYS of the store at "s" on fs by tbl: a key table
// changed by hand, or restored from a copy.
func putKeys(t *testing.T, fs vfs.FS, db *DB, tbl *seal.Table) {
	t.Helper()
	if err := layout.WriteFileAtomic(fs, "s/"+layout.KeysName, layout.MarshalKeys(db.storeID, tbl), true); err != nil {
		t.Fatal(err)
	}
}

// TestEraseTamper: verify tells an erasure by policy from tampering. A
// delete record relabelled as an erasure (or an erase record as a plain
// deletion) fails its link; a key erased in KEYS without an erase record
// is reported; a KEYS older than an erasure, which still opens the erased
// run, is reported; a KEYS that still marks the key erasing is an
// unfinished erasure (no failure), which the next Open finishes.
func TestEraseTamper(t *testing.T) {
	ring := testRing(t, "k1", "k1")

	t.Run("relabelled", func(t *testing.T) {
		for _, asErase := range []bool{true, false} {
			fs := vfs.NewMem()
			db := endedRuns(t, fs, ring, "r")
			r := mustRun(db, "r")
			r.mu.Lock()
			seq, final, _ := r.chainHeadLocked()
			r.mu.Unlock()
			at := time.Now().UnixNano()
			// The link of the other kind, under this kind's label.
			var rec []byte
			if asErase {
				head := db.hasher.Link("r", seq+1, final, record.AppendDeletePayload(nil, at, "x"))
				note, _ := retention.Note(db.StoreID(), db.signer, "r", seq+1, head)
				rec = record.AppendErase(nil, "r", seq+1, final, head, at, "x", note)
			} else {
				head := db.hasher.Link("r", seq+1, final, record.AppendErasePayload(nil, at, "x"))
				note, _ := retention.Note(db.StoreID(), db.signer, "r", seq+1, head)
				rec = record.AppendDelete(nil, "r", seq+1, final, head, at, "x", note)
			}
			if _, err := db.append(ctx, rec); err != nil {
				t.Fatal(err)
			}
			crash(db)
			for _, rep := range verifyBoth(t, fs, ring) {
				if rep.OK || !failsAt(rep, "r", seq+1) || len(rep.Deleted) != 0 {
					t.Fatalf("relabelled as an erasure %v: ok %v, failures %+v, deleted %+v", asErase, rep.OK, rep.Failures, rep.Deleted)
				}
			}
		}
	})

	t.Run("key erased without a record", func(t *testing.T) {
		fs := vfs.NewMem()
		db := endedRuns(t, fs, ring, "deleted", "live")
		if _, err := db.Delete(ctx, "deleted"); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		tbl := keysOf(t, fs, db)
		tbl.Erase("deleted")
		tbl.Erase("live")
		putKeys(t, fs, db, tbl)
		for _, rep := range verifyBoth(t, fs, ring) {
			for _, id := range []string{"deleted", "live"} {
				found := false
				for _, f := range rep.Failures {
					found = found || f.RunID == id && strings.Contains(f.Detail, "no valid erase record")
				}
				if rep.OK || !found {
					t.Fatalf("run %s's key erased in KEYS: failures %+v", id, rep.Failures)
				}
			}
		}
	})

	t.Run("older KEYS", func(t *testing.T) {
		fs := vfs.NewMem()
		db := endedRuns(t, fs, ring, "gone")
		old := keysOf(t, fs, db)
		if _, err := db.Erase(ctx, "gone", ""); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		putKeys(t, fs, db, old)
		for _, rep := range verifyBoth(t, fs, ring) {
			found := false
			for _, f := range rep.Failures {
				found = found || f.RunID == "gone" && strings.Contains(f.Detail, "still holds its data key")
			}
			if rep.OK || !found {
				t.Fatalf("a KEYS from before the erasure: failures %+v", rep.Failures)
			}
		}
		// The engine erases the key again once it knows the log's
		// erasures, and Erase of the erased run finishes it too.
		db, err := Open("s", encOpts(fs, ring))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Erase(ctx, "gone", ""); err != nil {
			t.Fatal(err)
		}
		if db.eraser.Live("gone") {
			t.Fatal("Erase of an erased run left KEYS's older key live")
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		putKeys(t, fs, db, old)
		db, err = Open("s", encOpts(fs, ring))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.checkRegistry(); err != nil {
			t.Fatal(err)
		}
		for i := 0; db.eraser.Live("gone"); i++ {
			if i == 1000 {
				t.Fatal("the engine did not erase the key of an erased run that an older KEYS holds")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		for _, rep := range verifyBoth(t, fs, ring) {
			if !rep.OK {
				t.Fatalf("after the engine erased the key again: %+v", rep.Failures)
			}
		}
	})

	t.Run("unfinished", func(t *testing.T) {
		fs := vfs.NewMem()
		db := endedRuns(t, fs, ring, "gone", "kept")
		old := keysOf(t, fs, db)
		if _, err := db.Erase(ctx, "gone", ""); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		old.MarkErasing("gone", true)
		putKeys(t, fs, db, old) // as a crash after the erase record leaves it
		for _, rep := range verifyBoth(t, fs, ring) {
			if !rep.OK || len(rep.Deleted) != 1 || rep.Deleted[0].Erasure == nil || !rep.Deleted[0].Erasure.Unfinished {
				t.Fatalf("an unfinished erasure: ok %v, failures %+v, deleted %+v", rep.OK, rep.Failures, rep.Deleted)
			}
		}
		db, err := Open("s", encOpts(fs, ring))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range db.KeyEntries() {
			if e.Scope == "gone" && (!e.Erased || e.Erasing) {
				t.Fatalf("Open did not finish the erasure: %+v", e)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		for _, rep := range verifyBoth(t, fs, ring) {
			if !rep.OK || len(rep.Deleted) != 1 || rep.Deleted[0].Erasure == nil || rep.Deleted[0].Erasure.Unfinished {
				t.Fatalf("after Open finished the erasure: ok %v, failures %+v, deleted %+v", rep.OK, rep.Failures, rep.Deleted)
			}
		}
	})
}

// TestRollbackSealed: in an encrypted store a rollback record's undo list
// (the compensations' tools, arguments and keys) is sealed: no file holds
// it in the clear; a pending rollback resumes after a crash; verify lists
// the rollback without the keyring (sealed) and checks it deeply with it;
// and once the run is erased, its rollback record no longer opens.
func TestRollbackSealed(t *testing.T) {
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err := Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	run, err := db.Run(ctx, "saga")
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld()
	for n := 1; n <= 3; n++ {
		commitStep(t, run, w, ledger.Action{Tool: "pay", Args: []byte(fmt.Sprintf(`{"n":%d}`, n)),
			Compensate: &ledger.Action{Tool: "refund", Args: []byte(fmt.Sprintf(`{"card":"%s-%d"}`, goneSecret, n))}})
	}
	broken := errors.New("refund service down")
	flaky := func(u Undo) ledger.Exec {
		if u.Seq == 2 {
			return func(context.Context, string) ([]byte, error) { return nil, broken }
		}
		return w.undoExec(u)
	}
	if _, err := run.Rollback(ctx, 1, RollbackOptions{Exec: flaky}); !errors.Is(err, broken) {
		t.Fatalf("rollback with a failing compensation: %v", err)
	}
	crash(db)
	for name, b := range storeFiles(t, fs, "s") {
		if bytes.Contains(b, []byte(goneSecret)) {
			t.Fatalf("%s holds a compensation's arguments in the clear", name)
		}
	}
	for i, rep := range verifyBoth(t, fs, ring) {
		if !rep.OK || len(rep.Rollbacks) != 1 || rep.Rollbacks[0].Completed || rep.Rollbacks[0].Sealed != (i == 0) ||
			(i == 1 && rep.Rollbacks[0].Undone != 2) {
			t.Fatalf("verify of a pending sealed rollback (keyring %v): ok %v %+v, rollbacks %+v", i == 1, rep.OK, rep.Failures, rep.Rollbacks)
		}
	}
	db, err = Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	run = mustRun(db, "saga")
	if to, ok := run.PendingRollback(); !ok || to != 1 {
		t.Fatalf("PendingRollback after a restart = %d, %v", to, ok)
	}
	if res, err := run.Rollback(ctx, 1, RollbackOptions{Exec: w.undoExec}); err != nil || !res.Resumed || len(res.Undone) != 2 {
		t.Fatalf("resumed rollback: %+v, %v", res, err)
	}
	if err := run.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Erase(ctx, "saga", ""); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, rep := range verifyBoth(t, fs, ring) {
		if !rep.OK || len(rep.Rollbacks) != 1 || !rep.Rollbacks[0].Completed || !rep.Rollbacks[0].Sealed {
			t.Fatalf("verify after the erasure: ok %v %+v, rollbacks %+v", rep.OK, rep.Failures, rep.Rollbacks)
		}
	}
	sealer, _ := storeSealer(t, fs, "s", db.storeID, ring)
	if opened, _ := readableRuns(t, fs, "s", sealer); opened["saga"] != 0 {
		t.Fatalf("records of the erased run that open: %v", opened)
	}
}

// TestHandleAfterDeletion: a handle of a run kept across its deletion or
// erasure serves nothing of it any more (its frame in memory is dropped,
// not handed out): State, StateE, StateAt and Atom fail with the run's
// fate.
func TestHandleAfterDeletion(t *testing.T) {
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db := endedRuns(t, fs, ring, "deleted", "erased")
	defer db.Close()
	deleted, erased := mustRun(db, "deleted"), mustRun(db, "erased")
	for _, r := range []*Run{deleted, erased} {
		if f := r.State(); f == nil || string(f.Memory["k"]) != goneSecret {
			t.Fatalf("run %s before: %v", r.ID(), f)
		}
	}
	if _, err := db.Delete(ctx, "deleted"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Erase(ctx, "erased", ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		r    *Run
		want error
	}{{deleted, ErrRunDeleted}, {erased, ErrRunErased}} {
		if f := c.r.State(); f != nil {
			t.Fatalf("State of run %s after: %v", c.r.ID(), f.Memory)
		}
		if f, err := c.r.StateE(); f != nil || !errors.Is(err, c.want) {
			t.Fatalf("StateE of run %s after: %v, %v; want %v", c.r.ID(), f, err, c.want)
		}
		if f, err := c.r.StateAt(ctx, 1); f != nil || !errors.Is(err, c.want) {
			t.Fatalf("StateAt of run %s after: %v, %v; want %v", c.r.ID(), f, err, c.want)
		}
		if a, err := c.r.Atom(ctx, 1); a != nil || !errors.Is(err, c.want) {
			t.Fatalf("Atom of run %s after: %v, %v; want %v", c.r.ID(), a, err, c.want)
		}
	}
}
