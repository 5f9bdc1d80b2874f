package offline

// Verify's check of WAITS (layout/waits.go), the engine checkpoint's copy
// of the index of waits: when the engine would use it (it names
// CHECKPOINT's generation and replay position, and loads), WAITS with the
// log's tail applied as the engine applies it (internal/wait, Load) must
// say what the whole log says of every run that has not ended: its wait
// after its last atom (name, deadline, outcome, the event it took), its
// events no wait took, in order, and its sender ids; and the same runs
// ready. Payloads and digests are compared where verify can read them (a
// plaintext store, or an encrypted one with its keyring). A missing or
// damaged WAITS, or one of another checkpoint, is rebuilt from the log
// by the engine: harmless.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/internal/wait"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
)

// noteWaitRecord keeps a copy of a record of waits for the check of
// WAITS, with its event's payload as the engine's index holds it (nil
// where verify cannot open it).
func (vr *verifyRun) noteWaitRecord(r *record.Record) {
	if vr.dc == nil || vr.dc.cp == nil {
		return
	}
	w := *r.Wait
	if r.Kind == record.KindEvent && vr.db.sealed {
		w.Payload = nil
		if vr.db.sealer != nil {
			w.Payload, _ = vr.db.sealer.Open(nil, r.Wait.Payload, record.KindEvent, r.Run, r.Seq)
		}
	} else {
		w.Payload = append([]byte(nil), w.Payload...)
	}
	vr.waits.recs = append(vr.waits.recs, &record.Record{Kind: r.Kind, Run: r.Run, Seq: r.Seq, Pos: r.Pos, Wait: &w})
}

// checkWaitsFile compares WAITS and the tail with the whole log.
func (vr *verifyRun) checkWaitsFile() {
	dc := vr.dc
	if dc == nil || dc.cp == nil {
		return
	}
	name := vr.db.path(layout.WaitsName)
	b, err := layout.ReadFile(vr.db.fs, name)
	if err != nil {
		return
	}
	if b = vr.db.openWaitsFile(name, b, dc.cp.Gen); b == nil {
		return
	}
	recs := vr.waits.recs
	loaded := wait.New(nil)
	loaded.From(dc.cp.Gen, dc.replay)
	if err := loaded.Load(wait.RecordSource{Name: name, File: b, Records: recs}); err != nil || loaded.Rebuilt() != "" {
		return // the engine would not use it
	}
	whole := wait.New(nil)
	if err := whole.Load(wait.RecordSource{Name: name, Records: recs}); err != nil {
		return
	}
	full := !vr.db.sealed || vr.db.sealer != nil
	var senders []string
	runs := map[string]bool{}
	for _, r := range recs {
		runs[r.Run] = true
		if r.Kind == record.KindEvent {
			senders = append(senders, r.Wait.Sender)
		}
	}
	ids := make([]string, 0, len(runs))
	for id := range runs {
		rs := vr.runs[id]
		if rs != nil && !rs.ended && !vr.deleted(id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	slices.Sort(senders)
	senders = slices.Compact(senders)
	last := func(id string) uint64 { rs := vr.runs[id]; return rs.base + uint64(rs.heads.len()) }
	for _, id := range ids {
		got, want := waitsView(loaded, id, last(id), senders, full), waitsView(whole, id, last(id), senders, full)
		if got != want {
			vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCheckpointMismatch, RunID: id, Location: name,
				Detail: fmt.Sprintf("WAITS and the log's tail say of the run's waits %s; the log says %s", got, want)})
		}
	}
	ready := func(x *wait.Index) []string {
		var out []string
		for _, w := range x.Ready(1 << 30) {
			if i, ok := slices.BinarySearch(ids, w.Run); ok && w.Seq >= last(ids[i]) {
				out = append(out, fmt.Sprintf("%s/%d", w.Run, w.Seq))
			}
		}
		slices.Sort(out) // the order of ends across runs is the order they were applied in
		return out
	}
	if got, want := ready(loaded), ready(whole); !slices.Equal(got, want) {
		vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCheckpointMismatch, Location: name,
			Detail: fmt.Sprintf("WAITS and the log's tail list %d waits ready, %v; the log %d, %v", len(got), got, len(want), want)})
	}
}

// waitsView is what x says of run, whose last seq is last.
func waitsView(x *wait.Index, run string, last uint64, senders []string, full bool) string {
	var b strings.Builder
	if w, ok := x.Current(run, last); ok {
		fmt.Fprintf(&b, "wait after %d for %q, deadline %d, %v", w.Seq, w.Name, w.Deadline, w.Outcome)
		if e := w.Event; e != nil {
			fmt.Fprintf(&b, " by sender %q", e.Sender)
			if full {
				fmt.Fprintf(&b, " (%x)", e.Digest[:8])
			}
		}
	} else {
		b.WriteString("no wait")
	}
	ps := x.Pending(run)
	slices.SortStableFunc(ps, func(a, b wait.Event) int { return strings.Compare(a.Name, b.Name) })
	for _, e := range ps {
		fmt.Fprintf(&b, ", kept %q of %q", e.Name, e.Sender)
	}
	for _, s := range senders {
		if d, ok := x.Sent(run, s); ok {
			fmt.Fprintf(&b, ", sender %q", s)
			if full {
				fmt.Fprintf(&b, " (%x)", d[:8])
			}
		}
	}
	return b.String()
}

// openWaitsFile is openStoreFile of WAITS, which an encrypted store seals
// per block (layout.UnsealWaits; or whole, before 2026-12).
func (db *store) openWaitsFile(name string, b []byte, gen uint64) []byte {
	if !db.sealed {
		return b
	}
	if db.sealer == nil {
		return nil
	}
	plain, err := layout.UnsealWaits(name, b, db.sealer, gen)
	if err != nil {
		return nil
	}
	return plain
}
