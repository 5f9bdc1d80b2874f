package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/downstream"
)

// The demo's last act: "reconsider step N". The deployment is done; a
// reviewer reconsiders the rollout of one region with one decision changed
// (a discounted fee), and the demo forks the run at the atom before that
// region's first step and lets the agent redo the rest on the fork.

// reconsider forks the finished deployment and has the agent do the fork's
// script (process 3), narrating it. It reports whether the fork kept its
// promises: its state at the fork point is the original's; each step it
// repeats unchanged is served from the ledger, with no call downstream,
// and the changed one is one new call under a key of the fork's own; both
// runs ended completed and the lineage is the one forked; every key the
// downstream saw was called once and took effect once (so no key carried
// two requests); and a deep verify of the store, the whole lineage,
// passes. An error is one of the demo (an I/O error), not of the store.
func (d *demo) reconsider(ctx context.Context, srv *downstream.Server, pub ed25519.PublicKey) (bool, error) {
	w := d.out
	at := demoForkAt()
	fmt.Fprintf(w, "\nreconsider step %d: a reviewer wants a launch discount in %s (%d cents, not %d);\n",
		at+1, demoRegions[demoForkRegion], demoDiscountCents, demoFeeCents)
	fmt.Fprintf(w, "fork the run at atom %d and let the agent redo the rest (process 3)\n", at)
	before := map[string]bool{}
	for _, e := range srv.Effects() {
		before[e.Key] = true
	}
	res, err := d.child(ctx, srv.URL(), 0, true)
	if err != nil {
		return false, err
	}
	ok := true
	if res.err != nil {
		fmt.Fprintf(d.stderr, "continuumdemo: the agent on the fork failed: %v\n", res.err)
		ok = false
	}
	if !res.sameState || res.lastSeq != uint64(len(d.forkScript)) || res.status != engine.StatusCompleted.String() {
		ok = false
	}
	for _, s := range d.forkScript[at:] {
		if s.tool != "" && !d.forkAtomOK(s.seq, res.calls[s.seq], res.keys[s.seq]) {
			ok = false
		}
	}
	ok = d.printLineage(res.runs) && ok
	ok = d.printForkEffects(srv.Effects(), before) && ok
	rep, err := engine.Verify(ctx, d.dir, &engine.VerifyOptions{PublicKey: pub, Deep: true})
	if err != nil {
		return false, err
	}
	fmt.Fprintf(w, "  verify --deep: ")
	printVerify(w, rep)
	return ok && rep.OK, nil
}

// changed reports whether the fork's step at seq differs from the
// original's: another tool or other args.
func (d *demo) changed(seq uint64) bool {
	s, o := d.forkScript[seq-1], d.script[seq-1]
	return s.tool != o.tool || !bytes.Equal(s.args, o.args)
}

// forkAtomOK reports whether the fork's atom at seq did what I10
// promises, given the calls its exec made downstream and the key of the
// last: none if unchanged, else one under the fork's own key.
func (d *demo) forkAtomOK(seq uint64, calls int, key string) bool {
	if !d.changed(seq) {
		return calls == 0
	}
	return calls == 1 && key == demoKey(demoForkRun, seq)
}

// narrateFork tells the agent's forked event.
func (d *demo) narrateFork(ev event) {
	same := "is the original's"
	if ev.kv["same_state"] != "true" {
		same = "DIFFERS from the original's"
	}
	fmt.Fprintf(d.out, "  forked at %s into %s: its state there %s (frame %s)\n", ev.kv["at"], ev.kv["run"], same, ev.kv["state"])
}

// narrateForkAtom tells one atom of the fork, whose exec made calls
// downstream, the last under key.
func (d *demo) narrateForkAtom(seq uint64, calls int, key string) {
	s := d.forkScript[seq-1]
	if s.tool == "" {
		fmt.Fprintf(d.out, "  atom %2d  %s\n", seq, s.describe())
		return
	}
	var note string
	switch changed, ok := d.changed(seq), d.forkAtomOK(seq, calls, key); {
	case changed && !ok:
		note = fmt.Sprintf("changed, yet its calls downstream: %d, the last under %q (want one, under the fork's own key): WRONG", calls, key)
	case !ok:
		note = "unchanged, yet called downstream again: DUPLICATE"
	case changed:
		note = "changed: a new call, under the fork's own key"
	default:
		note = "unchanged: served from the ledger, no call"
	}
	fmt.Fprintf(d.out, "  atom %2d  %-37s  %s\n", seq, s.describe(), note)
}

// printLineage prints the store's runs as a tree of forks, from the
// agent's run events (RunInfo), and reports whether they are the lineage
// the demo made: the original and its fork at demoForkAt, both completed
// with all their atoms, each with the fees of its own script.
func (d *demo) printLineage(runs []event) bool {
	w := d.out
	want := map[string]struct {
		parent   string
		forkedAt uint64
		fees     int
	}{
		demoRun:     {"", 0, demoFees(d.script)},
		demoForkRun: {demoRun, demoForkAt(), demoFees(d.forkScript)},
	}
	ok := len(runs) == len(want)
	const head = "  lineage: "
	printed := 0
	var tree func(parent string, depth int)
	tree = func(parent string, depth int) {
		for _, r := range runs {
			if r.kv["parent"] != parent {
				continue
			}
			id, last, at := r.kv["id"], r.uint("last_seq"), r.uint("forked_at")
			var res struct {
				Fees int `json:"fees_cents"`
			}
			if err := json.Unmarshal([]byte(r.kv["result"]), &res); err != nil {
				ok = false // shown as no fees
			}
			line := head + id
			if depth > 0 {
				line = strings.Repeat(" ", len(head)+3*(depth-1)) + fmt.Sprintf("└─ %s, forked at %d", id, at)
			}
			fmt.Fprintf(w, "%s: %s, atoms %d-%d, fees %d cents\n", line, r.kv["status"], at+1, last, res.Fees)
			wr, known := want[id]
			if !known || wr.parent != parent || wr.forkedAt != at || wr.fees != res.Fees ||
				r.kv["status"] != engine.StatusCompleted.String() || last != uint64(len(d.script)) {
				ok = false
			}
			printed++
			tree(id, depth+1)
		}
	}
	tree("", 0)
	return ok && printed == len(runs) // a run whose parent is not listed is not in the tree
}

// printForkEffects prints what the downstream saw by the end of the fork,
// and reports whether it is what the fork promises: every key called once
// and taken once, and one key new since the fork began (before), the key
// of the fork's own changed charge.
func (d *demo) printForkEffects(effects []downstream.Effect, before map[string]bool) bool {
	w := d.out
	chargeSeq := stepSeq(d.forkScript, demoRegions[demoForkRegion], "charge")
	wantNew := demoKey(demoForkRun, chargeSeq)
	ok := true
	var fresh []string
	for _, e := range effects {
		if !before[e.Key] {
			fresh = append(fresh, e.Key)
		}
		if e.Calls != 1 || e.Effects != 1 {
			ok = false
			fmt.Fprintf(w, "  downstream: %s %s under key %s: %d calls, %d effects  DUPLICATE\n",
				e.Tool, d.keyRegion(e.Key), e.Key, e.Calls, e.Effects)
		}
	}
	if len(fresh) != 1 || fresh[0] != wantNew {
		fmt.Fprintf(w, "  downstream: the fork called under %d new keys %q; want one, its changed charge's %q\n", len(fresh), fresh, wantNew)
		return false
	}
	if ok {
		fmt.Fprintf(w, "  downstream: %d keys, each called once; new in the fork: %s only\n", len(effects), wantNew)
	}
	return ok
}
