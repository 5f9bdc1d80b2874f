package engine

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// deletedStore writes a store with run "old" (60 atoms, ended) and run
// "live" after it; forge, if set, appends records once "old" ended.
func deletedStore(t *testing.T, opts *Options, forge func(db *DB, old *Run)) {
	t.Helper()
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	old := fillRun(t, db, "old", 60)
	if err := old.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	fillRun(t, db, "live", 3)
	if forge != nil {
		forge(db, old)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// gcStore opens the store, runs a GC that must remove segments, and
// closes it.
func gcStore(t *testing.T, opts *Options) {
	t.Helper()
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := db.GC(ctx); err != nil || st.Segments == 0 {
		t.Fatalf("GC: %+v, %v", st, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func failureOf(rep *chain.Report, run string, kind chain.Kind, substr string) bool {
	for _, f := range rep.Failures {
		if f.RunID == run && (kind == 0 || f.Kind == kind) && strings.Contains(f.Detail, substr) {
			return true
		}
	}
	return false
}

// TestVerifyDeletedBySignedPolicy: a signed store whose run was deleted
// and reclaimed verifies with the public key; the report lists the run as
// deleted (signed, reclaimed), not as missing.
func TestVerifyDeletedBySignedPolicy(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(nil)
	pub := priv.Public().(ed25519.PublicKey)
	mem := vfs.NewMem()
	opts := gcOptions(mem)
	opts.SigningKey = priv
	deletedStore(t, opts, func(db *DB, _ *Run) {
		if _, err := db.DeleteRuns(ctx, DeleteOptions{Status: []Status{StatusCompleted}, Reason: "retention 30d"}); err != nil {
			t.Fatal(err)
		}
	})
	// Before the collection the run is whole: verified, and listed deleted.
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true, PublicKey: pub})
	if err != nil || !rep.OK || len(rep.Deleted) != 1 || rep.Deleted[0].Reclaimed || !rep.Deleted[0].Signed {
		t.Fatalf("before GC: %v, OK %v, failures %v, deleted %+v", err, rep.OK, rep.Failures, rep.Deleted)
	}
	gcStore(t, opts)
	rep, err = Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true, PublicKey: pub})
	if err != nil || !rep.OK {
		t.Fatalf("after GC: %v, failures %v", err, rep.Failures)
	}
	if len(rep.Deleted) != 1 {
		t.Fatalf("deleted runs: %+v", rep.Deleted)
	}
	if d := rep.Deleted[0]; d.RunID != "old" || !d.Signed || !d.Reclaimed || d.Reason != "retention 30d" || d.Seq != 62 {
		t.Fatalf("deleted run: %+v", d)
	}
	for _, rr := range rep.Runs {
		if rr.RunID == "old" {
			t.Fatalf("the reclaimed run is still reported: %+v", rr)
		}
	}
}

// TestVerifyDeletionTampered: a delete record whose reason was changed
// breaks its link, and an unsigned one in a signed store fails its
// signature; either way the run counts as not deleted, so once its
// records are reclaimed its absence is reported too.
func TestVerifyDeletionTampered(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(nil)
	pub := priv.Public().(ed25519.PublicKey)
	forged := func(reasonChanged, signed bool) func(db *DB, old *Run) {
		return func(db *DB, old *Run) {
			seq, final := old.LastSeq()+2, old.Head()
			now := time.Now().UnixNano()
			head := db.hasher.Link("old", seq, final, record.AppendDeletePayload(nil, now, "by policy"))
			c := chain.Checkpoint{StoreID: db.StoreID(), RunID: "old", Seq: seq, Head: head, Final: true}
			note := chain.MarshalCheckpoint(c)
			if signed {
				var err error
				if note, err = db.signer.SignCheckpoint(c); err != nil {
					t.Fatal(err)
				}
			}
			reason := "by policy"
			if reasonChanged {
				reason = "by policX"
			}
			if _, err := db.append(ctx, record.AppendDelete(nil, "old", seq, final, head, now, reason, note)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name          string
		reasonChanged bool
		signed        bool
		kind          chain.Kind
		substr        string
	}{
		{"reason changed", true, true, chain.KindHashMismatch, "its time or reason was changed"},
		{"unsigned in a signed store", false, false, chain.KindBadSignature, "signature"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			opts := gcOptions(mem)
			opts.SigningKey = priv
			deletedStore(t, opts, forged(c.reasonChanged, c.signed))
			rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, PublicKey: pub})
			if err != nil || rep.OK || !failureOf(rep, "old", c.kind, c.substr) || len(rep.Deleted) != 0 {
				t.Fatalf("%v, OK %v, failures %v, deleted %v; want run old's delete record reported (%v: %s)", err, rep.OK, rep.Failures, rep.Deleted, c.kind, c.substr)
			}
			if c.reasonChanged {
				return // the engine itself refuses nothing here: its own log
			}
			// The engine trusts its own log: it reclaims the run. Verify,
			// holding the key, does not: the run's absence is reported.
			gcStore(t, opts)
			rep, err = Verify(ctx, "store", &VerifyOptions{FS: mem, PublicKey: pub})
			if err != nil || rep.OK || !failureOf(rep, "old", chain.KindBadSignature, "") || len(rep.Failures) < 2 {
				t.Fatalf("after GC: %v, OK %v, failures %v", err, rep.OK, rep.Failures)
			}
			other := false
			for _, f := range rep.Failures {
				other = other || f.RunID == "old" && f.Kind != chain.KindBadSignature
			}
			if !other {
				t.Fatalf("the reclaimed run's absence is not reported: %v", rep.Failures)
			}
		})
	}
}

// TestVerifyRunRemovedWithoutDeletion: segments removed from the log of a
// run no delete record names are reported, with or without a forged
// RETENTION that claims a collection removed them.
func TestVerifyRunRemovedWithoutDeletion(t *testing.T) {
	mem := vfs.NewMem()
	opts := gcOptions(mem)
	deletedStore(t, opts, nil)
	for _, id := range []uint64{1, 2} {
		if err := mem.Remove("store/wal/" + wal.SegmentName(id)); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem})
	if err != nil || rep.OK || !failureOf(rep, "", 0, "the log starts at segment 3, and no store/RETENTION says") {
		t.Fatalf("without RETENTION: %v, OK %v, failures %v", err, rep.OK, rep.Failures)
	}
	if _, err := Open("store", opts); err == nil || !strings.Contains(err.Error(), "RETENTION") {
		t.Fatalf("Open of the trimmed log: %v", err)
	}
	sb, err := layout.ReadFile(mem, "store/"+layout.StoreName)
	if err != nil {
		t.Fatal(err)
	}
	s, err := layout.ParseStore("STORE", sb)
	if err != nil {
		t.Fatal(err)
	}
	ret := layout.Retention{StoreID: s.ID, Floor: 3, Segments: 2}
	if err := layout.WriteFileAtomic(mem, "store/"+layout.RetentionName, ret.Marshal(), true); err != nil {
		t.Fatal(err)
	}
	rep, err = Verify(ctx, "store", &VerifyOptions{FS: mem})
	if err != nil || rep.OK || len(rep.Deleted) != 0 {
		t.Fatalf("with a forged RETENTION: %v, OK %v, failures %v", err, rep.OK, rep.Failures)
	}
	t.Logf("failures: %v", rep.Failures)
	if !failureOf(rep, "old", 0, "") {
		t.Fatalf("run old, whose first segments are gone and which no delete record names, is not reported: %v", rep.Failures)
	}
}

// TestRetentionDamaged: RETENTION is not derived: a damaged one makes
// Open refuse the store (naming it) and verify report it.
func TestRetentionDamaged(t *testing.T) {
	mem := vfs.NewMem()
	opts := gcOptions(mem)
	deletedStore(t, opts, func(db *DB, _ *Run) {
		if _, err := db.Delete(ctx, "old"); err != nil {
			t.Fatal(err)
		}
	})
	gcStore(t, opts)
	name := "store/" + layout.RetentionName
	b, err := layout.ReadFile(mem, name)
	if err != nil {
		t.Fatal(err)
	}
	b[30] ^= 1 // the floor
	if err := layout.WriteFileAtomic(mem, name, b, true); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("store", opts); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "RETENTION") {
		t.Fatalf("Open with a damaged RETENTION: %v", err)
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem})
	if err != nil || rep.OK {
		t.Fatalf("verify: %v, OK %v", err, rep.OK)
	}
	found := false
	for _, f := range rep.Failures {
		found = found || strings.Contains(f.Location, layout.RetentionName)
	}
	if !found {
		t.Fatalf("verify does not name RETENTION: %v", rep.Failures)
	}
}

// TestVerifyDeletionOfRunWithoutHeads: a fork at seq 3 given a forged end
// record whose seq leaves it without a stored head, then a delete record
// at seq 4, after none: verify reports the deletion, it does not index
// the heads the run lacks.
func TestVerifyDeletionOfRunWithoutHeads(t *testing.T) {
	mem := vfs.NewMem()
	db, err := Open("store", gcOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	fillRun(t, db, "parent", 3)
	if _, err := db.Fork(ctx, "parent", 3, "fork"); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixNano()
	end := record.AppendEnd(nil, "fork", 9, chain.Hash{1}, 1, now, nil)
	final := chain.Hash{2}
	head := db.hasher.Link("fork", 4, final, record.AppendDeletePayload(nil, now, "x"))
	note := chain.MarshalCheckpoint(chain.Checkpoint{StoreID: db.StoreID(), RunID: "fork", Seq: 4, Head: head, Final: true})
	for _, rec := range [][]byte{end, record.AppendDelete(nil, "fork", 4, final, head, now, "x", note)} {
		if _, err := db.append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	crash(db)
	for _, deep := range []bool{false, true} {
		rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: deep})
		if err != nil || rep.OK || !failureOf(rep, "fork", chain.KindLinkMismatch, "does not follow the run's end") {
			t.Fatalf("deep %v: %v, OK %v, failures %v", deep, err, rep.OK, rep.Failures)
		}
	}
}
