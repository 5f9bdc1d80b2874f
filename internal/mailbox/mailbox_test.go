package mailbox

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
	"github.com/google/go-cmp/cmp"
)

// atom is a committed atom of the fake log.
type atom struct {
	run      string
	seq      uint64
	at       wal.Pos
	sent     []record.SentMessage
	consumed []record.MessageID
	erased   bool
}

// fakeLog is a Source over a log held in memory: atoms, and ends or
// deletions (an atom with no seq and kind set).
type fakeLog struct {
	recs    []record.Record // Kind, Run, Seq, Pos
	atoms   map[wal.Pos]*atom
	inbox   []byte // INBOX; nil: missing
	rebuilt []string
	reads   int // Messages calls
}

func newFakeLog() *fakeLog { return &fakeLog{atoms: map[wal.Pos]*atom{}} }

func (l *fakeLog) pos() wal.Pos { return wal.Pos{Segment: 1, Offset: int64(100 * (len(l.recs) + 1))} }

func (l *fakeLog) commit(run string, seq uint64, sent []record.SentMessage, consumed ...record.MessageID) *record.Record {
	p := l.pos()
	l.atoms[p] = &atom{run: run, seq: seq, at: p, sent: sent, consumed: consumed}
	l.recs = append(l.recs, record.Record{Kind: record.KindAtom, Run: run, Seq: seq, Pos: p})
	return &l.recs[len(l.recs)-1]
}

func (l *fakeLog) gone(k record.Kind, run string) *record.Record {
	l.recs = append(l.recs, record.Record{Kind: k, Run: run, Pos: l.pos()})
	return &l.recs[len(l.recs)-1]
}

func (l *fakeLog) InboxFile(gen uint64) (string, []byte, error) {
	if l.inbox == nil {
		return "INBOX", nil, fmt.Errorf("open INBOX: %w", os.ErrNotExist)
	}
	return "INBOX", l.inbox, nil
}

func (l *fakeLog) Messages(a *record.Record) ([]record.SentMessage, []record.MessageID, error) {
	l.reads++
	x := l.atoms[a.Pos]
	if x == nil {
		return nil, nil, fmt.Errorf("no atom at %v", a.Pos)
	}
	if x.erased {
		return nil, nil, nil
	}
	return x.sent, x.consumed, nil
}

func (l *fakeLog) Scan(to wal.Pos, fn func(*record.Record) error) error {
	for i := range l.recs {
		r := &l.recs[i]
		if !r.Pos.Less(to) {
			break
		}
		if x := l.atoms[r.Pos]; r.Kind == record.KindAtom && x != nil && x.erased {
			continue
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (l *fakeLog) Rebuilding(why string) { l.rebuilt = append(l.rebuilt, why) }

func msgs(to string, payloads ...string) []record.SentMessage {
	var out []record.SentMessage
	for _, p := range payloads {
		out = append(out, record.SentMessage{To: to, Payload: []byte(p)})
	}
	return out
}

func id(from string, seq uint64, index uint32) record.MessageID {
	return record.MessageID{From: from, Seq: seq, Index: index}
}

// texts renders an inbox as "from:payload".
func texts(t *testing.T, b *Box, to string) []string {
	t.Helper()
	ms, err := b.List(to)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		if m.To != to {
			t.Fatalf("List(%q) holds a message to %q", to, m.To)
		}
		out = append(out, m.ID.From+":"+string(m.Payload))
	}
	return out
}

func wantInbox(t *testing.T, b *Box, to string, want ...string) {
	t.Helper()
	if d := cmp.Diff(want, texts(t, b, to)); d != "" {
		t.Fatalf("inbox of %q (-want +got):\n%s", to, d)
	}
}

// publish commits an atom in the log and publishes it to b.
func publish(l *fakeLog, b *Box, run string, seq uint64, sent []record.SentMessage, consumed ...record.MessageID) {
	r := l.commit(run, seq, sent, consumed...)
	b.Publish(run, seq, r.Pos, sent, consumed)
}

// TestOrderAndConsume: Receive takes the oldest unclaimed message by the
// sending atom's log position, per sender in order; a commit consumes
// what its Draft received; a Fail gives it back.
func TestOrderAndConsume(t *testing.T) {
	l := newFakeLog()
	var b Box
	b.Reset(l, nil, wal.Pos{})
	publish(l, &b, "a", 1, msgs("r", "a1", "a2"))
	publish(l, &b, "b", 1, msgs("r", "b1"))
	publish(l, &b, "a", 2, msgs("r", "a3"))
	wantInbox(t, &b, "r", "a:a1", "a:a2", "b:b1", "a:a3")

	var d Draft
	m, ok, _, err := b.Receive("r", "b", &d, true)
	if err != nil || !ok || string(m.Payload) != "b1" {
		t.Fatalf("ReceiveFrom b: %v %v %v", m, ok, err)
	}
	m, ok, _, _ = b.Receive("r", "", &d, true)
	if !ok || m.ID != id("a", 1, 0) {
		t.Fatalf("Receive: %v", m.ID)
	}
	if err := b.Consumable("r", 1, &d); err != nil {
		t.Fatal(err)
	}
	// A failed atom gives them back.
	b.Release("r", &d)
	if s, r := d.Counts(); s != 0 || r != 0 {
		t.Fatalf("a released Draft still counts %d sent, %d received", s, r)
	}
	var d2 Draft
	m, _, _, _ = b.Receive("r", "", &d2, true)
	if m.ID != id("a", 1, 0) {
		t.Fatalf("after a Release, Receive gave %v", m.ID)
	}
	m, _, _, _ = b.Receive("r", "", &d2, true)
	if m.ID != id("a", 1, 1) {
		t.Fatalf("second Receive gave %v", m.ID)
	}
	d2.Send("a", []byte("reply"))
	sent, consumed := d2.Record()
	if d := cmp.Diff([]record.MessageID{id("a", 1, 0), id("a", 1, 1)}, consumed); d != "" {
		t.Fatal(d)
	}
	if len(sent) != 1 || cap(sent) != 1 {
		t.Fatalf("sent %v (cap %d)", sent, cap(sent))
	}
	if err := b.Consumable("r", 1, &d2); err != nil {
		t.Fatal(err)
	}
	publish(l, &b, "r", 1, sent, consumed...)
	wantInbox(t, &b, "r", "b:b1", "a:a3")
	wantInbox(t, &b, "a", "r:reply")
	// An empty Draft records nothing.
	var d3 Draft
	if s, c := d3.Record(); s != nil || c != nil {
		t.Fatalf("empty Draft: %v %v", s, c)
	}
}

// TestConsumableRefusesOutOfOrder: a Draft holding a message that is no
// longer first in its sender's queue cannot commit.
func TestConsumableRefusesOutOfOrder(t *testing.T) {
	l := newFakeLog()
	var b Box
	b.Reset(l, nil, wal.Pos{})
	publish(l, &b, "a", 1, msgs("r", "x", "y"))
	var d Draft
	if _, ok, _, _ := b.Receive("r", "", &d, false); !ok {
		t.Fatal("nothing received")
	}
	// Another writer's record consumed it meanwhile (as a forged log would).
	publish(l, &b, "r", 1, nil, id("a", 1, 0))
	err := b.Consumable("r", 2, &d)
	if err == nil || !strings.Contains(err.Error(), `run "r" seq 2: message`) {
		t.Fatalf("Consumable of a message consumed since: %v", err)
	}
}

// TestIdempotent: the same atom applied twice (INBOX already reflecting
// part of the tail) queues each message once, and a cursor never goes
// back.
func TestIdempotent(t *testing.T) {
	l := newFakeLog()
	var b Box
	b.Reset(l, nil, wal.Pos{})
	r1 := l.commit("a", 1, msgs("r", "1", "2"))
	r2 := l.commit("r", 1, nil, id("a", 1, 0))
	for range 2 {
		b.Publish("a", 1, r1.Pos, l.atoms[r1.Pos].sent, nil)
		b.Publish("r", 1, r2.Pos, nil, l.atoms[r2.Pos].consumed)
	}
	wantInbox(t, &b, "r", "a:2")
	b.Publish("a", 1, r1.Pos, l.atoms[r1.Pos].sent, nil)
	wantInbox(t, &b, "r", "a:2")
	// Once all is consumed, the sending atom again queues nothing, and an
	// older consumption moves no cursor back.
	b.Publish("r", 2, l.pos(), nil, []record.MessageID{id("a", 1, 1)})
	b.Publish("r", 1, r2.Pos, nil, l.atoms[r2.Pos].consumed)
	b.Publish("a", 1, r1.Pos, l.atoms[r1.Pos].sent, nil)
	wantInbox(t, &b, "r")
}

// TestGone: an ended run takes nothing more and its inbox is dropped; a
// deleted run's messages not consumed are withdrawn from every inbox.
func TestGone(t *testing.T) {
	l := newFakeLog()
	var b Box
	b.Reset(l, nil, wal.Pos{})
	publish(l, &b, "a", 1, msgs("r", "to r"))
	publish(l, &b, "a", 2, msgs("e", "to e"))
	b.Gone(record.KindEnd, "e")
	wantInbox(t, &b, "e")
	publish(l, &b, "a", 3, msgs("e", "late"))
	wantInbox(t, &b, "e")
	b.Gone(record.KindDelete, "a")
	wantInbox(t, &b, "r")
	publish(l, &b, "x", 1, msgs("r", "kept"))
	wantInbox(t, &b, "r", "x:kept")
}

// TestWake: a Receive with nothing gets a channel that the next message
// to its run closes, and so do an end and a Release.
func TestWake(t *testing.T) {
	l := newFakeLog()
	var b Box
	b.Reset(l, nil, wal.Pos{})
	var d Draft
	_, ok, wake, err := b.Receive("r", "", &d, false)
	if ok || wake != nil || err != nil {
		t.Fatalf("a Receive without wait: %v %v %v", ok, wake, err)
	}
	_, _, wake, _ = b.Receive("r", "", &d, true)
	select {
	case <-wake:
		t.Fatal("closed before any message")
	default:
	}
	publish(l, &b, "a", 1, msgs("other", "x"))
	select {
	case <-wake:
		t.Fatal("closed by a message to another run")
	default:
	}
	publish(l, &b, "a", 2, msgs("r", "x"))
	<-wake
	_, _, wake, _ = b.Receive("r", "x", &d, true) // none from x
	b.Gone(record.KindEnd, "r")
	<-wake
}

// TestTailBeforeLoad: events replayed or published before the inbox is
// loaded are applied in order on the first use; reflected ones only when
// INBOX is not used.
func TestTailBeforeLoad(t *testing.T) {
	l := newFakeLog()
	var b Box
	b.Reset(l, nil, wal.Pos{})
	b.Replayed(l.commit("a", 1, msgs("r", "1")), []byte("body"), false)
	b.Replayed(l.gone(record.KindEnd, "z"), nil, false)
	r := l.commit("a", 2, msgs("r", "2"))
	b.Publish("a", 2, r.Pos, l.atoms[r.Pos].sent, nil)
	if l.reads != 0 {
		t.Fatal("the log was read before the inbox was used")
	}
	wantInbox(t, &b, "r", "a:1", "a:2")
	if l.reads != 1 {
		t.Fatalf("%d reads of atoms, want 1 (the replayed one)", l.reads)
	}
	publish(l, &b, "a", 3, msgs("z", "to an ended run"))
	wantInbox(t, &b, "z")
}

// TestCheckpointRoundTrip: what Capture returns, written as INBOX, is
// what the next Open of that generation loads (the reflected tail is
// skipped); an INBOX of another generation, a damaged or a missing one is
// not used: the inbox is rebuilt from the log, reflected tail included.
func TestCheckpointRoundTrip(t *testing.T) {
	l := newFakeLog()
	var b Box
	b.Reset(l, nil, wal.Pos{})
	publish(l, &b, "a", 1, msgs("r", "1", "2"))
	publish(l, &b, "r", 1, nil, id("a", 1, 0))
	publish(l, &b, "a", 2, msgs("e", "gone"))
	b.Gone(record.KindEnd, "e")
	l.gone(record.KindEnd, "e")
	publish(l, &b, "d", 1, msgs("r", "withdrawn"))
	b.Gone(record.KindDelete, "d")
	l.gone(record.KindDelete, "d")
	// The tail after the replay position: one atom the checkpoint
	// reflects (committed before it was captured), one not.
	replay := l.pos()
	ra := l.commit("a", 3, msgs("r", "3"))
	b.Publish("a", 3, ra.Pos, l.atoms[ra.Pos].sent, nil)
	in, err := b.Capture(7, replay)
	if err != nil {
		t.Fatal(err)
	}
	b.Written(7, replay)
	l.inbox = in.Marshal()
	rb := l.commit("b", 1, msgs("r", "b"))
	want := []string{"a:2", "a:3", "b:b"}

	for _, c := range []struct {
		name    string
		gen     uint64
		inbox   []byte
		rebuilt string // a word of the reason; "": INBOX used
	}{
		{"used", 7, l.inbox, ""},
		{"other generation", 8, l.inbox, "checkpoint 7"},
		{"missing", 7, nil, "missing"},
		{"damaged", 7, append([]byte("garbage!"), l.inbox[8:]...), "inbox"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l.inbox, l.rebuilt, l.reads = c.inbox, nil, 0
			var b2 Box
			b2.Reset(l, &layout.Checkpoint{Gen: c.gen}, replay)
			b2.Replayed(ra, nil, true)
			b2.Replayed(rb, []byte("body"), false)
			if err := b2.Load(); err != nil {
				t.Fatal(err)
			}
			wantInbox(t, &b2, "r", want...)
			wantInbox(t, &b2, "e")
			why := b2.Rebuilt()
			if c.rebuilt == "" {
				if why != "" || len(l.rebuilt) != 0 || l.reads != 1 {
					t.Fatalf("INBOX not used: %q, %q, %d reads", why, l.rebuilt, l.reads)
				}
				again, err := b2.Capture(7, replay)
				if err != nil {
					t.Fatal(err)
				}
				was, now := in.Queues[0], again.Queues[0]
				if d := cmp.Diff(was.Pending[0], now.Pending[0]); d != "" || was.CursorSeq != now.CursorSeq || was.CursorIndex != now.CursorIndex {
					t.Fatalf("queue a->r changed (-was +now):\n%s", d)
				}
				if d := cmp.Diff([]any{in.Ended, in.Deleted}, []any{again.Ended, again.Deleted}); d != "" {
					t.Fatal(d)
				}
				return
			}
			if !strings.Contains(why, c.rebuilt) || len(l.rebuilt) != 1 || l.rebuilt[0] != why {
				t.Fatalf("rebuilt: %q, told %q; want a reason with %q", why, l.rebuilt, c.rebuilt)
			}
			// The deleted run stays deleted, its message withdrawn.
			publish(l, &b2, "d", 2, msgs("r", "after deletion"))
			wantInbox(t, &b2, "r", want...)
		})
	}
}

// TestLoadErrorSticky: a rebuild that cannot read the log fails every
// later use with the same error.
func TestLoadErrorSticky(t *testing.T) {
	l := newFakeLog()
	l.commit("a", 1, msgs("r", "x"))
	delete(l.atoms, l.recs[0].Pos) // unreadable
	var b Box
	b.Reset(l, &layout.Checkpoint{Gen: 3}, l.pos())
	err := b.Load()
	if err == nil {
		t.Fatal("a load over an unreadable atom succeeded")
	}
	if _, err2 := b.List("r"); !errors.Is(err2, err) && err2.Error() != err.Error() {
		t.Fatalf("List after a failed load: %v, want %v", err2, err)
	}
	var d Draft
	if _, _, _, err2 := b.Receive("r", "", &d, true); err2 == nil {
		t.Fatal("Receive after a failed load succeeded")
	}
	if _, err2 := b.Capture(4, l.pos()); err2 == nil {
		t.Fatal("Capture after a failed load succeeded")
	}
	// Events after the failure are neither queued nor applied.
	b.Publish("a", 2, l.pos(), msgs("r", "y"), nil)
}

// TestErasedAtomWithdrawn: a rebuild skips what an erased run's atoms sent.
func TestErasedAtomWithdrawn(t *testing.T) {
	l := newFakeLog()
	l.commit("a", 1, msgs("r", "erased"))
	l.atoms[l.recs[0].Pos].erased = true
	l.commit("b", 1, msgs("r", "kept"))
	var b Box
	b.Reset(l, &layout.Checkpoint{Gen: 1}, l.pos())
	wantInbox(t, &b, "r", "b:kept")
}
