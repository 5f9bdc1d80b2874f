package layout

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

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
	f.Fuzz(func(t *testing.T, b []byte) {
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
