package offline

// Verify's checks of erase-key records (record.KindEraseKey: the values of
// one memory key of a run erased by dropping the data keys that sealed
// them). An erase-key record is a link beside its run's chain: verify
// recomputes it from the run's head at its seq and the record's fields,
// checks the chain checkpoint it carries (the store, the run, the seq,
// the link, not final; its signature with the public key) and, while the
// run's atom at that seq is in the log, that the head is the run's there.
// A record that passes is listed (Report.ErasedKeys); one that fails is
// reported, and erases nothing.
//
// With KEYS read (with the keyring or without), the data keys a record
// that passed names must be erased in it (a live one: a KEYS older than
// the erasure, from which the values can be recovered, reported), and a
// memory key's erased data key must be named by such a record, or belong
// to a run erased whole, or deleted (whose erase-key records garbage
// collection may have reclaimed with its other records); else the key
// table was changed, or the record is gone: reported. A run erased whole
// must have its memory keys' data keys erased too (or marked erasing: an
// erasure a crash interrupted).

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// eraseKey checks an erase-key record.
func (vr *verifyRun) eraseKey(r *record.Record, loc string) {
	bad := func(kind chain.Kind, expected, actual chain.Hash, detail string) {
		vr.extra = append(vr.extra, chain.Failure{Kind: kind, RunID: r.Run, Seq: r.Seq, Expected: expected, Actual: actual,
			Location: loc, Detail: "erase-key record of memory key " + fmt.Sprintf("%q", r.Key) + ": " + detail})
	}
	if !vr.checkDeletionRecord(r, bad) {
		return
	}
	if rs := vr.runs[r.Run]; rs != nil && r.Seq > rs.base && r.Seq <= rs.base+rs.heads.len() {
		if h := rs.heads.at(r.Seq - rs.base - 1); h != r.Final {
			bad(chain.KindLinkMismatch, h, r.Final, "the head it follows is not the run's at its seq")
			return
		}
	}
	vr.erasedKeys = append(vr.erasedKeys, chain.ErasedKey{RunID: r.Run, Key: r.Key, Seq: r.Seq, Head: r.Head,
		KeyNos: slices.Clone(r.KeyNos), At: r.Deleted, Reason: r.Reason, Signed: vr.pub != nil, Location: loc})
}

// checkErasedMemoryKeys compares KEYS's memory keys with the erase-key
// records (see the file's comment), and sorts the records for the report.
func (vr *verifyRun) checkErasedMemoryKeys() {
	slices.SortFunc(vr.erasedKeys, func(a, b chain.ErasedKey) int {
		return cmp.Or(cmp.Compare(a.RunID, b.RunID), cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Key, b.Key))
	})
	t := vr.db.keys
	if t == nil {
		return
	}
	name := vr.db.path(layout.KeysName)
	named := map[uint64]bool{}
	for _, e := range vr.erasedKeys {
		for _, no := range e.KeyNos {
			named[no] = true
		}
	}
	entries := map[uint64]seal.Entry{}
	for _, e := range t.Entries() {
		entries[e.No] = e
		run, key, memory := seal.SplitMemoryScope(e.Scope)
		if memory && !e.Erased && !e.Erasing && vr.erased(run) {
			vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCorrupt, RunID: run, Location: name,
				Detail: fmt.Sprintf("the run is erased by its erase record, but the key table still holds data key %d of its memory key %q: what it sealed can still be opened", e.No, key)})
			continue
		}
		if !memory || !e.Erased || named[e.No] || vr.erased(run) || vr.deleted(run) {
			continue
		}
		vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCorrupt, RunID: run, Location: name,
			Detail: fmt.Sprintf("data key %d of memory key %q is erased, but no valid erase-key record names it: the values it sealed can no longer be opened (the key table was changed, or the record is gone)", e.No, key)})
	}
	for _, ek := range vr.erasedKeys {
		scope := seal.MemoryScope(ek.RunID, ek.Key)
		for _, no := range ek.KeyNos {
			switch e, ok := entries[no]; {
			case !ok || e.Scope != scope:
				vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCorrupt, RunID: ek.RunID, Seq: ek.Seq, Location: ek.Location,
					Detail: fmt.Sprintf("the erase-key record of memory key %q names data key %d, which the key table does not hold for that key", ek.Key, no)})
			case !e.Erased:
				vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCorrupt, RunID: ek.RunID, Seq: ek.Seq, Location: name,
					Detail: fmt.Sprintf("memory key %q is erased by its erase-key record, but the key table still holds its data key %d: it is older than the erasure, and what the key sealed can still be opened", ek.Key, no)})
			}
		}
	}
}

// openSealedValues opens (Deep, with the keyring) the sealed memory values
// atom a's delta d sets: each must open with its memory key's data key
// (GCM authenticates it), or have that key erased, which the comparison
// with KEYS accounts for.
func (vr *verifyRun) openSealedValues(a *record.Record, loc string, d *frame.Delta) {
	for _, o := range d.Ops() {
		if o.Kind != "set_sealed" {
			continue
		}
		switch _, err := vr.db.sealer.OpenValue(nil, o.Value, o.Key); {
		case err == nil || errors.Is(err, seal.ErrErased):
		case errors.Is(err, seal.ErrNoKey):
			// The key table lacks the key: its damage, or an older copy.
			vr.fail(a.Run, a.Seq, vr.db.path(layout.KeysName), "the sealed value of memory key %q set by the atom at %s names a data key the table lacks: it is older than the log, damaged, or not this store's (%v)", o.Key, loc, err)
		default:
			vr.fail(a.Run, a.Seq, loc, "the sealed value of memory key %q does not open: %v", o.Key, err)
		}
	}
}
