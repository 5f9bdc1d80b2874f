package engine

import (
	"bytes"
	"context"
	"encoding/hex"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// fzForger writes the records of FuzzForgedLog: what an attacker who
// knows the format (and, the chain being unkeyed, can compute any link)
// appends to a store's log. Each record is well framed and decodes; what
// it says is chosen by the fuzzer: any kind, for the store's runs or new
// ones, at any seq, linked to the run's head or not.
type fzForger struct {
	s       *fzStore
	hasher  *chain.Hasher
	comp    *frame.Compressor
	storeID string
	heads   []chain.Hash          // heads of the seed's records, and of the forged ones
	last    map[string]chain.Hash // the head each run's next link follows
	in      []byte
}

// fzForgedRuns are the run ids the forged records name: the seed's, and two it
// lacks.
var fzForgedRuns = []string{"fz-a", "run b/ü", "fz-saga", "fz-gone", "fz-x", "fz-new", "fz-fork"}

func (g *fzForger) byte() byte {
	if len(g.in) == 0 {
		return 0
	}
	b := g.in[0]
	g.in = g.in[1:]
	return b
}

func (g *fzForger) run() string      { return fzForgedRuns[int(g.byte())%len(fzForgedRuns)] }
func (g *fzForger) seq() uint64      { return uint64(g.byte() % 24) }
func (g *fzForger) head() chain.Hash { return g.heads[int(g.byte())%len(g.heads)] }

// linked returns the head a record of run at seq over payload links to:
// from the run's head so far (or a seed head, or a zero one, as the input
// says), and makes it the run's head.
func (g *fzForger) linked(run string, seq uint64, payload []byte) (prev, head chain.Hash) {
	switch g.byte() % 4 {
	case 0, 1:
		prev = g.last[run]
	case 2:
		prev = g.head()
	}
	head = g.hasher.Link(run, seq, prev, payload)
	g.last[run] = head
	g.heads = append(g.heads, head)
	return prev, head
}

// record returns the next forged record, nil when the input is used up.
func (g *fzForger) record() []byte {
	if len(g.in) == 0 {
		return nil
	}
	var nonce chain.Nonce
	switch op := g.byte() % 10; op {
	case 0: // a record of the seed, again
		return bytes.Clone(g.s.records[int(g.byte())%len(g.s.records)])
	case 1: // a run's creation
		nonce[0] = g.byte()
		return record.AppendRun(nil, g.run(), nonce, int64(g.byte()))
	case 2: // a fork, of any run at any seq, at any head
		nonce[0] = g.byte()
		return record.AppendFork(nil, g.run(), nonce, int64(g.byte()), g.run(), g.seq(), g.head())
	case 3: // an atom of no action, its body one of the seed's
		run, seq := g.run(), g.seq()
		body := g.s.bodies[int(g.byte())%len(g.s.bodies)]
		if len(body) > 0 && body[0] != 0 { // keep only the delta of bodies that list actions
			if b, err := record.DecodeAtomBody(body); err == nil {
				body = record.AppendAtomBody(nil, nil, b.Delta)
			}
		}
		_, head := g.linked(run, seq, record.AppendPayload(nil, body, nil))
		return g.comp.Compress(record.AppendAtomHeader(nil, run, seq, head), body, 0)
	case 4: // an end
		run, seq := g.run(), g.seq()
		payload := record.AppendEndPayload(nil, g.byte()%4, 1, []byte("r"))
		_, head := g.linked(run, seq, payload)
		return record.AppendEnd(nil, run, seq, head, payload[0], 1, []byte("r"))
	case 5, 6: // a deletion or an erasure, linked, its checkpoint this store's
		run, seq := g.run(), g.seq()
		payload := record.AppendDeletePayload(nil, 1, "x")
		if op == 6 {
			payload = record.AppendErasePayload(nil, 1, "x")
		}
		final, head := g.linked(run, seq, payload)
		note := chain.MarshalCheckpoint(chain.Checkpoint{StoreID: g.storeID, RunID: run, Seq: seq, Head: head, Final: true})
		if op == 6 {
			return record.AppendErase(nil, run, seq, final, head, 1, "x", note)
		}
		return record.AppendDelete(nil, run, seq, final, head, 1, "x", note)
	case 7: // a rollback, to any seq
		run, seq, to := g.run(), g.seq(), g.seq()
		return record.AppendRollback(nil, run, seq, to, g.head(), 1, nil)
	case 8: // a failed attempt
		return record.AppendFail(nil, g.run(), g.seq(), "forged")
	default: // bytes as given: a record of any kind the decoder refuses or not
		n := int(g.byte() % 64)
		b := g.in[:min(n, len(g.in))]
		g.in = g.in[len(b):]
		return bytes.Clone(b)
	}
}

// FuzzForgedLog appends forged records (fzForger) to the seed store's log,
// then verifies the store, plain and Deep, opens it, reads its runs and
// writes on them (an atom, a fork, an end): none of them may panic. Verify reports what it finds (and passes the
// seed store, nothing forged); Open opens the store or refuses it with an
// error.
func FuzzForgedLog(f *testing.F) {
	s := fzFixture(f)
	// Each byte string is a program for fzForger: an op (its first byte mod
	// 10, as in record), then the op's operands.
	for _, seed := range [][]byte{
		{},                       // nothing forged: the seed store verifies
		{4, 0, 30, 1, 0},         // an end of fz-a
		{2, 5, 9, 6, 0, 3, 0},    // a fork of a new run, from fz-a
		{0, 5, 0, 5, 0, 7},       // seed records again
		{7, 0, 20, 2, 0},         // a rollback beyond the run's atoms
		{5, 6, 3, 0, 6, 6, 4, 0}, // a deletion and an erasure of a run with no atoms
		{3, 0, 12, 1, 0},         // an atom of fz-a, linked
		// Two forks, each of the other (Deep verify rebuilt their frames
		// without end).
		[]byte("\xe8\xe1\xa1w\xdc35\x03\xc5*\xa0\x88\x84\x13\x11="),
		{9, 5, 1, 2, 3, 4, 5}, // bytes
		{1, 5, 1, 3, 5, 1, 0, 0, 3, 5, 2, 0, 0, 4, 5, 3, 0, 0}, // a new run, its atoms, its end
	} {
		f.Add(seed)
	}
	h, sf, seedHeads, seedLast := fzSeedChain(f, s, false)
	dicts := frame.NewDicts()
	comp := frame.NewCompressor(dicts)
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 256 {
			return
		}
		mem := vfs.NewMem()
		for name, b := range s.files {
			p := mem.PathJoin(fzDir, name)
			if err := mem.MkdirAll(mem.PathDir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			// A copy: in race builds Pebble's MemFS mangles what it is
			// given to write, to catch writers that keep the buffer.
			if err := layout.WriteFileAtomic(mem, p, bytes.Clone(b), true); err != nil {
				t.Fatal(err)
			}
		}
		g := &fzForger{s: s, hasher: h, comp: comp, storeID: hex.EncodeToString(sf.ID[:]),
			heads: append([]chain.Hash{{}}, seedHeads...), last: map[string]chain.Hash{}, in: in}
		for k, v := range seedLast {
			g.last[k] = v
		}
		log, err := wal.Open(mem.PathJoin(fzDir, layout.WALDir), &wal.Options{FS: mem, SegmentSize: wal.MinSegmentSize})
		if err != nil {
			t.Fatal(err)
		}
		for rec := g.record(); rec != nil; rec = g.record() {
			if len(rec) == 0 {
				continue
			}
			if _, err := log.Append(context.Background(), rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := log.Close(); err != nil {
			t.Fatal(err)
		}
		for _, deep := range []bool{false, true} {
			rep, err := Verify(ctx, fzDir, &VerifyOptions{FS: mem, Deep: deep})
			if len(in) == 0 && (err != nil || !rep.OK) {
				// Nothing forged: the store the engine wrote verifies.
				t.Fatalf("the seed store (deep %v): %v, failures %v", deep, err, rep.Failures)
			}
		}
		db, err := Open(fzDir, fzOptions(mem))
		if err != nil {
			return // refused: what it says is Open's to choose
		}
		// What it opened, it reads and writes on: an atom of each run, a
		// fork of each, then a run's end.
		infos, _ := db.Runs()
		for _, ri := range infos {
			r, err := db.Run(ctx, ri.ID)
			if err != nil {
				continue
			}
			r.State()
			r.StateAt(ctx, 2)
			if a, err := r.Begin(ctx); err == nil {
				act := ledger.Action{Tool: "t", Args: []byte(`{}`), Key: "forged-" + ri.ID}
				a.Do(ctx, act, func(context.Context, string) ([]byte, error) { return []byte("ok"), nil })
				a.Commit(ctx, new(frame.Delta).Set("k", []byte("v")))
			}
			if f, err := db.Fork(ctx, ri.ID, ri.LastSeq/2, "fork-of-"+ri.ID); err == nil {
				f.State()
			}
			r.End(ctx, StatusCompleted, nil)
		}
		if err := db.Close(); err != nil {
			t.Logf("close: %v", err)
		}
	})
}

// fzSeedChain is what a forger of records needs of a seed store: a
// hasher, its STORE, the heads of its records (sealed: records of an
// encrypted store, decoded without opening them) and each run's last.
func fzSeedChain(f *testing.F, s *fzStore, sealed bool) (*chain.Hasher, *layout.Store, []chain.Hash, map[string]chain.Hash) {
	f.Helper()
	h, err := chain.NewHasher(nil)
	if err != nil {
		f.Fatal(err)
	}
	sf, err := layout.ParseStore(layout.StoreName, s.files[layout.StoreName])
	if err != nil {
		f.Fatal(err)
	}
	var seedHeads []chain.Hash
	seedLast := map[string]chain.Hash{}
	for _, rec := range s.records {
		var r record.Record
		if (&record.Decoder{Sealed: sealed}).Decode(rec, wal.Pos{}, "seed", &r) == nil && r.Head != (chain.Hash{}) {
			seedHeads = append(seedHeads, r.Head)
			seedLast[r.Run] = r.Head
		}
	}
	return h, sf, seedHeads, seedLast
}
