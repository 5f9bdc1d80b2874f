package wait

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// TestTableOverlay: an index that reads its last capture as a table, under
// an overlay of what changed since (records, Taken, Gone), through
// captures that replace the table and restarts that load it with the
// log's tail, answers every query as an index that never had a table
// (the map of version 1), given the same records and calls, after each
// step.
func TestTableOverlay(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	clock := func() time.Time { return time.Unix(0, 1) }
	rounds := 150
	if testing.Short() {
		rounds = 40
	}
	for round := range rounds {
		recs, runs, senders := randomRecords(rng, 1+rng.IntN(150))
		ref := New(clock) // no table, ever
		if err := ref.Load(listSource(nil)); err != nil {
			t.Fatal(err)
		}
		x := New(clock)
		if err := x.Load(listSource(nil)); err != nil {
			t.Fatal(err)
		}
		var gen uint64
		gone := map[string]bool{}
		var steps []string
		for i := 0; i < len(recs); {
			var step string
			switch k := rng.IntN(100); {
			case k < 70:
				r := recs[i]
				i++
				if gone[r.Run] {
					continue // the engine writes nothing of a run that ended
				}
				ref.Apply(r, r.Wait.Payload)
				x.Apply(r, r.Wait.Payload)
				step = fmt.Sprintf("apply %d (%s of %s at %d)", i-1, r.Kind, r.Run, r.Seq)
			case k < 82:
				run, seq := runs[rng.IntN(len(runs))], uint64(rng.IntN(4))
				ref.Taken(run, seq)
				x.Taken(run, seq)
				step = fmt.Sprintf("taken %s %d", run, seq)
			case k < 85:
				run := runs[rng.IntN(len(runs))]
				gone[run] = true
				ref.Gone(run)
				x.Gone(run)
				step = "gone " + run
			case k < 93:
				gen++
				if _, err := x.Capture(gen, wal.Pos{Segment: 1 << 20}, nil); err != nil {
					t.Fatal(err)
				}
				step = fmt.Sprintf("capture %d", gen)
			default:
				// A restart: WAITS captured now, its replay position the
				// next record's; the log is what was applied.
				gen++
				replay := wal.Pos{Segment: 1 << 20}
				if i < len(recs) {
					replay = recs[i].Pos
				}
				file, err := x.Capture(gen, replay, nil)
				if err != nil {
					t.Fatal(err)
				}
				var why string
				x = New(clock)
				x.From(gen, replay)
				if err := x.Load(fileSource(recs[:i], file, &why)); err != nil || why != "" {
					t.Fatalf("round %d: restart: %v %s", round, err, why)
				}
				step = fmt.Sprintf("restart %d", gen)
			}
			steps = append(steps, step)
			if got, want := dump(x, runs, senders), dump(ref, runs, senders); got != want {
				t.Fatalf("round %d, after %v:\nwith a table\n%s\nwithout\n%s", round, steps, got, want)
			}
			if x.Rebuilt() != "" {
				t.Fatalf("round %d: rebuilt: %s", round, x.Rebuilt())
			}
		}
	}
}

// sleepersLog is the log of n runs each asleep until 1000+(i*7919)%n,
// some of them woken by an event or a timeout already, and the index of
// it captured as WAITS (gen 3, replay past the log).
func sleepersLog(t *testing.T, n int) ([]*record.Record, []string, []byte) {
	var recs []*record.Record
	var runs []string
	for i := range n {
		run := fmt.Sprintf("run-%05d", i)
		runs = append(runs, run)
		r := rec(record.KindWait, run, 1, record.WaitFields{At: 10, Name: "go", Deadline: int64(1000 + (i*7919)%n)})
		recs = append(recs, r)
		switch i % 7 {
		case 0:
			recs = append(recs, rec(record.KindEvent, run, 1, record.WaitFields{At: 20, Name: "go", Sender: "s" + run, Payload: []byte("yes")}))
		case 1:
			recs = append(recs, rec(record.KindWake, run, 1, record.WaitFields{At: 30, Reason: record.WakeTimeout}))
		}
	}
	for i, r := range recs {
		r.Pos = wal.Pos{Segment: 1, Offset: int64(i) * 64}
	}
	x := New(fixedClock)
	if err := x.Load(listSource(recs)); err != nil {
		t.Fatal(err)
	}
	file, err := x.Capture(3, wal.Pos{Segment: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return recs, runs, file
}

// everything asks the index all it answers, in an order of the seed's.
func everything(x *Index, runs []string, rng *rand.Rand) {
	switch rng.IntN(4) {
	case 0:
		x.Due(1<<62, 1<<20)
	case 1:
		x.Ready(1 << 20)
	case 2:
		x.NextDeadline()
	case 3:
		x.Current(runs[rng.IntN(len(runs))], 0)
	}
}

// TestTableDamagedAfterLoad: a block of WAITS damaged, beyond the ones
// its load reads, is met by a later query; the index is then rebuilt
// from the log (Rebuilt says why) and answers as the log does: never a
// wrong answer.
func TestTableDamagedAfterLoad(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 12))
	recs, runs, file := sleepersLog(t, 2000)
	whole := New(fixedClock)
	if err := whole.Load(listSource(recs)); err != nil {
		t.Fatal(err)
	}
	want := dump(whole, runs, nil)
	if len(file) < 4*layout.WaitsBlock {
		t.Fatalf("WAITS of %d bytes: too small to test its blocks", len(file))
	}
	for range 20 {
		b := slices.Clone(file)
		at := layout.WaitsBlock + rng.IntN(int(binary.LittleEndian.Uint64(b[64:]))-layout.WaitsBlock)
		b[at] ^= 1 << rng.IntN(8)
		var why string
		x := New(fixedClock)
		x.From(3, wal.Pos{Segment: 2})
		if err := x.Load(fileSource(recs, b, &why)); err != nil {
			t.Fatal(err)
		}
		if why != "" {
			t.Fatalf("byte %d flipped: the load read it (%s); want it met later", at, why)
		}
		for range 5 {
			everything(x, runs, rng)
		}
		if got := dump(x, runs, nil); got != want {
			t.Fatalf("byte %d flipped: %s", at, firstDiff(got, want))
		}
		if x.Rebuilt() == "" || x.Rebuilt() != why {
			t.Fatalf("byte %d flipped: met, yet Rebuilt says %q (Rebuilding %q)", at, x.Rebuilt(), why)
		}
	}
}

// reseal makes the checksums of a WAITS version 2 whose bytes were
// changed good again: a forger's file. A change that moved the entries'
// end (a byte of the header's field) out of the file leaves no checksums
// to make: the file stays as it is, damaged.
func reseal(b []byte) {
	le := binary.LittleEndian
	end := int(min(le.Uint64(b[64:]), uint64(len(b))))
	if end < 80 || end+4*((end+layout.WaitsBlock-1)/layout.WaitsBlock) > len(b)-4 {
		return
	}
	le.PutUint32(b[72:], crc32c.Checksum(b[:72]))
	for k := 0; k < end; k += layout.WaitsBlock {
		le.PutUint32(b[end+4*(k/layout.WaitsBlock):], crc32c.Checksum(b[k:min(k+layout.WaitsBlock, end)]))
	}
	le.PutUint32(b[len(b)-4:], crc32c.Checksum(b[end:len(b)-4]))
}

// TestTableForged: a WAITS with good checksums whose sections do not
// agree with its entries (a deadline entry naming another run, or
// another time; a ready entry naming a run that is not ready; an offset
// out of place), or with any byte changed, never makes the index answer
// other than the log, nor panic: what it cannot check is what a
// self-consistent forgery changes (docs/DESIGN.md, "The log is the
// truth").
func TestTableForged(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	if s := os.Getenv("WAIT_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 13))
	recs, runs, file := sleepersLog(t, 300)
	whole := New(fixedClock)
	if err := whole.Load(listSource(recs)); err != nil {
		t.Fatal(err)
	}
	want := dump(whole, runs, nil)
	tb, err := layout.OpenWaitsTable("WAITS", file)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	runsAt := 80 + 12*tb.Timers
	readyAt := runsAt + 8*tb.Runs
	forged := map[string]func(b []byte){
		"a deadline entry names another run": func(b []byte) {
			k := 80 + 12*rng.IntN(tb.Timers)
			le.PutUint32(b[k+8:], le.Uint32(b[k+8:])^1)
		},
		"a deadline entry says another time": func(b []byte) {
			k := 80 + 12*rng.IntN(tb.Timers)
			le.PutUint64(b[k:], le.Uint64(b[k:])-1)
		},
		"a ready entry names a run not ready": func(b []byte) {
			k := readyAt + 4*rng.IntN(tb.ReadyLen)
			le.PutUint32(b[k:], le.Uint32(b[k:])+2)
		},
		"an offset out of place": func(b []byte) {
			k := runsAt + 8*rng.IntN(tb.Runs)
			le.PutUint64(b[k:], le.Uint64(b[k:])+uint64(1+rng.IntN(40)))
		},
		"any byte": func(b []byte) {
			b[rng.IntN(int(le.Uint64(b[64:])))] ^= 1 << rng.IntN(8)
		},
	}
	for _, what := range slices.Sorted(maps.Keys(forged)) {
		f := forged[what]
		for range 30 {
			b := slices.Clone(file)
			f(b)
			reseal(b)
			var why string
			x := New(fixedClock)
			x.From(3, wal.Pos{Segment: 2})
			if err := x.Load(fileSource(recs, b, &why)); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				everything(x, runs, rng)
			}
			got := dump(x, runs, nil)
			if (what == "any byte" || what == "an offset out of place") && got != want {
				// A changed byte the entries' own rules allow (a time, a
				// seq, a mark) is a self-consistent forgery of that entry:
				// it is answered until a section read against it (by the
				// dump's own Due or Ready) shows it, or, if none does,
				// until the reconcile with the log. An offset moved makes
				// a lookup by id compare with bytes that parse as an id
				// until the entry is read whole.
				if x.Rebuilt() == "" {
					if what != "any byte" {
						t.Fatalf("%s: answered otherwise than the log, and never found", what)
					}
					continue
				}
				got = dump(x, runs, nil)
			}
			if got != want {
				t.Fatalf("%s (rebuilt %q): %s", what, x.Rebuilt(), firstDiff(got, want))
			}
		}
	}
}

// firstDiff is the first line where two dumps differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d: the index says\n%.3000s\nthe log\n%.3000s", i, g[i], w[i])
		}
	}
	return fmt.Sprintf("%d lines, the log's %d", len(g), len(w))
}

func fixedClock() time.Time { return time.Unix(0, 5) }
