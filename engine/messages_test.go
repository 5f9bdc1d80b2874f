package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
)

// send commits one atom of run that sends each payload to to.
func send(t testing.TB, run *Run, to string, payloads ...string) {
	t.Helper()
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads {
		if err := a.Send(ctx, to, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Commit(ctx, new(frame.Delta).AppendScratch([]byte("sent"))); err != nil {
		t.Fatal(err)
	}
}

// inboxOf returns the payloads of run's inbox, "from:payload", in order.
func inboxOf(t testing.TB, run *Run) []string {
	t.Helper()
	ms, err := run.Inbox(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.From()+":"+string(m.Payload))
	}
	return out
}

func openRun(t testing.TB, db *DB, id string) *Run {
	t.Helper()
	r, err := db.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMessages: a message exists once its sending atom commits, never
// before nor for a failed atom; the receiver gets each sender's messages
// in order; consuming is the receiving atom's commit (a failed receiver
// gets them again); after a restart the inbox is the same, INBOX or no
// INBOX.
func TestMessages(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem)
	db := openTest(t, mem, opts)
	a, b, c := openRun(t, db, "a"), openRun(t, db, "b"), openRun(t, db, "c")

	// A failed sender sends nothing; a running one nothing yet.
	at, _ := a.Begin(ctx)
	if err := at.Send(ctx, "b", []byte("never")); err != nil {
		t.Fatal(err)
	}
	if got := inboxOf(t, b); got != nil {
		t.Fatalf("inbox before the sender committed: %q", got)
	}
	if err := at.Fail(ctx, "no"); err != nil {
		t.Fatal(err)
	}
	send(t, a, "b", "a1", "a2")
	send(t, c, "b", "c1")
	send(t, a, "b", "a3")
	if got, want := fmt.Sprint(inboxOf(t, b)), "[a:a1 a:a2 c:c1 a:a3]"; got != want {
		t.Fatalf("inbox %s, want %s", got, want)
	}

	// A receiver that fails gives its messages back.
	bt, _ := b.Begin(ctx)
	m, err := bt.Receive(ctx)
	if err != nil || string(m.Payload) != "a1" || m.ID != (MessageID{From: "a", Seq: 1, Index: 0}) || m.To != "b" {
		t.Fatalf("Receive = %+v, %v", m, err)
	}
	if err := bt.Fail(ctx, "retry"); err != nil {
		t.Fatal(err)
	}
	bt, _ = b.Begin(ctx)
	m1, _ := bt.ReceiveFrom(ctx, "c")
	m2, _ := bt.Receive(ctx)
	m3, _ := bt.Receive(ctx)
	if string(m1.Payload) != "c1" || string(m2.Payload) != "a1" || string(m3.Payload) != "a2" {
		t.Fatalf("received %q %q %q", m1.Payload, m2.Payload, m3.Payload)
	}
	if got := len(inboxOf(t, b)); got != 4 {
		t.Fatalf("inbox lists %d messages while the receiving atom runs, want 4", got)
	}
	if err := bt.Commit(ctx, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleUser, Content: string(m1.Payload)})); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(inboxOf(t, b)), "[a:a3]"; got != want {
		t.Fatalf("inbox after the commit %s, want %s", got, want)
	}

	// A message waits for a run that does not exist yet.
	send(t, a, "later", "hello")
	// An ended run takes none.
	if err := c.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	at, _ = a.Begin(ctx)
	if err := at.Send(ctx, "c", []byte("x")); !errors.Is(err, ErrRunEnded) {
		t.Fatalf("Send to an ended run: %v", err)
	}
	if err := at.Send(ctx, "", []byte("x")); !errors.Is(err, ErrInvalidRunID) {
		t.Fatalf("Send to an invalid id: %v", err)
	}
	if err := at.Send(ctx, "b", make([]byte, MaxMessageSize+1)); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("Send of a payload too large: %v", err)
	}
	if err := at.Fail(ctx, "done"); err != nil {
		t.Fatal(err)
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, drop := range []bool{false, true} {
		if drop {
			if err := mem.Remove("store/" + layout.InboxName); err != nil {
				t.Fatal(err)
			}
		}
		db2, err := Open("store", opts)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(inboxOf(t, openRun(t, db2, "b"))), "[a:a3]"; got != want {
			t.Fatalf("inbox after a restart (INBOX removed %v) %s, want %s", drop, got, want)
		}
		later := openRun(t, db2, "later")
		if got, want := fmt.Sprint(inboxOf(t, later)), "[a:hello]"; got != want {
			t.Fatalf("inbox of the run created after the send %s, want %s", got, want)
		}
		if why := db2.Stats().InboxRebuilt; (why != "") != drop {
			t.Fatalf("InboxRebuilt %q with INBOX removed %v", why, drop)
		}
		if err := db2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReceiveWaits: a Receive blocked on an empty inbox returns the
// message of a sender that commits meanwhile; one whose context ends
// returns its error. Run with -race.
func TestReceiveWaits(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, testOptions(mem))
	recv, sender := openRun(t, db, "recv"), openRun(t, db, "sender")
	a, _ := recv.Begin(ctx)
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := a.Receive(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive on an empty inbox: %v", err)
	}
	const n = 20
	got := make(chan string, n)
	go func() {
		for range n {
			m, err := a.Receive(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			got <- string(m.Payload)
		}
	}()
	for i := range n {
		send(t, sender, "recv", fmt.Sprint(i))
	}
	for i := range n {
		if p := <-got; p != fmt.Sprint(i) {
			t.Fatalf("message %d is %q", i, p)
		}
	}
	if err := a.Commit(ctx, new(frame.Delta)); err != nil {
		t.Fatal(err)
	}
	if m, ok, err := mustAtom(t, recv).TryReceive(ctx); ok || err != nil {
		t.Fatalf("TryReceive after all were consumed: %+v, %v", m, err)
	}
}

func mustAtom(t testing.TB, r *Run) *Atom {
	t.Helper()
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// forgeAtom appends an atom of r that sends sent and consumes consumed,
// chained like any other but past the engine's checks (as a writer that
// breaks the rules would): verify must find what is wrong with it.
func forgeAtom(t *testing.T, db *DB, r *Run, sent []record.SentMessage, consumed []MessageID) {
	t.Helper()
	buf := getBuf()
	defer putBuf(buf)
	r.mu.Lock()
	seq, prev := r.mu.lastSeq+1, r.mu.head
	r.mu.Unlock()
	enc, err := db.encodeAtom(buf, r.id, seq, prev, nil, new(frame.Delta), buf.messageExts(sent, consumed), nil)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := db.append(ctx, enc.rec)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.mu.lastSeq, r.mu.head = seq, enc.head
	r.mu.book.Positions = append(r.mu.book.Positions, pos)
	r.mu.Unlock()
}

// TestVerifyMessages: verify names an atom that consumes a message no
// atom sent, one sent to another run, one consumed twice, one out of
// order, and an INBOX that disagrees with the log.
func TestVerifyMessages(t *testing.T) {
	for _, c := range []struct {
		name  string
		forge func(t *testing.T, db *DB, a, b, c *Run)
		want  string
	}{{
		name: "never sent",
		forge: func(t *testing.T, db *DB, a, b, c *Run) {
			forgeAtom(t, db, b, nil, []MessageID{{From: "a", Seq: 9}})
		},
		want: `consumes message "a"/9/0, which no committed atom sent before it`,
	}, {
		name: "sent to another run",
		forge: func(t *testing.T, db *DB, a, b, c *Run) {
			send(t, a, "c", "for c")
			forgeAtom(t, db, b, nil, []MessageID{{From: "a", Seq: 1}})
		},
		want: `consumes message "a"/1/0, which was sent to run "c"`,
	}, {
		name: "twice",
		forge: func(t *testing.T, db *DB, a, b, c *Run) {
			send(t, a, "b", "once")
			forgeAtom(t, db, b, nil, []MessageID{{From: "a", Seq: 1}})
			forgeAtom(t, db, b, nil, []MessageID{{From: "a", Seq: 1}})
		},
		want: `consumes message "a"/1/0 a second time`,
	}, {
		name: "out of order",
		forge: func(t *testing.T, db *DB, a, b, c *Run) {
			send(t, a, "b", "first", "second")
			forgeAtom(t, db, b, nil, []MessageID{{From: "a", Seq: 1, Index: 1}})
		},
		want: `consumes message "a"/1/1 before "a"/1/0`,
	}, {
		name: "INBOX",
		forge: func(t *testing.T, db *DB, a, b, c *Run) {
			send(t, a, "b", "kept", "dropped")
		},
		want: `INBOX and the log's tail leave 1 messages of "a" to "b" not consumed; the log leaves 2`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			db, err := Open("store", testOptions(mem))
			if err != nil {
				t.Fatal(err)
			}
			a, b, cr := openRun(t, db, "a"), openRun(t, db, "b"), openRun(t, db, "c")
			c.forge(t, db, a, b, cr)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if c.name == "INBOX" {
				// A forged INBOX with a valid checksum that drops a message.
				name := "store/" + layout.InboxName
				raw, err := layout.ReadFile(mem, name)
				if err != nil {
					t.Fatal(err)
				}
				in, err := layout.ParseInbox(name, raw)
				if err != nil || len(in.Queues) != 1 || len(in.Queues[0].Pending) != 2 {
					t.Fatalf("INBOX %+v, %v", in, err)
				}
				in.Queues[0].Pending = in.Queues[0].Pending[:1]
				if err := layout.WriteFileAtomic(mem, name, in.Marshal(), false); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range rep.Failures {
				found = found || strings.Contains(f.String(), c.want)
			}
			if rep.OK || !found {
				t.Fatalf("verify OK=%v, failures %v; want one that says %q", rep.OK, rep.Failures, c.want)
			}
		})
	}
}

// TestExportMessages: inspect's atom and export show what an atom sent
// (to whom, with its payload) and what it consumed (by id).
func TestExportMessages(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, testOptions(mem))
	a, b := openRun(t, db, "a"), openRun(t, db, "b")
	send(t, a, "b", "hello", "world")
	bt := mustAtom(t, b)
	if _, err := bt.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bt.Commit(ctx, new(frame.Delta)); err != nil {
		t.Fatal(err)
	}
	if info, err := b.Atom(ctx, 1); err != nil || len(info.Consumed) != 1 || info.Consumed[0] != (MessageID{From: "a", Seq: 1}) {
		t.Fatalf("Run.Atom: %+v, %v", info, err)
	}
	db.Close()
	in, err := Inspect(ctx, "store", &InspectOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out strings.Builder
	for _, run := range []string{"a", "b"} {
		if _, err := in.Export(ctx, &out, run, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{
		`"sent":[{"index":0,"to":"b","payload":"hello"},{"index":1,"to":"b","payload":"world"}]`,
		`"consumed":[{"from":"a","seq":1,"index":0}]`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("export lacks %s:\n%s", want, out.String())
		}
	}
}

// TestMessagesForkAndDelete: a fork does not inherit its parent's inbox;
// deleting a run withdraws its messages nobody consumed, and a deleted
// run takes none; all of it holds after a restart.
func TestMessagesForkAndDelete(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem)
	db := openTest(t, mem, opts)
	p, s, gone := openRun(t, db, "parent"), openRun(t, db, "sender"), openRun(t, db, "gone")
	send(t, p, "sender", "p1") // parent seq 1
	send(t, s, "parent", "s1", "s2")
	send(t, gone, "parent", "g1")
	pa := mustAtom(t, p)
	if m, err := pa.ReceiveFrom(ctx, "sender"); err != nil || string(m.Payload) != "s1" {
		t.Fatalf("ReceiveFrom = %+v, %v", m, err)
	}
	if err := pa.Commit(ctx, new(frame.Delta)); err != nil { // parent seq 2
		t.Fatal(err)
	}
	f, err := db.Fork(ctx, "parent", 2, "fork")
	if err != nil {
		t.Fatal(err)
	}
	if got := inboxOf(t, f); got != nil {
		t.Fatalf("the fork's inbox %q, want it empty", got)
	}
	if err := gone.End(ctx, StatusCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	st := mustAtom(t, s)
	if err := st.Send(ctx, "gone", []byte("x")); !errors.Is(err, ErrRunDeleted) {
		t.Fatalf("Send to a deleted run: %v", err)
	}
	if err := st.Fail(ctx, "no"); err != nil {
		t.Fatal(err)
	}
	check := func(db *DB) {
		t.Helper()
		if got, want := fmt.Sprint(inboxOf(t, openRun(t, db, "parent"))), "[sender:s2]"; got != want {
			t.Fatalf("the parent's inbox %s, want %s (the deleted run's withdrawn)", got, want)
		}
		if got := inboxOf(t, openRun(t, db, "fork")); got != nil {
			t.Fatalf("the fork's inbox %q", got)
		}
		if got, want := fmt.Sprint(inboxOf(t, openRun(t, db, "sender"))), "[parent:p1]"; got != want {
			t.Fatalf("the sender's inbox %s, want %s", got, want)
		}
	}
	check(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, drop := range []bool{false, true} {
		if drop {
			if err := mem.Remove("store/" + layout.InboxName); err != nil {
				t.Fatal(err)
			}
		}
		db2, err := Open("store", opts)
		if err != nil {
			t.Fatal(err)
		}
		check(db2)
		if err := db2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNoMessagesNoCost: an atom without messages is written as before
// messages existed (body version 1), and building its extensions takes
// no allocation; one with messages has body version 2.
func TestNoMessagesNoCost(t *testing.T) {
	buf := getBuf()
	defer putBuf(buf)
	if exts := buf.messageExts(nil, nil); exts != nil {
		t.Fatalf("extensions of an atom without messages: %v", exts)
	}
	if n := testing.AllocsPerRun(100, func() { buf.messageExts(nil, nil) }); n != 0 {
		t.Fatalf("%v allocations for an atom without messages", n)
	}
	mem := vfs.NewMem()
	db := openTest(t, mem, testOptions(mem))
	r := openRun(t, db, "r")
	send(t, r, "r", "to myself")
	a := mustAtom(t, r)
	if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
		t.Fatal(err)
	}
	for seq, want := range map[uint64]byte{1: record.AtomBodyVersionExt, 2: record.AtomBodyVersion} {
		r.mu.Lock()
		pos := r.mu.book.Positions[seq-1]
		r.mu.Unlock()
		raw, err := db.log.ReadAt(pos)
		if err != nil {
			t.Fatal(err)
		}
		var rec record.Record
		if err := db.decoder(false).Decode(raw, pos, "", &rec); err != nil {
			t.Fatal(err)
		}
		plain, _, err := db.decoder(false).DecodeAtom(nil, &rec, "")
		if err != nil || plain[0] != want {
			t.Fatalf("seq %d: body version %d, %v; want %d", seq, plain[0], err, want)
		}
	}
	if in := inboxOf(t, r); len(in) != 1 || in[0] != "r:to myself" {
		t.Fatalf("a message to the sending run itself: inbox %q", in)
	}
}
