package record

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/internal/goldenhex"
	"github.com/continuumdb/continuum/wal"
)

// TestGoldenWaitRecords pins the wait, event and wake records byte for
// byte (wait.go says they are frozen) and reads each back.
func TestGoldenWaitRecords(t *testing.T) {
	for _, c := range []struct {
		name string
		kind Kind
		w    WaitFields
		want string
	}{{
		name: "wait",
		kind: KindWait,
		w:    WaitFields{At: 1, Deadline: 3, Name: "ok"},
		want: `
			0e                               # kind wait
			02 7231                          # run id "r1"
			04                               # seq 4: the run's last seq
			` + hexHead + `                  # head: the run's head at seq 4
			` + hexHead2 + `                 # link, over the mark and what follows
			02                               # declared 1 (zigzag varint)
			06                               # deadline 3
			02 6f6b                          # name "ok"`,
	}, {
		name: "event",
		kind: KindEvent,
		w:    WaitFields{At: -1, Name: "ok", Sender: "h", Payload: []byte("yes")},
		want: `
			0f                               # kind event
			02 7231                          # run id "r1"
			04                               # seq 4
			` + hexHead + `                  # head
			` + hexHead2 + `                 # link
			01                               # sent -1 (zigzag varint)
			02 6f6b                          # name "ok"
			01 68                            # sender id "h"
			03 796573                        # payload "yes"`,
	}, {
		name: "wake",
		kind: KindWake,
		w:    WaitFields{At: 2, Reason: WakeTimeout},
		want: `
			10                               # kind wake
			02 7231                          # run id "r1"
			04                               # seq 4: the wait's
			` + hexHead + `                  # head
			` + hexHead2 + `                 # link
			04                               # at 2 (zigzag varint)
			01                               # reason: timeout`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			got := AppendWaitRecord(nil, c.kind, "r1", 4, head1, head2, &c.w)
			want := goldenhex.Decode(t, c.want)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s record encoding changed:\n got %x\nwant %x", c.name, got, want)
			}
			var r Record
			if err := (&Decoder{}).Decode(want, wal.Pos{Segment: 1, Offset: 64}, "seg", &r); err != nil {
				t.Fatal(err)
			}
			if r.Kind != c.kind || r.Kind.String() != c.name || r.Run != "r1" || r.Seq != 4 || r.Final != head1 || r.Head != head2 || r.Wait == nil ||
				r.Wait.At != c.w.At || r.Wait.Deadline != c.w.Deadline || r.Wait.Name != c.w.Name || r.Wait.Sender != c.w.Sender ||
				!bytes.Equal(r.Wait.Payload, c.w.Payload) || r.Wait.Reason != c.w.Reason ||
				!bytes.Equal(r.Payload, AppendWaitPayload(nil, c.kind, &c.w)) || !strings.HasPrefix(string(r.Payload), "continuum/"+c.name+"\x00") {
				t.Fatalf("read back %+v %+v", r, r.Wait)
			}
		})
	}
}

// TestWaitRecordRefused: records that break the rules of wait.go are
// damage, each with its reason.
func TestWaitRecordRefused(t *testing.T) {
	for _, c := range []struct {
		kind Kind
		w    WaitFields
		want string
	}{
		{KindWait, WaitFields{}, "a timer"},
		{KindWait, WaitFields{Name: "x", Deadline: -5}, "before 1970"},
		{KindWait, WaitFields{Name: strings.Repeat("n", MaxWaitName+1)}, "name"},
		{KindEvent, WaitFields{Sender: "s"}, "an event's name"},
		{KindEvent, WaitFields{Name: "n"}, "a sender id"},
		{KindWake, WaitFields{Reason: 3}, "unknown wake reason 3"},
	} {
		b := AppendWaitRecord(nil, c.kind, "r1", 1, head1, head2, &c.w)
		var r Record
		err := (&Decoder{}).Decode(b, wal.Pos{Segment: 1}, "seg", &r)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %+v: %v, want damage saying %q", c.kind, c.w, err, c.want)
		}
	}
	// A record cut short, or with bytes after its last field.
	b := AppendWaitRecord(nil, KindWake, "r1", 1, head1, head2, &WaitFields{Reason: WakeCancel})
	for _, bad := range [][]byte{b[:len(b)-1], append(bytes.Clone(b), 0)} {
		var r Record
		if err := (&Decoder{}).Decode(bad, wal.Pos{Segment: 1}, "seg", &r); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%x: %v, want ErrCorrupt", bad, err)
		}
	}
}

// FuzzDecodeWait: any bytes decode to a record or a *CorruptionError,
// never a panic; a wait, event or wake record re-encodes to its input,
// and its payload is the one its fields give.
func FuzzDecodeWait(f *testing.F) {
	f.Add(AppendWaitRecord(nil, KindWait, "r1", 4, chain.Hash{1}, chain.Hash{2}, &WaitFields{At: 5, Deadline: 9, Name: "approval"}))
	f.Add(AppendWaitRecord(nil, KindWait, "r1", 0, chain.Hash{1}, chain.Hash{2}, &WaitFields{At: 5, Deadline: 9}))
	f.Add(AppendWaitRecord(nil, KindEvent, "r1", 4, chain.Hash{1}, chain.Hash{2}, &WaitFields{At: 6, Name: "approval", Sender: "h1", Payload: []byte("yes")}))
	f.Add(AppendWaitRecord(nil, KindWake, "r1", 4, chain.Hash{1}, chain.Hash{2}, &WaitFields{At: 10, Reason: WakeTimeout}))
	f.Add(AppendWaitRecord(nil, KindWake, "r1", 4, chain.Hash{1}, chain.Hash{2}, &WaitFields{At: 10, Reason: WakeCancel}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Record
		err := (&Decoder{}).Decode(b, wal.Pos{Segment: 1, Offset: 64}, "seg", &r)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if r.Kind < KindWait || r.Kind > KindWake {
			return
		}
		if r.Wait == nil {
			t.Fatalf("a %v record without its fields", r.Kind)
		}
		if err := CheckWaitFields(r.Kind, r.Wait); err != nil {
			t.Fatalf("decoded fields that fail their check: %v", err)
		}
		if again := AppendWaitRecord(nil, r.Kind, r.Run, r.Seq, r.Final, r.Head, r.Wait); !bytes.Equal(again, b) {
			t.Fatalf("decoded %+v re-encodes to %x, not %x", r, again, b)
		}
		if p := AppendWaitPayload(nil, r.Kind, r.Wait); !bytes.Equal(p, r.Payload) {
			t.Fatalf("payload %x, the fields give %x", r.Payload, p)
		}
	})
}
