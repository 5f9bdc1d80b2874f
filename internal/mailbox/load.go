package mailbox

import (
	"fmt"
	"slices"
	"strings"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// Load builds the inbox if it is not built yet, and returns the sticky
// error of a load that failed.
func (b *Box) Load() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loadLocked()
}

// Capture returns INBOX for the checkpoint of generation gen at replay
// position replay. The engine calls it after every run is captured, so
// that it reflects at least what their rows do.
func (b *Box) Capture(gen uint64, replay wal.Pos) (*layout.Inbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.loadLocked(); err != nil {
		return nil, err
	}
	in := &layout.Inbox{Gen: gen, Replay: replay}
	for id := range b.ended {
		in.Ended = append(in.Ended, id)
	}
	for id := range b.deleted {
		in.Deleted = append(in.Deleted, id)
	}
	slices.Sort(in.Ended)
	slices.Sort(in.Deleted)
	for to, box := range b.boxes {
		for from, q := range box {
			qf := layout.InboxQueue{To: to, From: from, CursorSeq: q.cursor.Seq, CursorIndex: q.cursor.Index}
			for _, p := range q.pending {
				qf.Pending = append(qf.Pending, layout.InboxMessage{Seq: p.id.Seq, Index: p.id.Index, At: p.at, Payload: p.payload})
			}
			in.Queues = append(in.Queues, qf)
		}
	}
	slices.SortFunc(in.Queues, func(a, b layout.InboxQueue) int {
		if c := strings.Compare(a.To, b.To); c != 0 {
			return c
		}
		return strings.Compare(a.From, b.From)
	})
	return in, nil
}

// Written records that the checkpoint of gen at replay wrote INBOX: what
// it names is what the next Open of that generation uses.
func (b *Box) Written(gen uint64, replay wal.Pos) {
	b.mu.Lock()
	b.gen, b.replay = gen, replay
	b.mu.Unlock()
}

// Rebuilt says why INBOX was not used, once the inbox is loaded ("": it
// was, or there was none to use).
func (b *Box) Rebuilt() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rebuilt
}

// loadLocked builds the inbox once, on first use: from INBOX when it is
// the one CHECKPOINT's generation wrote, else from the log before the
// replay position; then the events of the tail.
func (b *Box) loadLocked() error {
	if b.loaded || b.err != nil {
		return b.err
	}
	b.init()
	rebuild := false
	if b.gen != 0 {
		if why := b.loadFileLocked(); why != "" {
			b.init()
			b.rebuilt = why
			rebuild = true
			b.src.Rebuilding(why)
			if err := b.src.Scan(b.replay, b.scannedLocked); err != nil {
				b.err = err
				return err
			}
		}
	}
	for i := range b.tail {
		e := &b.tail[i]
		if e.reflected && !rebuild {
			continue
		}
		if err := b.applyEventLocked(e); err != nil {
			b.err = err
			return err
		}
	}
	b.tail, b.loaded = nil, true
	return nil
}

// loadFileLocked reads INBOX into the inbox, or says why it cannot.
func (b *Box) loadFileLocked() string {
	name, data, err := b.src.InboxFile(b.gen)
	if layout.NotExist(err) {
		return "it is missing"
	}
	if err != nil {
		return err.Error()
	}
	in, err := layout.ParseInbox(name, data)
	if err != nil {
		return err.Error()
	}
	if in.Gen != b.gen || in.Replay != b.replay {
		return fmt.Sprintf("it was written by checkpoint %d at %v, CHECKPOINT is %d at %v", in.Gen, in.Replay, b.gen, b.replay)
	}
	for _, id := range in.Ended {
		b.ended[id] = true
	}
	for _, id := range in.Deleted {
		b.deleted[id] = true
	}
	for _, qf := range in.Queues {
		if b.boxes[qf.To][qf.From] != nil {
			return fmt.Sprintf("it lists the queue of %q to %q twice", qf.From, qf.To)
		}
		q := b.queueLocked(qf.To, qf.From)
		q.cursor = record.MessageID{Seq: qf.CursorSeq, Index: qf.CursorIndex}
		for _, p := range qf.Pending {
			q.pending = append(q.pending, &pending{id: record.MessageID{From: qf.From, Seq: p.Seq, Index: p.Index},
				to: qf.To, at: p.At, payload: clone(p.Payload)})
		}
	}
	return ""
}

// scannedLocked applies one record of a rebuild's scan of the log.
func (b *Box) scannedLocked(r *record.Record) error {
	if r.Kind != record.KindAtom {
		b.goneLocked(r.Kind, r.Run)
		return nil
	}
	return b.atomLocked(r)
}

// applyEventLocked applies one event of the tail.
func (b *Box) applyEventLocked(e *event) error {
	switch {
	case e.kind != record.KindAtom:
		b.goneLocked(e.kind, e.run)
		return nil
	case e.decoded:
		b.applyLocked(e.run, e.seq, e.at, e.sent, e.consumed)
		return nil
	}
	return b.atomLocked(&record.Record{Kind: record.KindAtom, Run: e.run, Seq: e.seq, Pos: e.at, Body: e.body})
}

// atomLocked reads the messages of atom record a through the Source and
// applies them.
func (b *Box) atomLocked(a *record.Record) error {
	sent, consumed, err := b.src.Messages(a)
	if err != nil {
		return err
	}
	if sent != nil || consumed != nil {
		b.applyLocked(a.Run, a.Seq, a.Pos, sent, consumed)
	}
	return nil
}
