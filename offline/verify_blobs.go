package offline

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

// Verify's check of blobs (package blob): every blob a record of the log
// references (an atom's delta, a certificate's result: RecordBlobRefs)
// is read whole and checked against the hash the chained record holds. A
// missing, damaged, truncated or swapped blob is a failure at the run and
// seq of the first record that references it. The blobs of a deleted run
// are not checked (GC may have swept them), unless a run not deleted
// descends from it.

// blobUse is the first record that references a blob, by run.
type blobUse struct {
	run string
	seq uint64
	loc string
	ref blob.Ref
}

// blobKey identifies a reference: its run and Ref.
type blobKey struct {
	run string
	ref blob.Ref
}

// noteBlobs notes the blob references of an atom's delta.
func (vr *verifyRun) noteBlobs(a *record.Record, delta []byte, loc func() string) {
	err := DeltaBlobRefs(delta, func(ref blob.Ref) { vr.noteBlob(a.Run, a.Seq, loc, ref) })
	if err != nil {
		vr.fail(a.Run, a.Seq, loc(), "delta: %v", err)
	}
}

// noteBlob notes one reference of run at seq.
func (vr *verifyRun) noteBlob(run string, seq uint64, loc func() string, ref blob.Ref) {
	k := blobKey{run, ref}
	if _, ok := vr.blobs[k]; ok {
		return
	}
	if vr.blobs == nil {
		vr.blobs = map[blobKey]blobUse{}
	}
	vr.blobs[k] = blobUse{run: run, seq: seq, loc: loc(), ref: ref}
}

// notCheckedBlobs is Report.Unchecked's entry for the blobs of an
// encrypted store verified without its keyring.
const notCheckedBlobs = "blobs: an encrypted store's blobs are named and sealed with its runs' keys; pass the keyring to check them"

// checkBlobs reads every referenced blob (once per file) and reports
// those that are not there with their bytes.
func (vr *verifyRun) checkBlobs(ctx context.Context) {
	if vr.db.sealed && vr.db.sealer == nil {
		// No atom was opened, so no reference noted: say so if there are
		// blobs to check.
		if names, err := vr.db.fs.List(vr.db.path(blob.Dir)); err == nil && len(names) > 0 {
			vr.unchecked = append(vr.unchecked, notCheckedBlobs)
		}
		return
	}
	if len(vr.blobs) == 0 {
		return
	}
	// The runs whose references count: those not deleted, and their
	// ancestors.
	keep := map[string]bool{}
	for id := range vr.runs {
		if vr.deletions[id] != nil {
			continue
		}
		for a := id; a != "" && !keep[a]; {
			keep[a] = true
			rs := vr.runs[a]
			if rs == nil {
				break
			}
			a = rs.parent
		}
	}
	uses := make([]blobUse, 0, len(vr.blobs))
	for _, u := range vr.blobs {
		if keep[u.run] {
			uses = append(uses, u)
		}
	}
	sort.Slice(uses, func(i, j int) bool {
		if uses[i].run != uses[j].run {
			return uses[i].run < uses[j].run
		}
		return uses[i].seq < uses[j].seq
	})
	st := blob.Open(vr.db.fs, vr.db.path(blob.Dir))
	checked := map[string]error{}
	for _, u := range uses {
		if ctx.Err() != nil {
			return
		}
		var err error
		found := false
		for _, s := range vr.blobSealers(u.run) {
			name := blob.Name(u.ref.Hash, s)
			e, ok := checked[name]
			if !ok {
				e = st.Verify(u.ref, s)
				checked[name] = e
			}
			if e == nil {
				found = true
				break
			}
			if err == nil || isNotFound(err) {
				err = e
			}
		}
		if found {
			continue
		}
		if err == nil {
			err = fmt.Errorf("%w: run %q has no data key left to name it", blob.ErrNotFound, u.run)
		}
		vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCorrupt, RunID: u.run, Seq: u.seq, Location: u.loc,
			Detail: fmt.Sprintf("blob %v referenced here: %v", u.ref, err)})
	}
}

// blobSealers returns the sealers a blob of run may be under: its data
// keys, then its ancestors' (nil alone in a plaintext store).
func (vr *verifyRun) blobSealers(run string) []blob.Sealer {
	if !vr.db.sealed {
		return []blob.Sealer{nil}
	}
	var out []blob.Sealer
	seen := map[string]bool{}
	for id := run; id != "" && !seen[id]; {
		seen[id] = true
		for _, s := range vr.db.sealer.BlobSealers(id) {
			out = append(out, s)
		}
		rs := vr.runs[id]
		if rs == nil {
			break
		}
		id = rs.parent
	}
	return out
}

func isNotFound(err error) bool {
	return err != nil && errors.Is(err, blob.ErrNotFound)
}
