package engine

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
)

// waitsView is what the store says of the waits of runs, and its ready
// and due ones, without changing anything (the clock is before every
// deadline).
func waitsView(t testing.TB, db *DB, runs ...string) string {
	t.Helper()
	var b strings.Builder
	for _, id := range runs {
		r, err := db.Run(ctx, id)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", id, err)
			continue
		}
		w, ok, err := r.CurrentWait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s@%d:", id, r.LastSeq())
		if ok {
			fmt.Fprintf(&b, " %d %q %v deadline %v", w.Seq, w.Name, w.Outcome, w.Deadline.UnixNano())
			if w.Event != nil {
				fmt.Fprintf(&b, " event %s/%s %q", w.Event.Name, w.Event.Sender, w.Event.Payload)
			}
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "ready %v", readyRuns(t, db))
	at, ok, err := db.NextDeadline(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, " next %v %v", ok, at.UnixNano())
	return b.String()
}

// TestWaitsFile: WAITS, written with each engine checkpoint, is what a
// restart loads, with the log's tail since that checkpoint, and gives
// what the log says: after a power cut past the checkpoint (a tail of
// waits, events, wakes, an end and a taking commit), and with WAITS
// missing, damaged, of an earlier checkpoint or forged (rebuilt from the
// log, and Stats says why). Every store verifies, deep.
func TestWaitsFile(t *testing.T) {
	base := vfs.NewCrashableMem()
	clock := &fakeClock{now: t0}
	opts := waitOptions(base, clock)
	db := openTest(t, base, opts)
	runs := []string{"open", "timer", "early", "delivered", "taken", "ended", "tail", "tailtaken"}
	for _, id := range runs {
		openRun(t, db, id)
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(mustRun(db, "open").Wait(ctx, "approval", t0.Add(time.Hour)))
	must(mustRun(db, "timer").Sleep(ctx, t0.Add(10*time.Second)))
	must(db.SendEvent(ctx, "early", "go", "s1", []byte("kept")))
	must(mustRun(db, "delivered").Wait(ctx, "go", time.Time{}))
	must(db.SendEvent(ctx, "delivered", "go", "s2", []byte("yes")))
	must(mustRun(db, "taken").Wait(ctx, "go", t0.Add(time.Minute)))
	must(db.SendEvent(ctx, "taken", "go", "s3", []byte("taken")))
	must(mustRun(db, "ended").Wait(ctx, "never", t0.Add(2*time.Hour)))
	must(mustRun(db, "tailtaken").Wait(ctx, "go", time.Time{}))
	must(db.SendEvent(ctx, "tailtaken", "go", "s6", []byte("then taken")))
	step(t, mustRun(db, "taken"), "took")
	if err := db.checkpoint(false); err != nil {
		t.Fatal(err)
	}
	earlier, err := layout.ReadFile(base, "store/"+layout.WaitsName)
	if err != nil {
		t.Fatalf("no WAITS after a checkpoint: %v", err)
	}
	// The tail: records after the checkpoint's replay position.
	must(mustRun(db, "tail").Wait(ctx, "late", t0.Add(3*time.Hour)))
	must(db.SendEvent(ctx, "tail", "late", "s4", []byte("tail event")))
	must(db.SendEvent(ctx, "open", "other", "s5", []byte("kept too")))
	must(mustRun(db, "timer").CancelWait(ctx))
	if err := mustRun(db, "ended").End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	step(t, mustRun(db, "tailtaken"), "took")
	if err := db.checkpoint(false); err != nil { // WAITS of gen 2; earlier is gen 1's
		t.Fatal(err)
	}
	must(mustRun(db, "taken").Wait(ctx, "again", time.Time{}))
	want := waitsView(t, db, runs...)

	// The power is cut: no Close, no final checkpoint.
	crashed := base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	db.Close()
	type variant struct {
		name   string
		file   func(fs vfs.FS)
		reason string // "" : WAITS is used
	}
	write := func(b []byte) func(vfs.FS) {
		return func(fs vfs.FS) {
			if err := layout.WriteFileAtomic(fs, "store/"+layout.WaitsName, b, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	cur, err := layout.ReadFile(crashed, "store/"+layout.WaitsName)
	if err != nil {
		t.Fatal(err)
	}
	damaged := append([]byte(nil), cur...)
	damaged[len(damaged)/2] ^= 0x10
	f, err := layout.ParseWaits("WAITS", cur)
	if err != nil {
		t.Fatal(err)
	}
	// Forged: sound, of this checkpoint, but saying the open wait took
	// an event no one sent.
	for i := range f.Runs {
		if r := &f.Runs[i]; r.ID == "open" {
			r.Wait.Outcome, r.Wait.Ended, r.Wait.Ready = 1, r.Wait.Declared, 99
			r.Wait.Event = &layout.WaitsEvent{Name: "approval", Sender: "mallory", Payload: []byte("approved")}
		}
	}
	forged := f.Marshal()
	for _, v := range []variant{
		{name: "as written"},
		{name: "missing", file: func(fs vfs.FS) { fs.Remove("store/" + layout.WaitsName) }, reason: "missing"},
		{name: "damaged", file: write(damaged), reason: "checksum"},
		{name: "of an earlier checkpoint", file: write(earlier), reason: "written by checkpoint 1"},
		{name: "forged", file: write(forged), reason: "not the one its sender id names"},
	} {
		t.Run(v.name, func(t *testing.T) {
			fs := crashed.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			if v.file != nil {
				v.file(fs)
			}
			db := openTest(t, fs, waitOptions(fs, clock))
			if got := waitsView(t, db, runs...); got != want {
				t.Fatalf("after the restart:\n%s\nwant\n%s", got, want)
			}
			why := db.Stats().WaitsRebuilt
			if v.reason == "" && why != "" || !strings.Contains(why, v.reason) {
				t.Fatalf("WaitsRebuilt %q, want %q", why, v.reason)
			}
			// The restart's own checkpoint writes WAITS again: sound.
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openTest(t, fs, waitOptions(fs, clock))
			if got := waitsView(t, db, runs...); got != want {
				t.Fatalf("after a second restart:\n%s\nwant\n%s", got, want)
			}
			if why := db.Stats().WaitsRebuilt; why != "" {
				t.Fatalf("the WAITS Close wrote is not used: %s", why)
			}
			db.Close()
			rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: true})
			if err != nil || !rep.OK {
				t.Fatalf("verify: %v %v", err, rep.Failures)
			}
		})
	}

	// Forged so that the engine would use it (sound, of CHECKPOINT's
	// generation, consistent in itself): the open wait's deadline moved,
	// a kept event dropped with its sender id. Verify compares WAITS and
	// the tail with the whole log and reports both.
	f, err = layout.ParseWaits("WAITS", cur)
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Runs {
		switch r := &f.Runs[i]; r.ID {
		case "open":
			r.Wait.Deadline += int64(time.Hour)
		case "early":
			r.Pending, r.Senders = nil, nil
		}
	}
	fs := crashed.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	write(f.Marshal())(fs)
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, fl := range rep.Failures {
		if strings.Contains(fl.Location, layout.WaitsName) {
			bad = append(bad, fl.RunID)
		}
	}
	if rep.OK || fmt.Sprint(bad) != "[early open]" {
		t.Fatalf("verify of a forged WAITS: OK %v, WAITS failures of runs %v: %v", rep.OK, bad, rep.Failures)
	}
	// The engine uses it (its checksums and checkpoint let it through),
	// and the check a moment after Open, which Ready waits for, finds it:
	// the index is rebuilt from the log (TestWaitsForgedSound).
	db, err = Open("store", waitOptions(fs, clock)) // not openTest: its check at the end would fail too
	if err != nil {
		t.Fatal(err)
	}
	if !db.waits.Index().FromFile() {
		t.Fatal("the forged WAITS is not one the engine would use: the check is blind")
	}
	if _, err := db.Ready(ctx, 0); err != nil {
		t.Fatal(err)
	}
	st := db.Stats()
	if !strings.Contains(st.WaitsRebuilt, "disagrees with the log") || !strings.Contains(st.WaitsMismatch, `run "early"`) || !strings.Contains(st.WaitsMismatch, `run "open"`) {
		t.Fatalf("the forged WAITS: WaitsRebuilt %q, WaitsMismatch %q", st.WaitsRebuilt, st.WaitsMismatch)
	}
	if got := waitsView(t, db, runs...); got != want {
		t.Fatalf("after the check:\n%s\nwant\n%s", got, want)
	}
	db.Close()
}

// TestWaitsFileTailOnly: a restart over WAITS reads the log from the
// checkpoint's replay position only: the index applies the tail's records
// and none before.
func TestWaitsFileTailOnly(t *testing.T) {
	mem := vfs.NewMem()
	clock := &fakeClock{now: t0}
	opts := waitOptions(mem, clock)
	db := openTest(t, mem, opts)
	const n = 50
	for i := range n {
		r := openRun(t, db, fmt.Sprintf("r%02d", i))
		if _, err := r.Sleep(ctx, t0.Add(time.Duration(n-i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, mem, opts)
	if _, err := db.Ready(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if s := db.waits.Index().Stats(); s.Applied != 0 || s.Open != n {
		t.Fatalf("a restart with nothing after the checkpoint applied %d records (%d open waits)", s.Applied, s.Open)
	}
	if _, err := db.SendEvent(ctx, "r00", "x", "s", nil); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openTest(t, mem, opts)
	if _, err := db.Ready(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if s := db.waits.Index().Stats(); s.Applied != 0 || s.Open != n || s.Pending != 1 {
		t.Fatalf("after a second restart: %+v", s)
	}
	// The clock passes the first deadlines: they wake in order.
	clock.Set(t0.Add(3 * time.Minute))
	ws, err := db.Ready(ctx, 0)
	if err != nil || len(ws) != 3 || ws[0].Run != "r49" || ws[2].Run != "r47" {
		t.Fatalf("due after the restart: %+v %v", ws, err)
	}
	db.Close()
	_ = record.KindWait
}

// TestWaitsFileErased: WAITS is sealed with the store's key, and the
// erasure of a run (whose kept event the index held while the index was
// not loaded) leaves nothing of it in WAITS.
func TestWaitsFileErased(t *testing.T) {
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	opts := encOpts(fs, ring)
	db := openTest(t, fs, opts)
	secret, other := "erase-me-4711", "keep-me-0815"
	for _, id := range []string{"gone", "kept"} {
		openRun(t, db, id)
	}
	if _, err := db.SendEvent(ctx, "gone", "go", "s1", []byte(secret)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SendEvent(ctx, "kept", "go", "s1", []byte(other)); err != nil {
		t.Fatal(err)
	}
	storeID := db.storeID
	if err := db.Close(); err != nil { // WAITS holds gone's kept event
		t.Fatal(err)
	}
	// The end and the erasure come before any use of waits after this
	// Open.
	db = openTest(t, fs, opts)
	if err := mustRun(db, "gone").End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Erase(ctx, "gone", "test"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	sealer, _ := storeSealer(t, fs, "store", storeID, ring)
	b, err := layout.ReadFile(fs, "store/"+layout.WaitsName)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), other) {
		t.Fatal("WAITS holds an event's payload in the clear")
	}
	var plain []byte
	for gen := uint64(1); gen < 16 && plain == nil; gen++ {
		plain, _ = layout.UnsealWaits(layout.WaitsName, b, sealer, gen)
	}
	if plain == nil {
		t.Fatal("WAITS does not open with the store's key: the check is blind")
	}
	if !strings.Contains(string(plain), other) || strings.Contains(string(plain), secret) || strings.Contains(string(plain), "gone") {
		t.Fatalf("WAITS after the erasure: holds kept's event %v, gone's event %v, gone's id %v",
			strings.Contains(string(plain), other), strings.Contains(string(plain), secret), strings.Contains(string(plain), "gone"))
	}
}

// TestWaitsFileSealed: an encrypted store writes WAITS sealed per block
// (version 3, nothing of it in the clear) and reads it in place after a
// restart; one sealed whole (written the old way) loads too; one with a
// block changed answers as the log does (rebuilt once the block is met:
// the first block at the load); verify agrees with each.
func TestWaitsFileSealed(t *testing.T) {
	base := vfs.NewCrashableMem()
	clock := &fakeClock{now: t0}
	opts := waitOptions(base, clock)
	opts.Keyring = testRing(t, "k1", "k1")
	db := openTest(t, base, opts)
	var runs []string
	for i := range 300 {
		runs = append(runs, fmt.Sprintf("run-%03d", i))
		if _, err := openRun(t, db, runs[i]).Sleep(ctx, t0.Add(time.Duration(1+(i*7)%300)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.SendEvent(ctx, "run-005", "go", "s1", []byte("secret-4711")); err != nil {
		t.Fatal(err)
	}
	want, storeID := waitsView(t, db, runs...), db.storeID
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	crashed := base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	sealer, _ := storeSealer(t, crashed, "store", storeID, opts.Keyring)
	b, err := layout.ReadFile(crashed, "store/"+layout.WaitsName)
	if err != nil || layout.WaitsVersion(b) != 3 || strings.Contains(string(b), "secret-4711") || strings.Contains(string(b), "run-005") {
		t.Fatalf("WAITS: version %d (want 3), in the clear: %v (%v)", layout.WaitsVersion(b), strings.Contains(string(b), "run-005"), err)
	}
	var plain []byte
	gen := uint64(1)
	for ; gen < 16 && plain == nil; gen++ {
		plain, _ = layout.UnsealWaits(layout.WaitsName, b, sealer, gen)
	}
	old, err := sealer.SealStoreFile(plain, record.PlaceWaits, gen-1)
	if plain == nil || err != nil {
		t.Fatalf("WAITS does not unseal (%v)", err)
	}
	files := map[string][]byte{"as written": b, "sealed whole (the old way)": old}
	full := record.SealedLen(layout.WaitsBlock, binary.LittleEndian.Uint64(b[32:]))
	for k := 0; k*layout.WaitsBlock < int(binary.LittleEndian.Uint64(plain[64:])); k++ {
		c := slices.Clone(b)
		c[64+k*full+30] ^= 4
		files[fmt.Sprintf("block %d flipped", k)] = c
	}
	if len(files) < 5 {
		t.Fatalf("WAITS of %d bytes: too few blocks to test", len(plain))
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fs := crashed.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		if err := layout.WriteFileAtomic(fs, "store/"+layout.WaitsName, files[name], false); err != nil {
			t.Fatal(err)
		}
		o := waitOptions(fs, clock)
		o.Keyring = opts.Keyring
		db := openTest(t, fs, o)
		if got := waitsView(t, db, runs...); got != want {
			t.Fatalf("%s: after the restart:\n%s\nwant\n%s", name, got, want)
		}
		if err := db.waits.Trusted(); err != nil { // the check of WAITS against the log ran
			t.Fatal(err)
		}
		why := db.Stats().WaitsRebuilt
		switch {
		case db.Stats().WaitsMismatch != "":
			t.Fatalf("%s: the check against the log says %q", name, db.Stats().WaitsMismatch)
		case !strings.Contains(name, "flipped") && why != "",
			name == "block 0 flipped" && !strings.Contains(why, "does not open"),
			why != "" && !strings.Contains(why, "does not open"):
			t.Fatalf("%s: WaitsRebuilt %q", name, why)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: true, Keyring: opts.Keyring})
		if err != nil || !rep.OK {
			t.Fatalf("%s: verify: %v %v", name, err, rep.Failures)
		}
	}
}
