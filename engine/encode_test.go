package engine

// The delta's one path to the log (encodeAtom) against the path it
// replaced, which built the same record with four copies of the delta's
// bytes: encoded into a buffer, copied into the body, the body into the
// chained payload, compressed into the record.
//
//	go test -run '^$' -bench AtomEncode -benchtime 20000x ./engine
//
// cpu-ns/op is the process's user+system CPU per record (getrusage): on a
// shared machine, wall time measures the neighbours.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/zeebo/blake3"
)

// copyingBuf holds the buffers of the four-copy path.
type copyingBuf struct{ delta, body, payload, rec []byte }

// encodeAtomCopying is the path before encodeAtom, kept as its baseline
// and as the composition of record's functions that encodeAtom must
// agree with: the delta encoded into its own buffer, AppendAtomBody,
// AppendPayload's layout assembled, Link, then the header and Compress.
func encodeAtomCopying(db *DB, buf *copyingBuf, run string, seq uint64, prev chain.Hash, actions []atomAction, d *frame.Delta) ([]byte, chain.Hash) {
	fps := make([]ledger.Fingerprint, len(actions))
	results := make([][]byte, len(actions))
	for i, act := range actions {
		fps[i], results[i] = act.fp, act.result
	}
	stored := d
	if len(actions) > 0 && !inlineResults.Load() {
		stored = d.ReferResults(results)
	}
	buf.delta = frame.AppendDelta(buf.delta[:0], stored)
	buf.body = record.AppendAtomBody(buf.body[:0], fps, buf.delta)
	buf.payload = append(buf.payload[:0], buf.body...)
	for _, act := range actions {
		sum := blake3.Sum256(act.result)
		buf.payload = append(buf.payload, sum[:]...)
	}
	head := db.hasher.Link(run, seq, prev, buf.payload)
	buf.rec = db.comp.Compress(record.AppendAtomHeader(buf.rec[:0], run, seq, head), buf.body, db.curDict.Load())
	return buf.rec, head
}

// agentAtoms returns n atoms of the agent workload: each with one action
// whose certified result its delta records as a tool message (internal/
// agent's atom), the action's certified result, and a deterministic
// fingerprint.
func agentAtoms(n int) (deltas []*frame.Delta, actions [][]atomAction) {
	for i := range n {
		a := workload.Script("r", uint64(i+1), 1)
		d := new(frame.Delta)
		if a.Objective != "" {
			d.SetObjective(a.Objective)
		}
		d.AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: a.Thought}).
			AppendMessage(frame.Message{Role: frame.RoleTool, Content: string(a.Result), Tool: a.Tool, CallID: a.Key}).
			Set(a.MemKey, a.MemVal)
		deltas = append(deltas, d)
		actions = append(actions, []atomAction{{fp: ledger.Fingerprint(blake3.Sum256(fmt.Append(nil, i))), result: a.Result}})
	}
	return deltas, actions
}

// TestEncodeAtomOnePath: the one path writes the bytes the composition of
// record's functions writes, the chain's head included, with references
// on and off, with a dictionary and without, for deltas with and without
// actions.
func TestEncodeAtomOnePath(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, nil)
	commitWithResults(t, db, "warm", 40) // a dictionary (testOptions train one from 32 samples)
	for deadline := time.Now().Add(30 * time.Second); db.curDict.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no dictionary was trained from 40 atoms' samples")
		}
	}
	deltas, actions := agentAtoms(50)
	deltas = append(deltas, msg("no action"), new(frame.Delta))
	actions = append(actions, nil, nil)
	defer inlineResults.Store(false)
	for _, inline := range []bool{false, true} {
		inlineResults.Store(inline)
		for i, d := range deltas {
			prev := chain.Hash{byte(i)}
			var old copyingBuf
			want, wantHead := encodeAtomCopying(db, &old, "r", uint64(i+1), prev, actions[i], d)
			buf := getBuf()
			e, err := db.encodeAtom(buf, "r", uint64(i+1), prev, actions[i], d, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(e.rec, want) || e.head != wantHead {
				t.Fatalf("inline %v, atom %d: the one path wrote\n%x\nthe record functions\n%x", inline, i, e.rec, want)
			}
			if !bytes.Equal(e.body, old.body) {
				t.Fatalf("inline %v, atom %d: bodies differ", inline, i)
			}
			putBuf(buf)
			// A branch's path (the body first, outside the run's lock, then
			// the link) writes the record encodeAtom writes with the same
			// extension.
			ext := record.AtomExt{Tag: record.ExtTagBase, Data: record.AppendBranchBase(nil, &record.BranchBase{Base: uint64(i), Branch: "b"})}
			buf = getBuf()
			whole, err := db.encodeAtom(buf, "r", uint64(i+1), prev, actions[i], d, []record.AtomExt{ext}, nil)
			if err != nil {
				t.Fatal(err)
			}
			want = bytes.Clone(whole.rec)
			putBuf(buf)
			buf = getBuf()
			br, err := db.encodeAtomBody(buf, "r", 0, actions[i], d, []record.AtomExt{ext}, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.compressAtomBody(buf, br)
			db.sealAtom(buf, &br, "r", uint64(i+1), prev)
			if !bytes.Equal(br.rec, want) || br.head != whole.head {
				t.Fatalf("inline %v, atom %d: the branch's path wrote\n%x\nencodeAtom\n%x", inline, i, br.rec, want)
			}
			putBuf(buf)
		}
	}
}

func BenchmarkAtomEncode(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), "s"), &Options{NoSync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	deltas, actions := agentAtoms(2000)
	run, err := db.Run(ctx, "warm")
	if err != nil {
		b.Fatal(err)
	}
	for i := range 300 { // past dictionary training
		a, err := run.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		res := actions[i][0].result
		if _, err := a.Do(ctx, ledger.Action{Tool: "t", Args: fmt.Appendf(nil, `{"i":%d}`, i)}, func(context.Context, string) ([]byte, error) { return res, nil }); err != nil {
			b.Fatal(err)
		}
		if err := a.Commit(ctx, deltas[i]); err != nil {
			b.Fatal(err)
		}
	}
	for db.curDict.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	b.Run("four-copies", func(b *testing.B) {
		var buf copyingBuf
		var n int64
		b.ReportAllocs()
		c0 := cpuNow()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			j := i % len(deltas)
			rec, _ := encodeAtomCopying(db, &buf, "r", uint64(i+1), chain.Hash{}, actions[j], deltas[j])
			n += int64(len(rec))
		}
		b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(n)/float64(b.N), "B/record")
	})
	b.Run("one-path", func(b *testing.B) {
		var n int64
		b.ReportAllocs()
		c0 := cpuNow()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			j := i % len(deltas)
			buf := getBuf()
			e, err := db.encodeAtom(buf, "r", uint64(i+1), chain.Hash{}, actions[j], deltas[j], nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			n += int64(len(e.rec))
			putBuf(buf)
		}
		b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(n)/float64(b.N), "B/record")
	})
}
