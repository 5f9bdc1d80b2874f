package offline

// Verify's checks of the messages between runs (record/message.go): every
// message an atom consumes was sent before it by a committed atom, to the
// consuming run, and is consumed once, each sender's in the order sent;
// and INBOX, when the engine would use it, with the log's tail after its
// replay position applied, holds exactly the messages the log leaves
// unconsumed.

import (
	"fmt"
	"slices"
	"sort"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
	"github.com/zeebo/blake3"
)

type msgPair struct{ to, from string }

// sentMessage is a message the scan read: its receiver and its payload's
// digest.
type sentMessage struct {
	to  string
	sum [32]byte
}

// verifyMessages is what the scan gathers of messages.
type verifyMessages struct {
	sent  map[record.MessageID]sentMessage
	queue map[msgPair][]record.MessageID // in the order sent
	next  map[msgPair]int                // how many of queue were consumed
	// orphans are consumptions of messages of runs the scan never saw
	// created: fine if the log deletes that run (its records reclaimed).
	orphans []orphanConsumption
	ended   map[string]bool // runs ended or deleted
	deleted map[string]bool
	// tail holds the events at or after CHECKPOINT's replay position, to
	// check INBOX against (in log order).
	tail []msgTailEvent
}

type orphanConsumption struct {
	id       record.MessageID
	run, loc string
	seq      uint64
}

type msgTailEvent struct {
	kind     record.Kind
	run      string
	seq      uint64
	sent     []sentMessage
	consumed []record.MessageID
}

func (vm *verifyMessages) init() {
	if vm.sent == nil {
		vm.sent = map[record.MessageID]sentMessage{}
		vm.queue = map[msgPair][]record.MessageID{}
		vm.next = map[msgPair]int{}
		vm.ended = map[string]bool{}
		vm.deleted = map[string]bool{}
	}
}

// messages checks the messages of atom a, whose body is body, in the
// chain's order.
func (vr *verifyRun) messages(a *record.Record, loc string, body *record.AtomBody) {
	if len(body.Exts) == 0 {
		return
	}
	sent, consumed, err := body.Messages()
	if err != nil {
		vr.fail(a.Run, a.Seq, loc, "%v", err)
		return
	}
	if sent == nil && consumed == nil {
		return
	}
	vm := &vr.msgs
	vm.init()
	var ev *msgTailEvent
	// The engine applies over INBOX the tail's atoms that CHECKPOINT's
	// rows do not cover.
	if vr.dc.cp != nil && !a.Pos.Less(vr.dc.replay) && !vr.reflected(a.Run, a.Seq) {
		vm.tail = append(vm.tail, msgTailEvent{kind: record.KindAtom, run: a.Run, seq: a.Seq})
		ev = &vm.tail[len(vm.tail)-1]
	}
	for _, id := range consumed {
		p := msgPair{to: a.Run, from: id.From}
		m, ok := vm.sent[id]
		switch {
		case !ok && !vr.born[id.From]:
			vm.orphans = append(vm.orphans, orphanConsumption{id: id, run: a.Run, seq: a.Seq, loc: loc})
		case !ok:
			vr.fail(a.Run, a.Seq, loc, "consumes message %v, which no committed atom sent before it", id)
		case m.to != a.Run:
			vr.fail(a.Run, a.Seq, loc, "consumes message %v, which was sent to run %q", id, m.to)
		default:
			q, n := vm.queue[p], vm.next[p]
			switch i := slices.Index(q, id); {
			case i == n:
				vm.next[p] = n + 1
			case i < n:
				vr.fail(a.Run, a.Seq, loc, "consumes message %v a second time", id)
			default:
				vr.fail(a.Run, a.Seq, loc, "consumes message %v before %v, which its sender sent it first", id, q[n])
			}
		}
		if ev != nil {
			ev.consumed = append(ev.consumed, id)
		}
	}
	for i, s := range sent {
		id := record.MessageID{From: a.Run, Seq: a.Seq, Index: uint32(i)}
		m := sentMessage{to: s.To, sum: blake3.Sum256(s.Payload)}
		vm.sent[id] = m
		p := msgPair{to: s.To, from: a.Run}
		vm.queue[p] = append(vm.queue[p], id)
		if ev != nil {
			ev.sent = append(ev.sent, m)
		}
	}
}

// messageRunGone notes an end or a deletion (k) of run.
func (vr *verifyRun) messageRunGone(k record.Kind, run string, pos wal.Pos) {
	vm := &vr.msgs
	vm.init()
	vm.ended[run] = true
	if k.Deletes() {
		vm.deleted[run] = true
	}
	// An end CHECKPOINT's row already has is not applied again.
	if vr.dc.cp != nil && !pos.Less(vr.dc.replay) && (k.Deletes() || !vr.endReflected(run)) {
		vm.tail = append(vm.tail, msgTailEvent{kind: k, run: run})
	}
}

// reflected reports whether CHECKPOINT's row of run covers its atom seq.
func (vr *verifyRun) reflected(run string, seq uint64) bool {
	rs := vr.runs[run]
	return rs != nil && rs.ckpt != nil && seq <= rs.ckpt.LastSeq
}

// endReflected reports whether CHECKPOINT's row of run has its end.
func (vr *verifyRun) endReflected(run string) bool {
	rs := vr.runs[run]
	return rs != nil && rs.ckpt != nil && rs.ckpt.Status != 0
}

// finishMessages checks what only the whole log decides: consumptions of
// reclaimed runs' messages, and INBOX.
func (vr *verifyRun) finishMessages() {
	vm := &vr.msgs
	for _, o := range vm.orphans {
		if d := vr.deletions[o.id.From]; d == nil || !d.valid {
			vr.fail(o.run, o.seq, o.loc, "consumes message %v of run %q, which the log does not hold", o.id, o.id.From)
		}
	}
	vr.checkInbox()
}

// checkInbox compares INBOX, when the engine would use it (it names
// CHECKPOINT's generation and replay position), with the log: its queues
// with the log's tail applied as the engine applies it must leave the
// messages the log leaves unconsumed, with the same payloads. A missing
// or damaged INBOX, or one of another checkpoint, is rebuilt from the log
// by the engine: harmless.
func (vr *verifyRun) checkInbox() {
	dc := vr.dc
	if dc.cp == nil {
		return
	}
	name := vr.db.path(layout.InboxName)
	b, err := layout.ReadFile(vr.db.fs, name)
	if err != nil {
		return
	}
	if b = vr.db.openStoreFile(b, record.PlaceInbox, dc.cp.Gen); b == nil {
		return
	}
	in, err := layout.ParseInbox(name, b)
	if err != nil || in.Gen != dc.cp.Gen || in.Replay != dc.replay {
		return
	}
	vm := &vr.msgs
	vm.init()
	// The engine's state from INBOX, with the tail applied.
	type queue struct {
		cursor  record.MessageID
		pending []record.MessageID
	}
	queues := map[msgPair]*queue{}
	sums := map[record.MessageID][32]byte{}
	ended, deleted := map[string]bool{}, map[string]bool{}
	for _, id := range in.Ended {
		ended[id] = true
	}
	for _, id := range in.Deleted {
		deleted[id] = true
	}
	for _, q := range in.Queues {
		p := msgPair{to: q.To, from: q.From}
		if queues[p] != nil {
			vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCheckpointMismatch, Location: name,
				Detail: fmt.Sprintf("INBOX lists the messages of %q to %q twice", q.From, q.To)})
			return
		}
		eq := &queue{cursor: record.MessageID{Seq: q.CursorSeq, Index: q.CursorIndex}}
		for _, m := range q.Pending {
			id := record.MessageID{From: q.From, Seq: m.Seq, Index: m.Index}
			eq.pending = append(eq.pending, id)
			sums[id] = blake3.Sum256(m.Payload)
		}
		queues[p] = eq
	}
	get := func(p msgPair) *queue {
		if queues[p] == nil {
			queues[p] = &queue{}
		}
		return queues[p]
	}
	for _, e := range vm.tail {
		if e.kind != record.KindAtom {
			ended[e.run] = true
			for p := range queues {
				if p.to == e.run || e.kind.Deletes() && p.from == e.run {
					delete(queues, p)
				}
			}
			if e.kind.Deletes() {
				deleted[e.run] = true
			}
			continue
		}
		for i, s := range e.sent {
			id := record.MessageID{From: e.run, Seq: e.seq, Index: uint32(i)}
			if ended[s.to] || deleted[e.run] {
				continue
			}
			q := get(msgPair{to: s.to, from: e.run})
			if !q.cursor.Less(id) || len(q.pending) > 0 && !q.pending[len(q.pending)-1].Less(id) {
				continue
			}
			q.pending = append(q.pending, id)
			sums[id] = s.sum
		}
		for _, id := range e.consumed {
			q := get(msgPair{to: e.run, from: id.From})
			if q.cursor.Less(id) {
				q.cursor = id
			}
			for len(q.pending) > 0 && !q.cursor.Less(q.pending[0]) {
				q.pending = q.pending[1:]
			}
		}
	}
	// The log's: every message not consumed, to a run that did not end,
	// from one not deleted.
	pairs := map[msgPair]bool{}
	for p := range queues {
		pairs[p] = true
	}
	for p := range vm.queue {
		pairs[p] = true
	}
	sorted := make([]msgPair, 0, len(pairs))
	for p := range pairs {
		sorted = append(sorted, p)
	}
	sort.Slice(sorted, func(i, j int) bool {
		return sorted[i].to < sorted[j].to || sorted[i].to == sorted[j].to && sorted[i].from < sorted[j].from
	})
	for _, p := range sorted {
		var want []record.MessageID
		if !vm.ended[p.to] && !vm.deleted[p.from] {
			want = vm.queue[p][vm.next[p]:]
		}
		var got []record.MessageID
		if q := queues[p]; q != nil {
			got = q.pending
		}
		bad := len(got) != len(want)
		for i := 0; !bad && i < len(got); i++ {
			bad = got[i] != want[i] || sums[got[i]] != vm.sent[want[i]].sum
		}
		if bad {
			vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCheckpointMismatch, RunID: p.to, Location: name,
				Detail: fmt.Sprintf("INBOX and the log's tail leave %d messages of %q to %q not consumed; the log leaves %d (or their ids or payloads differ)",
					len(got), p.from, p.to, len(want))})
		}
	}
}
