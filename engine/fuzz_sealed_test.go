package engine

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

// The encrypted seed store of FuzzForgedSealedLog: written once per test
// binary, like fzFixture's.
var fzSealedOnce struct {
	sync.Once
	s    fzStore
	ring seal.Keyring
}

// fzSealedRuns are the runs of the encrypted seed store: fz-a and run b/ü
// made actions (default-key, explicit-key and, in fz-a, a compensated
// one) and wrote an erasable key, fz-a's values of which are erased;
// fz-gone made actions, ended and was erased whole.
var fzSealedRuns = []string{"fz-a", "run b/ü", "fz-gone"}

func fzSealedOptions(fs vfs.FS, ring seal.Keyring) *Options {
	o := fzOptions(fs)
	o.Keyring, o.ErasableKeys = ring, []string{"email"}
	return o
}

// fzSealedFixture returns the encrypted seed store (its records are sealed
// ones; its bodies, the plaintext atom bodies the forger writes, are the
// plaintext seed's) and its keyring.
func fzSealedFixture(tb testing.TB) (*fzStore, seal.Keyring) {
	tb.Helper()
	plain := fzFixture(tb)
	fzSealedOnce.Do(func() {
		fzSealedOnce.s.err = fzBuildSealed(&fzSealedOnce.s, &fzSealedOnce.ring)
		fzSealedOnce.s.bodies = plain.bodies
	})
	if fzSealedOnce.s.err != nil {
		tb.Fatalf("building the encrypted fuzz seed store: %v", fzSealedOnce.s.err)
	}
	return &fzSealedOnce.s, fzSealedOnce.ring
}

func fzBuildSealed(s *fzStore, ringOut *seal.Keyring) error {
	ctx := context.Background()
	ring, err := seal.NewKeyring(map[string][]byte{"fz": bytes.Repeat([]byte{0x7a}, seal.KeySize)}, "fz")
	if err != nil {
		return err
	}
	*ringOut = ring
	fs := vfs.NewMem()
	db, err := Open(fzDir, fzSealedOptions(fs, ring))
	if err != nil {
		return err
	}
	exec := func(ctx context.Context, key string) ([]byte, error) {
		return []byte(`{"ok":true,"key":"` + key + `"}`), nil
	}
	for _, id := range fzSealedRuns {
		run, err := db.Run(ctx, id)
		if err != nil {
			return err
		}
		for seq := 1; seq <= 4; seq++ {
			a, err := run.Begin(ctx)
			if err != nil {
				return err
			}
			out, err := a.Do(ctx, ledger.Action{Tool: "lookup", Args: []byte(fmt.Sprintf(`{"q":"%s %d"}`, id, seq))}, exec)
			if err != nil {
				return err
			}
			act := ledger.Action{Tool: "charge", Key: fmt.Sprintf("charge-%s-%d", id, seq), Args: []byte(`{"n":1}`)}
			if id == "fz-a" && seq == 2 {
				act.Compensate = &ledger.Action{Tool: "refund", Args: []byte(`{"n":1}`)}
			}
			if _, err := a.Do(ctx, act, exec); err != nil {
				return err
			}
			d := new(frame.Delta).Set("email", []byte(id+"@example.com")).Set(fmt.Sprint("k", seq%2), out).
				AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: strings.Repeat("step ", seq)})
			if seq == 3 {
				if err := a.Fail(ctx, "retried"); err != nil {
					return err
				}
				if a, err = run.Begin(ctx); err != nil {
					return err
				}
			}
			if err := a.Commit(ctx, d); err != nil {
				return err
			}
		}
	}
	if _, err := db.EraseKey(ctx, "fz-a", "email", "request 1"); err != nil {
		return err
	}
	gone, err := db.Run(ctx, "fz-gone")
	if err != nil {
		return err
	}
	if err := gone.End(ctx, StatusCompleted, []byte("done fz-gone")); err != nil {
		return err
	}
	if _, err := db.Erase(ctx, "fz-gone", "request 2"); err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	s.files = map[string][]byte{}
	if err := fzCollect(fs, fzDir, s.files); err != nil {
		return err
	}
	if _, ok := s.files[layout.KeysName]; !ok {
		return fmt.Errorf("the encrypted seed store has no %s file", layout.KeysName)
	}
	log, err := wal.Open(fs.PathJoin(fzDir, layout.WALDir), &wal.Options{FS: fs, ReadOnly: true})
	if err != nil {
		return err
	}
	defer log.Close()
	rd, err := log.NewReader(wal.Pos{})
	if err != nil {
		return err
	}
	defer rd.Close()
	for rd.Next() {
		s.records = append(s.records, bytes.Clone(rd.Record()))
	}
	return rd.Err()
}

// fzCollect reads every file under dir into files (path under fzDir ->
// content), leaving out Pebble's snapshots and the lock.
func fzCollect(fs vfs.FS, dir string, files map[string][]byte) error {
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := fs.PathJoin(dir, n)
		if n == "snapshots" || n == layout.LockName {
			continue
		}
		st, err := fs.Stat(p)
		if err != nil {
			return err
		}
		if st.IsDir() {
			if err := fzCollect(fs, p, files); err != nil {
				return err
			}
			continue
		}
		b, err := layout.ReadFile(fs, p)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(p, fzDir+"/")] = b
	}
	return nil
}

// FuzzForgedSealedLog is FuzzForgedLog's sibling for an encrypted store
// with erasures (a run erased whole, a memory key's values erased): its
// sealed intent, certificate and atom records, its KEYS file and its
// erase and erase-key records. The input is a program: each op (its first
// byte mod 4) appends a record fzForger forges (plaintext, which an
// encrypted store refuses, or a seed record again), appends a seed record
// with one byte changed or cut short, or changes one byte of a file
// (KEYS most often). Then it verifies the store (plain, and Deep with the
// keyring), inspects it with the keyring (every run's atoms, frames,
// export and diff) and opens it with the keyring and writes on it: none
// may panic. The seed store, nothing changed, verifies and inspects.
func FuzzForgedSealedLog(f *testing.F) {
	s, ring := fzSealedFixture(f)
	for _, seed := range [][]byte{
		{},                          // nothing changed: the seed store verifies and inspects
		{0, 0, 5, 0, 7},             // a seed record again
		{1, 9, 40, 0x80},            // a seed record with a byte flipped
		{2, 12, 17},                 // a seed record cut short
		{3, 0, 0, 50, 1},            // a byte of KEYS changed
		{3, 1, 3, 9, 0xff},          // a byte of another file changed
		{0, 6, 6, 3, 0},             // an erasure, forged (fzForger's op 6)
		{0, 3, 0, 12, 1, 0},         // a plaintext atom of fz-a
		{1, 30, 90, 1, 1, 31, 3, 4}, // two seed records changed
	} {
		f.Add(seed)
	}
	h, sf, seedHeads, seedLast := fzSeedChain(f, s, true)
	var names []string // the files op 3 changes: KEYS first
	names = append(names, layout.KeysName)
	for name := range s.files {
		if name != layout.KeysName {
			names = append(names, name)
		}
	}
	slices.Sort(names[1:])
	comp := frame.NewCompressor(frame.NewDicts())
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 128 {
			return
		}
		ctx := context.Background()
		g := &fzForger{s: s, hasher: h, comp: comp, storeID: hex.EncodeToString(sf.ID[:]),
			heads: append([]chain.Hash{{}}, seedHeads...), last: map[string]chain.Hash{}, in: in}
		for k, v := range seedLast {
			g.last[k] = v
		}
		files := map[string][]byte{}
		for name, b := range s.files {
			files[name] = b
		}
		var recs [][]byte
		for len(g.in) > 0 {
			switch g.byte() % 4 {
			case 0:
				recs = append(recs, g.record())
			case 1: // a seed record, one byte changed
				rec := bytes.Clone(s.records[int(g.byte())%len(s.records)])
				rec[int(g.byte())%len(rec)] ^= g.byte() | 1
				recs = append(recs, rec)
			case 2: // a seed record, cut short
				rec := s.records[int(g.byte())%len(s.records)]
				recs = append(recs, bytes.Clone(rec[:int(g.byte())%len(rec)]))
			default: // a byte of a file changed (the files written, the log's too)
				name := names[0]
				if g.byte()%2 == 1 {
					name = names[int(g.byte())%len(names)]
				}
				b := bytes.Clone(files[name])
				if len(b) > 0 {
					b[int(g.byte())%len(b)] ^= g.byte() | 1
				}
				files[name] = b
			}
		}
		mem := vfs.NewMem()
		for name, b := range files {
			p := mem.PathJoin(fzDir, name)
			if err := mem.MkdirAll(mem.PathDir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := layout.WriteFileAtomic(mem, p, bytes.Clone(b), true); err != nil {
				t.Fatal(err)
			}
		}
		if len(recs) > 0 {
			log, err := wal.Open(mem.PathJoin(fzDir, layout.WALDir), &wal.Options{FS: mem, SegmentSize: wal.MinSegmentSize})
			if err != nil {
				return // a log file changed: the writer refuses it, the readers are tried below
			}
			for _, rec := range recs {
				if len(rec) == 0 {
					continue
				}
				if _, err := log.Append(ctx, rec); err != nil {
					t.Fatal(err)
				}
			}
			if err := log.Close(); err != nil {
				t.Fatal(err)
			}
		}
		for _, deep := range []bool{false, true} {
			o := &VerifyOptions{FS: mem, Deep: deep}
			if deep {
				o.Keyring = ring
			}
			rep, err := Verify(ctx, fzDir, o)
			if len(in) == 0 && (err != nil || !rep.OK) {
				t.Fatalf("the seed store (deep %v): %v, failures %v", deep, err, rep.Failures)
			}
		}
		fzInspectAll(t, mem, ring, len(in) == 0)
		db, err := Open(fzDir, fzSealedOptions(mem, ring))
		if err != nil {
			if len(in) == 0 {
				t.Fatalf("the seed store: Open: %v", err)
			}
			return
		}
		infos, _ := db.Runs()
		for _, ri := range infos {
			r, err := db.Run(ctx, ri.ID)
			if err != nil {
				continue
			}
			r.State()
			r.StateAt(ctx, 2)
			if a, err := r.Begin(ctx); err == nil {
				a.Do(ctx, ledger.Action{Tool: "t", Args: []byte(`{}`)}, func(context.Context, string) ([]byte, error) { return []byte("ok"), nil })
				a.Commit(ctx, new(frame.Delta).Set("email", []byte("v")))
			}
			r.End(ctx, StatusCompleted, nil)
		}
		if err := db.Close(); err != nil {
			t.Logf("close: %v", err)
		}
	})
}

// fzInspectAll inspects the store at fzDir with ring and reads every view
// of every run: none may panic. must: the store is the seed, which must
// read without error.
func fzInspectAll(t *testing.T, fs vfs.FS, ring seal.Keyring, must bool) {
	ctx := context.Background()
	in, err := Inspect(ctx, fzDir, &InspectOptions{FS: fs, Keyring: ring})
	if err != nil {
		if must {
			t.Fatalf("the seed store: Inspect: %v", err)
		}
		return
	}
	defer in.Close()
	check := func(what string, err error) {
		if must && err != nil {
			t.Fatalf("the seed store: %s: %v", what, err)
		}
	}
	in.Stats()
	runs := in.Runs()
	if must && len(runs) != 2 {
		t.Fatalf("the seed store: Inspect: runs %v, want fz-a and run b/ü", runs)
	}
	for _, r := range runs {
		for seq := uint64(0); seq <= min(r.LastSeq, 6); seq++ {
			if seq > 0 {
				_, err := in.Atom(ctx, r.ID, seq)
				check(fmt.Sprintf("Atom %s %d", r.ID, seq), err)
			}
			_, _, err := in.StateAtWithErased(ctx, r.ID, seq)
			check(fmt.Sprintf("StateAt %s %d", r.ID, seq), err)
		}
		_, err := in.Export(ctx, io.Discard, r.ID, 0, 0)
		check("Export "+r.ID, err)
		_, err = in.Diff(ctx, r.ID, 0, r.ID, r.LastSeq)
		check("Diff "+r.ID, err)
		in.Diff(ctx, r.ID, r.LastSeq, runs[0].ID, runs[0].LastSeq) // other lineages: an error
	}
}
