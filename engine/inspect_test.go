package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
	"github.com/google/go-cmp/cmp"
)

type inspectZeroNonces struct{}

func (inspectZeroNonces) Read(b []byte) (int, error) { clear(b); return len(b), nil }

const inspectSeed = 11

// inspectStore builds a store of two runs, then starts an atom of run b
// whose action blocks in exec, and calls check while it is blocked (a
// running agent: an intent without certificate), with the open DB.
func inspectStore(t *testing.T, check func(fs vfs.FS, db *engine.DB)) {
	t.Helper()
	ctx := context.Background()
	fs := vfs.NewMem()
	db, err := engine.Open("store", &engine.Options{FS: fs, NoSync: true, Nonces: inspectZeroNonces{}, DictSamples: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := agent.NewWorld()
	for id, n := range map[string]int{"a": 5, "b": 3} {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if _, err := agent.Step(ctx, r, inspectSeed, w); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, _ := db.Run(ctx, "b")
	atom, err := b.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = atom.Do(ctx, ledger.Action{Tool: "billing.charge", Args: []byte(`{"cents":1200}`), Key: "charge-1"},
		func(ctx context.Context, key string) ([]byte, error) {
			check(fs, db)
			return []byte(`{"charge":"ch_1"}`), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

func TestInspect(t *testing.T) {
	ctx := context.Background()
	inspectStore(t, func(fs vfs.FS, db *engine.DB) {
		in, err := engine.Inspect(ctx, "store", &engine.InspectOptions{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		if in.StoreID() != db.StoreID() {
			t.Errorf("StoreID %s, want %s", in.StoreID(), db.StoreID())
		}
		runs := in.Runs()
		if len(runs) != 2 || runs[0].ID != "a" || runs[1].ID != "b" {
			t.Fatalf("runs %+v", runs)
		}
		for _, rs := range runs {
			r, _ := db.Run(ctx, rs.ID)
			if rs.LastSeq != r.LastSeq() || rs.Atoms != r.LastSeq() || rs.Head != r.Head() {
				t.Errorf("run %s: summary %+v, want last seq %d head %s", rs.ID, rs, r.LastSeq(), r.Head())
			}
		}
		if h := in.Holder(); !h.Live {
			t.Errorf("Holder %+v: the store is open in this process", h)
		}
		if a := runs[0]; a.Running != 0 || a.Interrupted != 0 || len(a.InDoubt) != 0 {
			t.Errorf("run a: running %d, interrupted %d, in doubt %d; want none", a.Running, a.Interrupted, len(a.InDoubt))
		}
		// The exec of b's seq 4 is running now (check is called from it):
		// running, not in doubt.
		b := runs[1]
		if b.Running != 4 || b.Interrupted != 0 || len(b.AtomActions) != 1 || len(b.InDoubt) != 0 {
			t.Fatalf("run b: running %d, interrupted %d (%d actions), in doubt %d; want seq 4 running one action",
				b.Running, b.Interrupted, len(b.AtomActions), len(b.InDoubt))
		}
		if d := b.AtomActions[0]; d.Tool != "billing.charge" || d.Key != "charge-1" || d.Status != ledger.StatusIntent ||
			!d.Running || d.Seq != 4 || string(d.Args) != `{"cents":1200}` {
			t.Errorf("running action %+v", d)
		}
		if b.InFlight != b.Running || len(b.InFlightActions) != 1 { // the deprecated names still answer
			t.Errorf("deprecated InFlight %d (%d actions), want %d", b.InFlight, len(b.InFlightActions), b.Running)
		}

		// The same bytes with no process holding them: a crash stopped
		// seq 4, and its action is in doubt.
		crashed := vfs.NewMem()
		if _, err := vfs.Clone(fs, crashed, "store", "store"); err != nil {
			t.Fatal(err)
		}
		cin, err := engine.Inspect(ctx, "store", &engine.InspectOptions{FS: crashed})
		if err != nil {
			t.Fatal(err)
		}
		defer cin.Close()
		if h := cin.Holder(); h.Live {
			t.Errorf("Holder %+v of a store no DB holds", h)
		}
		cb, _ := cin.Run("b")
		if cb.Interrupted != 4 || cb.Running != 0 || len(cb.AtomActions) != 1 || len(cb.InDoubt) != 1 || cb.InFlight != 4 {
			t.Fatalf("crashed run b: interrupted %d, running %d (%d actions), in doubt %d; want seq 4 interrupted, one action in doubt",
				cb.Interrupted, cb.Running, len(cb.AtomActions), len(cb.InDoubt))
		}
		if d := cb.InDoubt[0]; d.Key != "charge-1" || d.Status != ledger.StatusIntent || d.Running || d.Seq != 4 {
			t.Errorf("in-doubt action %+v", d)
		}

		for _, rs := range runs {
			r, _ := db.Run(ctx, rs.ID)
			for seq := uint64(1); seq <= rs.LastSeq; seq++ {
				got, err := in.Atom(ctx, rs.ID, seq)
				if err != nil {
					t.Fatalf("Inspector.Atom(%s, %d): %v", rs.ID, seq, err)
				}
				s := workload.Script(rs.ID, seq, inspectSeed)
				s.Result = workload.Downstream(s.Tool, s.Args, s.Key)
				if diff := cmp.Diff(agent.Delta(s).Ops(), got.Delta.Ops()); diff != "" {
					t.Errorf("%s/%d delta (-want +got):\n%s", rs.ID, seq, diff)
				}
				if len(got.Actions) != 1 {
					t.Fatalf("%s/%d: %d actions, want 1", rs.ID, seq, len(got.Actions))
				}
				act := got.Actions[0]
				if act.Tool != s.Tool || act.Key != s.Key || act.Status != ledger.StatusDone ||
					!bytes.Equal(act.Result, s.Result) || act.Idempotent != s.Idempotent || act.Seq != seq {
					t.Errorf("%s/%d action %+v, want tool %s key %s result %q", rs.ID, seq, act, s.Tool, s.Key, s.Result)
				}
				live, err := r.Atom(ctx, seq)
				if err != nil {
					t.Fatalf("Run.Atom(%s, %d): %v", rs.ID, seq, err)
				}
				if diff := cmp.Diff(got.Delta.Ops(), live.Delta.Ops()); diff != "" || live.Head != got.Head ||
					live.Pos != got.Pos || !cmp.Equal(live.Actions, got.Actions) {
					t.Errorf("%s/%d: Run.Atom differs from Inspector.Atom: %s\n%+v\n%+v", rs.ID, seq, diff, live, got)
				}
				want, err := r.StateAt(ctx, seq)
				if err != nil {
					t.Fatal(err)
				}
				f, err := in.StateAt(ctx, rs.ID, seq)
				if err != nil {
					t.Fatalf("StateAt(%s, %d): %v", rs.ID, seq, err)
				}
				if !bytes.Equal(frame.AppendFrame(nil, want), frame.AppendFrame(nil, f)) {
					t.Errorf("%s: StateAt(%d) differs from the run's", rs.ID, seq)
				}
			}
		}
		for _, tc := range []struct {
			run string
			seq uint64
		}{{"a", 0}, {"a", 6}, {"nope", 1}} {
			if _, err := in.Atom(ctx, tc.run, tc.seq); err == nil {
				t.Errorf("Atom(%q, %d): no error", tc.run, tc.seq)
			}
		}
		if _, err := in.StateAt(ctx, "a", 6); !errors.Is(err, engine.ErrSeqOutOfRange) {
			t.Errorf("StateAt beyond the last seq: %v, want ErrSeqOutOfRange", err)
		}

		// Scan sees what Inspect counted.
		var n, atoms int64
		kinds := map[string]int64{}
		err = engine.Scan(ctx, "store", fs, func(r *engine.LogRecord) error {
			n++
			kinds[r.Kind]++
			if r.Kind == "atom" {
				atoms++
				if r.Seq == 0 || r.Run == "" || r.RawSize <= 0 || r.Size != len(r.Record) {
					t.Errorf("atom record %+v", r)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		st := in.Stats()
		if st.Records != n || st.Atoms != atoms || atoms != 8 || st.Runs != 2 {
			t.Errorf("stats %+v; scan saw %d records, %d atoms", st, n, atoms)
		}
		for _, k := range st.Kinds {
			if kinds[k.Kind] != k.Records {
				t.Errorf("kind %s: stats %d, scan %d", k.Kind, k.Records, kinds[k.Kind])
			}
		}
		if kinds["intent"] != 9 || kinds["certificate"] != 8 || kinds["run"] != 2 {
			t.Errorf("kinds %v", kinds)
		}
		if st.Files["wal"] == 0 || st.TotalBytes < st.Files["wal"] || len(st.Segments) == 0 {
			t.Errorf("file sizes %+v", st)
		}
		stop := errors.New("stop")
		if err := engine.Scan(ctx, "store", fs, func(*engine.LogRecord) error { return stop }); err != stop {
			t.Errorf("Scan returned %v, want the callback's error", err)
		}
	})
}

func TestInspectNotAStore(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("empty", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"empty", "missing"} {
		_, err := engine.Inspect(ctx, dir, &engine.InspectOptions{FS: fs})
		if err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("Inspect(%s): %v, want an error naming it", dir, err)
		}
		if dir == "empty" && !errors.Is(err, engine.ErrNotAStore) {
			t.Errorf("Inspect(empty): %v, want ErrNotAStore", err)
		}
		if err := engine.Scan(ctx, dir, fs, func(*engine.LogRecord) error { return nil }); err == nil {
			t.Errorf("Scan(%s): no error", dir)
		}
	}
}

// TestOpsJSON checks the exported view of every op kind, and its JSON.
func TestOpsJSON(t *testing.T) {
	var d frame.Delta
	d.SetObjective("ship it").AddSubgoal("s1", "build").SetSubgoalStatus("s1", frame.SubgoalDone).
		Set("k", []byte("v")).Set("bin", []byte{0xff, 0}).Delete("k").AppendScratch([]byte("note")).ClearScratch().
		AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: "hi", Tool: "t", CallID: "c0"}).
		AddPending(frame.Pending{CallID: "c1", Tool: "t", Args: []byte(`{"a":1}`), Key: "k1"}).
		ToolOutput("c1", "t", []byte("out")).RemovePending("c2").DropMessages(2)
	want := []string{
		`{"op":"set_objective","text":"ship it"}`,
		`{"op":"add_subgoal","id":"s1","text":"build"}`,
		`{"op":"set_subgoal_status","id":"s1","status":"done"}`,
		`{"op":"set","key":"k","value":"v"}`,
		`{"op":"set","key":"bin","value_base64":"/wA="}`,
		`{"op":"delete","key":"k"}`,
		`{"op":"append_scratch","value":"note"}`,
		`{"op":"clear_scratch"}`,
		`{"op":"append_message","role":"assistant","content":"hi","tool":"t","call_id":"c0"}`,
		`{"op":"add_pending","key":"k1","tool":"t","call_id":"c1","args":{"a":1}}`,
		`{"op":"tool_output","content":"out","tool":"t","call_id":"c1"}`,
		`{"op":"remove_pending","call_id":"c2"}`,
		`{"op":"drop_messages","count":2}`,
	}
	ops := d.Ops()
	if len(ops) != len(want) {
		t.Fatalf("%d ops, want %d", len(ops), len(want))
	}
	for i, op := range ops {
		b, err := json.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want[i] {
			t.Errorf("op %d: %s\nwant %s", i, b, want[i])
		}
	}
	if (*frame.Delta)(nil).Ops() != nil {
		t.Error("nil delta has ops")
	}
}

// inspectFixture is a small store's files, built once, for the fuzz target
// and the benchmarks: name -> content.
func inspectFixture(tb testing.TB, runs, atoms int) map[string][]byte {
	tb.Helper()
	ctx := context.Background()
	fs := vfs.NewMem()
	db, err := engine.Open("store", &engine.Options{FS: fs, NoSync: true, Nonces: inspectZeroNonces{}, DictSamples: -1,
		SegmentSize: 64 << 10, SnapshotEvery: -1, SnapshotInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	w := agent.NewWorld()
	for i := 0; i < runs; i++ {
		r, err := db.Run(ctx, workload.RunID(i))
		if err != nil {
			tb.Fatal(err)
		}
		for j := 0; j < atoms; j++ {
			if _, err := agent.Step(ctx, r, inspectSeed, w); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		tb.Fatal(err)
	}
	files := map[string][]byte{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fs.List(dir)
		if err != nil {
			tb.Fatal(err)
		}
		for _, n := range names {
			p := fs.PathJoin(dir, n)
			st, err := fs.Stat(p)
			if err != nil {
				tb.Fatal(err)
			}
			if st.IsDir() {
				walk(p)
				continue
			}
			f, err := fs.Open(p)
			if err != nil {
				tb.Fatal(err)
			}
			b := make([]byte, st.Size())
			if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
				tb.Fatal(err)
			}
			f.Close()
			files[p] = b
		}
	}
	walk("store")
	return files
}

func inspectMemStore(tb testing.TB, files map[string][]byte) vfs.FS {
	fs := vfs.NewMem()
	for name, b := range files {
		if err := fs.MkdirAll(fs.PathDir(name), 0o755); err != nil {
			tb.Fatal(err)
		}
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := f.Write(b); err != nil {
			tb.Fatal(err)
		}
		f.Close()
	}
	return fs
}

// FuzzInspect replaces the payload of one log record of a real store with
// fuzzed bytes (same length, log checksum recomputed so that the engine's
// decoders see them) and checks that Inspect, Atom and StateAt return
// errors, never panic.
func FuzzInspect(f *testing.F) {
	files := inspectFixture(f, 2, 3)
	fs := inspectMemStore(f, files)
	type loc struct {
		seg  string
		off  int64
		size int
	}
	var recs []loc
	err := engine.Scan(context.Background(), "store", fs, func(r *engine.LogRecord) error {
		recs = append(recs, loc{fmt.Sprintf("store/wal/%016x.wal", r.Pos.Segment), r.Pos.Offset, r.Size})
		f.Add(uint8(len(recs)-1), append([]byte(nil), r.Record...))
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		l := recs[int(which)%len(recs)]
		seg := bytes.Clone(files[l.seg])
		payload := seg[l.off+wal.RecordHeaderSize : l.off+wal.RecordHeaderSize+int64(l.size)]
		clear(payload)
		copy(payload, data)
		h := seg[l.off : l.off+wal.RecordHeaderSize]
		var id [8]byte
		var segID uint64
		fmt.Sscanf(l.seg, "store/wal/%x.wal", &segID)
		binary.LittleEndian.PutUint64(id[:], segID)
		c := crc32.Update(0, castagnoli, id[:])
		c = crc32.Update(c, castagnoli, h[4:16])
		c = crc32.Update(c, castagnoli, payload)
		binary.LittleEndian.PutUint32(h[0:4], c)
		mod := maps.Clone(files)
		mod[l.seg] = seg
		ctx := context.Background()
		in, err := engine.Inspect(ctx, "store", &engine.InspectOptions{FS: inspectMemStore(t, mod)})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		defer in.Close()
		for _, r := range in.Runs() {
			for seq := uint64(1); seq <= r.LastSeq; seq++ {
				if a, err := in.Atom(ctx, r.ID, seq); err == nil {
					_ = a.Delta.Ops()
				}
			}
			in.StateAt(ctx, r.ID, r.LastSeq)
		}
	})
}

// BenchmarkScan reads a store's log through Scan (every record decoded and
// decompressed) beside the bare read-only log reader on the same files, the
// floor Scan sits on.
func BenchmarkScan(b *testing.B) {
	files := inspectFixture(b, 4, 250)
	fs := inspectMemStore(b, files)
	var logBytes int64
	engine.Scan(context.Background(), "store", fs, func(r *engine.LogRecord) error {
		logBytes += int64(r.Size)
		return nil
	})
	b.Run("engine.Scan", func(b *testing.B) {
		b.SetBytes(logBytes)
		for b.Loop() {
			n := 0
			if err := engine.Scan(context.Background(), "store", fs, func(*engine.LogRecord) error { n++; return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wal.Reader", func(b *testing.B) {
		b.SetBytes(logBytes)
		for b.Loop() {
			l, err := wal.Open("store/wal", &wal.Options{FS: fs, ReadOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			rd, err := l.NewReader(wal.Pos{})
			if err != nil {
				b.Fatal(err)
			}
			for rd.Next() {
			}
			if err := rd.Err(); err != nil {
				b.Fatal(err)
			}
			rd.Close()
			l.Close()
		}
	})
	b.Run("engine.Inspect", func(b *testing.B) {
		b.SetBytes(logBytes)
		for b.Loop() {
			in, err := engine.Inspect(context.Background(), "store", &engine.InspectOptions{FS: fs})
			if err != nil {
				b.Fatal(err)
			}
			in.Close()
		}
		b.ReportMetric(1000, "atoms/op")
	})
}

// TestInspectFailedAttempt: an atom that failed is not in flight, and its
// failed action is not in doubt.
func TestInspectFailedAttempt(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	db, err := engine.Open("store", &engine.Options{FS: fs, NoSync: true, DictSamples: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	atom, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, err := atom.Do(ctx, ledger.Action{Tool: "t", Args: []byte(`{}`)}, func(context.Context, string) ([]byte, error) {
		return nil, boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Do: %v", err)
	}
	check := func(wantInFlight uint64) {
		t.Helper()
		in, err := engine.Inspect(ctx, "store", &engine.InspectOptions{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		s, _ := in.Run("r")
		if s.Running != wantInFlight || len(s.InDoubt) != 0 {
			t.Errorf("running %d (want %d), in doubt %+v", s.Running, wantInFlight, s.InDoubt)
		}
	}
	check(1) // failed action, atom still running
	if err := atom.Fail(ctx, "gave up"); err != nil {
		t.Fatal(err)
	}
	check(0)
	in, err := engine.Inspect(ctx, "store", &engine.InspectOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if s, _ := in.Run("r"); s.Fails != 1 {
		t.Errorf("fails %d, want 1", s.Fails)
	}
}

// TestRunAtomIndexed reads atoms of a reopened store, whose positions come
// from the atom index in Pebble, through Run.Atom, and compares them with
// the read-only Inspector's.
func TestRunAtomIndexed(t *testing.T) {
	ctx := context.Background()
	fs := inspectMemStore(t, inspectFixture(t, 2, 4))
	db, err := engine.Open("store", &engine.Options{FS: fs, NoSync: true, DictSamples: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	in, err := engine.Inspect(ctx, "store", &engine.InspectOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for _, rs := range in.Runs() {
		r, err := db.Run(ctx, rs.ID)
		if err != nil {
			t.Fatal(err)
		}
		for seq := uint64(1); seq <= rs.LastSeq; seq++ {
			want, err := in.Atom(ctx, rs.ID, seq)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Atom(ctx, seq)
			if err != nil {
				t.Fatalf("Run.Atom(%s, %d): %v", rs.ID, seq, err)
			}
			if got.Pos != want.Pos || got.Head != want.Head || !cmp.Equal(got.Actions, want.Actions) ||
				!cmp.Equal(got.Delta.Ops(), want.Delta.Ops()) {
				t.Errorf("%s/%d: Run.Atom %+v\nInspector.Atom %+v", rs.ID, seq, got, want)
			}
		}
		if _, err := r.Atom(ctx, rs.LastSeq+1); !errors.Is(err, engine.ErrSeqOutOfRange) {
			t.Errorf("Run.Atom beyond the last seq: %v", err)
		}
	}
}
