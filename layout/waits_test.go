package layout

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

func sampleWaits() *Waits {
	return &Waits{Gen: 3, Replay: wal.Pos{Segment: 2, Offset: 4096}, High: 1000, Runs: []WaitsRun{
		{ID: "a", Mark: wal.Pos{Segment: 2, Offset: 5000}, Wait: &WaitsWait{Seq: 4, Name: "go", Declared: 10, Deadline: 50, Outcome: 1, Ended: 12, Ready: 1,
			Event: &WaitsEvent{Name: "go", Sender: "s1", Seq: 4, Sent: 12, Payload: []byte("yes")}},
			Pending: []WaitsEvent{{Name: "later", Sender: "s2", Seq: 4, Sent: 13, Payload: []byte("kept")}},
			Senders: []WaitsSender{{ID: "s1"}, {ID: "s2"}}},
		{ID: "b", Mark: wal.Pos{Segment: 1, Offset: 10}, Wait: &WaitsWait{Seq: 0, Declared: 20, Deadline: 900}},
		{ID: "c", Mark: wal.Pos{Segment: 1, Offset: 20}, Wait: &WaitsWait{Seq: 2, Name: "x", Declared: 30, Outcome: 3, Ended: 40}},
	}}
}

// TestWaitsRoundTrip: WAITS encodes and decodes to itself.
func TestWaitsRoundTrip(t *testing.T) {
	w := sampleWaits()
	b := w.Marshal()
	got, err := ParseWaits("WAITS", b)
	if err != nil {
		t.Fatal(err)
	}
	if again := got.Marshal(); string(again) != string(b) {
		t.Fatal("decoded and encoded again, WAITS differs")
	}
	if got.Runs[0].Wait.Event.Sender != "s1" || got.Runs[1].Wait.Deadline != 900 || got.Runs[2].Wait.Outcome != 3 || got.High != 1000 {
		t.Fatalf("decoded %+v", got)
	}
}

// TestWaitsMalformed: a truncated or altered WAITS, or one whose content
// breaks a rule even with a good checksum, is a *record.CorruptionError,
// never a panic.
func TestWaitsMalformed(t *testing.T) {
	good := sampleWaits().Marshal()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	for n := range len(good) {
		if _, err := ParseWaits("WAITS", good[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", n)
		}
	}
	for range 2000 {
		b := append([]byte(nil), good...)
		b[rng.IntN(len(b))] ^= byte(1 << rng.IntN(8))
		if _, err := ParseWaits("WAITS", b); err == nil {
			t.Fatal("a flipped bit: no error")
		}
	}
	for name, f := range map[string]func(w *Waits){
		"unsorted":              func(w *Waits) { w.Runs[0].ID, w.Runs[1].ID = "b", "a" },
		"twice":                 func(w *Waits) { w.Runs[1].ID = "a" },
		"outcome":               func(w *Waits) { w.Runs[1].Wait.Outcome = 9 },
		"open yet ended":        func(w *Waits) { w.Runs[1].Wait.Ended = 5 },
		"cancelled yet ready":   func(w *Waits) { w.Runs[2].Wait.Ready = 2 },
		"delivered, not ready":  func(w *Waits) { w.Runs[0].Wait.Ready = 0 },
		"ready place twice":     func(w *Waits) { w.Runs[2].Wait.Outcome, w.Runs[2].Wait.Ready = 2, 1 },
		"event of another name": func(w *Waits) { w.Runs[0].Wait.Event.Name = "stop" },
		"timer without time":    func(w *Waits) { w.Runs[1].Wait.Deadline = 0 },
		"senders unsorted":      func(w *Waits) { w.Runs[0].Senders[0].ID = "s3" },
		"event without sender":  func(w *Waits) { w.Runs[0].Pending[0].Sender = "" },
		"bad run id":            func(w *Waits) { w.Runs[0].ID = "" },
	} {
		w := sampleWaits()
		f(w)
		_, err := ParseWaits("WAITS", w.Marshal())
		var ce *record.CorruptionError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a corruption error", name, err)
		}
	}
}

// FuzzParseWaits: any bytes parse or fail with a corruption error, never
// panic; what parses encodes to the same bytes.
func FuzzParseWaits(f *testing.F) {
	f.Add(sampleWaits().Marshal())
	f.Add((&Waits{Gen: 1}).Marshal())
	v2 := sampleWaits()
	v2.Version = 2
	f.Add(v2.Marshal())
	f.Add((&Waits{Version: 2, Gen: 1}).Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		if tb, err := OpenWaitsTable("WAITS", b); err == nil {
			readAll(tb) // read in place: errors, never a panic
		}
		w, err := ParseWaits("WAITS", b)
		if err != nil {
			var ce *record.CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("not a corruption error: %v", err)
			}
			return
		}
		if again := w.Marshal(); string(again) != string(b) {
			t.Fatal("parsed WAITS encodes to other bytes")
		}
	})
}

// TestWaitsTableRoundTrip: version 2 encodes and decodes to itself, and
// its table answers each run, deadline and ready place read in place.
func TestWaitsTableRoundTrip(t *testing.T) {
	w := sampleWaits()
	w.Version = 2
	b := w.Marshal()
	got, err := ParseWaits("WAITS", b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 || string(got.Marshal()) != string(b) {
		t.Fatal("decoded and encoded again, WAITS version 2 differs")
	}
	if got.Runs[0].Wait.Event.Sender != "s1" || got.Runs[1].Wait.Deadline != 900 || got.Runs[2].Wait.Outcome != 3 || got.High != 1000 {
		t.Fatalf("decoded %+v", got)
	}
	tb, err := OpenWaitsTable("WAITS", b)
	if err != nil {
		t.Fatal(err)
	}
	if tb.Runs != 3 || tb.Timers != 1 || tb.ReadyLen != 1 || tb.Open != 0 || tb.Pending != 1 || tb.Gen != 3 || tb.Replay != w.Replay {
		t.Fatalf("table header %+v", tb)
	}
	if at, run, err := tb.Deadline(0); err != nil || at != 900 || run != 1 {
		t.Fatalf("deadline 0: %d, %d, %v", at, run, err)
	}
	if run, err := tb.ReadyRun(0); err != nil || run != 0 {
		t.Fatalf("ready 0: %d, %v", run, err)
	}
	for i, id := range []string{"a", "b", "c"} {
		if k, ok, err := tb.Find(id); err != nil || !ok || k != i {
			t.Fatalf("find %q: %d %v %v", id, k, ok, err)
		}
	}
	for _, id := range []string{"", "0", "aa", "d"} {
		if _, ok, err := tb.Find(id); err != nil || ok {
			t.Fatalf("find %q: %v %v", id, ok, err)
		}
	}
	var r WaitsRun
	if err := tb.Run(2, nil, &r); err != nil || r.ID != "c" || r.Wait.Name != "x" {
		t.Fatalf("run 2: %+v, %v", r, err)
	}
	if _, _, err := tb.Deadline(1); err == nil {
		t.Fatal("deadline past the section: no error")
	}
}

// bigWaits is a version 2 table of n runs, each asleep, over many blocks.
func bigWaits(n int) *Waits {
	w := &Waits{Version: 2, Gen: 7, High: int64(n) + 10}
	for i := range n {
		w.Runs = append(w.Runs, WaitsRun{ID: fmt.Sprintf("run-%06d", i), Mark: wal.Pos{Segment: 1, Offset: int64(i)},
			Wait: &WaitsWait{Seq: 1, Declared: 1, Deadline: int64((i*7919)%n + 2)}})
	}
	return w
}

// TestWaitsTableDamageMetLater: a damaged block of version 2 opens (the
// open reads the header and the checksums only) and is met, as a
// corruption error, by the read that covers it, and only by those.
func TestWaitsTableDamageMetLater(t *testing.T) {
	w := bigWaits(3000)
	b := w.Marshal()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 5))
	tb0, err := OpenWaitsTable("WAITS", b)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		c := append([]byte(nil), b...)
		at := WaitsBlock + rng.IntN(tb0.end-WaitsBlock) // past the header's block
		c[at] ^= byte(1 << rng.IntN(8))
		tb, err := OpenWaitsTable("WAITS", c)
		if err != nil {
			t.Fatalf("byte %d flipped: the open read it: %v", at, err)
		}
		met := false
		var r WaitsRun
		for i := range tb.Runs {
			err := tb.Run(i, nil, &r)
			var ce *record.CorruptionError
			if err != nil && !errors.As(err, &ce) {
				t.Fatalf("run %d: %v, want a corruption error", i, err)
			}
			if err != nil {
				met = true
			} else if r.ID != w.Runs[i].ID || r.Wait.Deadline != w.Runs[i].Wait.Deadline {
				t.Fatalf("byte %d flipped: run %d read as %+v", at, i, r)
			}
		}
		for k := range tb.Timers {
			if _, _, err := tb.Deadline(k); err != nil {
				met = true
			}
		}
		if !met {
			t.Fatalf("byte %d flipped: no read met it", at)
		}
		if _, err := ParseWaits("WAITS", c); err == nil {
			t.Fatalf("byte %d flipped: ParseWaits took it", at)
		}
	}
}

// TestWaitsTableMalformed: a truncated, flipped or forged version 2 (with
// good checksums, made by hand) is a corruption error, never a panic.
func TestWaitsTableMalformed(t *testing.T) {
	w := sampleWaits()
	w.Version = 2
	good := w.Marshal()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	for n := range len(good) {
		if _, err := ParseWaits("WAITS", good[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", n)
		}
	}
	for range 2000 {
		b := append([]byte(nil), good...)
		b[rng.IntN(len(b))] ^= byte(1 << rng.IntN(8))
		if _, err := ParseWaits("WAITS", b); err == nil {
			t.Fatal("a flipped bit: no error")
		}
	}
	// Forged: a byte changed and every checksum made good again.
	for range 2000 {
		b := reseal(t, good, rng)
		tb, err := OpenWaitsTable("WAITS", b)
		if err == nil {
			readAll(tb)
		}
		if w2, err := ParseWaits("WAITS", b); err == nil && string(w2.Marshal()) != string(b) {
			t.Fatal("a forged file parsed, and encodes to other bytes")
		}
	}
}

// reseal changes a random byte of a version 2 file and makes its
// checksums good again.
func reseal(t *testing.T, good []byte, rng *rand.Rand) []byte {
	b := append([]byte(nil), good...)
	le := binary.LittleEndian
	end := int(le.Uint64(b[64:]))
	b[rng.IntN(end)] ^= byte(1 << rng.IntN(8))
	end = int(le.Uint64(b[64:]))
	if end > len(b)-4 || end < 0 {
		return b
	}
	le.PutUint32(b[72:], crc32c.Checksum(b[:72]))
	for k := 0; k < end && end+4*(k/WaitsBlock)+4 <= len(b)-4; k += WaitsBlock {
		le.PutUint32(b[end+4*(k/WaitsBlock):], crc32c.Checksum(b[k:min(k+WaitsBlock, end)]))
	}
	le.PutUint32(b[len(b)-4:], crc32c.Checksum(b[end:len(b)-4]))
	return b
}

// readAll reads everything a table offers, as a reader would (errors
// allowed, panics not).
func readAll(tb *WaitsTable) {
	var r WaitsRun
	for i := range tb.Runs + 1 {
		tb.Run(i, nil, &r)
		tb.RunID(i)
	}
	for k := range tb.Timers + 1 {
		tb.Deadline(k)
	}
	for k := range tb.ReadyLen + 1 {
		tb.ReadyRun(k)
	}
	tb.Find("b")
}
