package engine

// Native fuzz targets for the engine's own formats (format.go): the log
// records (run, atom, fail, and every other kind through replay), the atom
// body, the STORE, CHECKPOINT, frame and dictionary files, and a whole store
// whose log segment is fuzzed. Each is seeded with real bytes written by a
// small real store (fzFixture). Properties: nothing panics (I6); a decoder
// that accepts its input gives a value that encodes and decodes back to
// itself, byte for byte (the decoders refuse non-minimal varints, so an
// accepted input has exactly one encoding).
//
// A file's CRC stops almost every mutation at the first check, so the file
// targets also try each input with its trailing CRC recomputed: the fuzzer
// then explores what lies behind the checksum.
//
// Run one for longer with, e.g.:
//
//	go test ./engine -run '^$' -fuzz '^FuzzEngineOpenWAL$' -fuzztime 1h

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/stream"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

const fzDir = "fz"

// fzStore is a small real store, written once per test binary: two runs,
// atoms with actions and every kind of delta op, a failed atom, a resolved
// in-doubt action, a trained dictionary, engine checkpoints, a clean close.
type fzStore struct {
	files   map[string][]byte // path under fzDir -> content (Pebble's files left out)
	records [][]byte          // every log record, in log order
	bodies  [][]byte          // uncompressed atom bodies
	dicts   map[uint32][]byte
	err     error
}

var fzOnce struct {
	sync.Once
	s fzStore
}

type fzZeros struct{}

func (fzZeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }

func fzOptions(fs vfs.FS) *Options {
	return &Options{
		FS: fs, SegmentSize: wal.MinSegmentSize, SnapshotEvery: 2, RestartTail: 2 << 10,
		CheckpointEvery: 3, DictSamples: 16, DictSize: 1 << 10, Nonces: fzZeros{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func fzFixture(tb testing.TB) *fzStore {
	tb.Helper()
	fzOnce.Do(func() { fzOnce.s.err = fzBuild(&fzOnce.s) })
	if fzOnce.s.err != nil {
		tb.Fatalf("building the fuzz seed store: %v", fzOnce.s.err)
	}
	return &fzOnce.s
}

func fzBuild(s *fzStore) error {
	ctx := context.Background()
	fs := vfs.NewMem()
	db, err := Open(fzDir, fzOptions(fs))
	if err != nil {
		return err
	}
	exec := func(ctx context.Context, key string) ([]byte, error) {
		return []byte(`{"ok":true,"key":"` + key + `"}`), nil
	}
	for i, id := range []string{"fz-a", "run b/ü"} {
		run, err := db.Run(ctx, id)
		if err != nil {
			return err
		}
		for seq := 1; seq <= 9; seq++ {
			a, err := run.Begin(ctx)
			if err != nil {
				return err
			}
			act := ledger.Action{Tool: "tool.call", Args: []byte(fmt.Sprintf(`{"run":%d,"seq":%d,"secret":"s"}`, i, seq)),
				Idempotent: seq%2 == 0, Redact: []string{"/secret"}}
			out, err := a.Do(ctx, act, exec)
			if err != nil {
				return err
			}
			if seq == 4 {
				if err := a.Fail(ctx, "a failed attempt, retried"); err != nil {
					return err
				}
				if a, err = run.Begin(ctx); err != nil {
					return err
				}
				if out, err = a.Do(ctx, act, exec); err != nil {
					return err
				}
			}
			if seq == 5 {
				// An action resolved by the agent, as after an in-doubt one.
				if err := a.Resolve(ctx, ledger.Action{Tool: "mail.send", Args: []byte(`{"to":"x"}`), Key: "k-5-" + id}, []byte(`"sent"`)); err != nil {
					return err
				}
			}
			d := new(frame.Delta).
				AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: strings.Repeat("thinking about the next step ", seq)}).
				Set(fmt.Sprintf("k%d", seq%3), out).
				AppendScratch([]byte("note;"))
			switch seq {
			case 1:
				d.SetObjective("finish the fuzz seed").AddSubgoal("g1", "first goal").AddPending(frame.Pending{CallID: "c1", Tool: "t", Args: []byte(`{}`), Key: "k"})
			case 2:
				d.SetSubgoalStatus("g1", frame.SubgoalActive).ToolOutput("c1", "t", []byte(`{"r":1}`))
			case 3:
				d.Delete("k0").ClearScratch()
			case 6:
				d.SetSubgoalStatus("g1", frame.SubgoalDone).DropMessages(1)
			}
			if err := a.Commit(ctx, d); err != nil {
				return err
			}
		}
	}
	// A saga rolled back: version 2 intents (a compensation recorded, a
	// compensation run), the rollback record and a replace_frame delta are
	// seeds too.
	saga, err := db.Run(ctx, "fz-saga")
	if err != nil {
		return err
	}
	for seq := 1; seq <= 2; seq++ {
		a, err := saga.Begin(ctx)
		if err != nil {
			return err
		}
		act := ledger.Action{Tool: "pay", Args: []byte(fmt.Sprintf(`{"n":%d}`, seq)),
			Compensate: &ledger.Action{Tool: "refund", Args: []byte(fmt.Sprintf(`{"n":%d}`, seq)), Idempotent: seq == 2}}
		if _, err := a.Do(ctx, act, exec); err != nil {
			return err
		}
		if err := a.Commit(ctx, new(frame.Delta).AddSubgoal(fmt.Sprint("g", seq), "pay").Set("paid", []byte(fmt.Sprint(seq)))); err != nil {
			return err
		}
	}
	if _, err := saga.Rollback(ctx, 1, RollbackOptions{Exec: func(Undo) ledger.Exec { return exec }}); err != nil {
		return err
	}
	// Branches of run fz-a: atoms with a base extension, and intents and
	// certificates of a branch's actions (seq 0, branch keys).
	br, err := db.Run(ctx, "fz-a")
	if err != nil {
		return err
	}
	var branches []*Atom // both in flight, then both commit
	var outs [][]byte
	for _, name := range []string{"fz-x", "fz-y"} {
		b, err := br.Branch(ctx, name, MemoryKey("k1"), ObjectiveKey())
		if err != nil {
			return err
		}
		out, err := b.Do(ctx, ledger.Action{Tool: "branch.call", Args: []byte(`{"b":"` + name + `"}`)}, exec)
		if err != nil {
			return err
		}
		branches, outs = append(branches, b), append(outs, out)
	}
	for i, b := range branches {
		d := new(frame.Delta).Set(b.Branch(), outs[i])
		if i == 0 { // one writer of the conversation: two would conflict
			d.ToolOutput("c-"+b.Branch(), "branch.call", outs[i])
		}
		if err := b.Commit(ctx, d); err != nil {
			return err
		}
	}
	// A run ended and deleted: the end and delete records are seeds too.
	gone, err := db.Run(ctx, "fz-gone")
	if err != nil {
		return err
	}
	a, err := gone.Begin(ctx)
	if err != nil {
		return err
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
		return err
	}
	if err := gone.End(ctx, StatusCompleted, []byte("done")); err != nil {
		return err
	}
	if _, err := db.Delete(ctx, "fz-gone"); err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}

	s.files = map[string][]byte{}
	if err := fzCollect(fs, fzDir, s.files); err != nil {
		return err
	}

	s.dicts = map[uint32][]byte{}
	dicts := frame.NewDicts()
	for name, b := range s.files {
		if strings.HasPrefix(name, layout.DictsDir+"/") {
			id, dict, err := layout.ParseDict(name, b)
			if err != nil {
				return err
			}
			s.dicts[id] = dict
			if err := dicts.Add(id, dict); err != nil {
				return err
			}
		}
	}
	if len(s.dicts) == 0 {
		return errors.New("the seed store trained no dictionary")
	}
	comp := frame.NewCompressor(dicts)
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
		rec := bytes.Clone(rd.Record())
		s.records = append(s.records, rec)
		var r record.Record
		if err := (&record.Decoder{}).Decode(rec, rd.Pos(), "seed", &r); err != nil {
			return err
		}
		if r.Kind == record.KindAtom {
			body, err := comp.Decompress(nil, r.Body)
			if err != nil {
				return err
			}
			s.bodies = append(s.bodies, body)
		}
	}
	return rd.Err()
}

// fzNames returns the seed store's file names that start with prefix,
// sorted.
func (s *fzStore) fzNames(prefix string) []string {
	var names []string
	for n := range s.files {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// fzFilesWith returns the seed store's files whose name starts with prefix.
func (s *fzStore) fzFilesWith(prefix string) [][]byte {
	names := s.fzNames(prefix)
	out := make([][]byte, len(names))
	for i, n := range names {
		out[i] = s.files[n]
	}
	return out
}

// fzFixCRC returns b with its trailing CRC32C recomputed over the rest, or
// nil if b is too short to have one.
func fzFixCRC(b []byte) []byte {
	if len(b) < 4 {
		return nil
	}
	out := bytes.Clone(b)
	binary.LittleEndian.PutUint32(out[len(out)-4:], crc32.Checksum(out[:len(out)-4], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// fzBoth calls check with b and, if it differs, with b's CRC fixed.
func fzBoth(b []byte, check func([]byte)) {
	check(b)
	if fixed := fzFixCRC(b); fixed != nil && !bytes.Equal(fixed, b) {
		check(fixed)
	}
}

// fzReplayDB is the least of a DB that replay and materialize need: the
// seed store's dictionaries, an empty ledger, no runs, no files.
func fzReplayDB(s *fzStore) (*DB, error) {
	h, err := chain.NewHasher(nil)
	if err != nil {
		return nil, err
	}
	db := &DB{ledger: ledger.New(),
		storeLoc:    storeLoc{fs: vfs.NewMem(), dir: fzDir, logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		recordCodec: recordCodec{hasher: h, dicts: frame.NewDicts()}}
	for id, d := range s.dicts {
		if err := db.dicts.Add(id, d); err != nil {
			return nil, err
		}
	}
	db.comp = frame.NewCompressor(db.dicts)
	db.mu.runs = map[string]*Run{}
	db.eraser = newEraser(db)
	db.streams = stream.NewStreams(func() stream.Source { return db.streamLog() }, db.fs, db.path(streamsName), true)
	return db, nil
}

// FuzzEngineRecord replays a log record of any kind into a store that
// already holds the seed store's runs, then materializes the runs' frames
// (record.FuzzDecode fuzzes the decoding itself).
func FuzzEngineRecord(f *testing.F) {
	s := fzFixture(f)
	for _, r := range s.records {
		f.Add(r)
	}
	// Stream records of a seed run (streams.go): a chunk and an abandon.
	f.Add(record.AppendStreamChunk(nil, "fz-a", 9, 1, "tokens", 0, []byte("tok")))
	f.Add(record.AppendStreamAbandon(nil, "fz-a", 9, 1))
	f.Add(record.AppendStreamChunk(nil, "no-such-run", 1, 1, "s", 0, nil))
	f.Fuzz(func(t *testing.T, rec []byte) {
		db, err := fzReplayDB(s)
		if err != nil {
			t.Fatal(err)
		}
		dec := db.decoder(true)
		pos := wal.Pos{Segment: 1, Offset: wal.SegmentHeaderSize}
		var r record.Record
		for _, raw := range s.records {
			if record.Kind(raw[0]) == record.KindRun {
				if err := dec.Decode(raw, pos, "seed", &r); err != nil {
					t.Fatal(err)
				}
				if err := db.replay(&r, false); err != nil {
					t.Fatalf("replaying a seed record: %v", err)
				}
			}
		}
		err = dec.Decode(rec, wal.Pos{Segment: 2, Offset: wal.SegmentHeaderSize}, "fuzzed", &r)
		if err == nil {
			err = db.replay(&r, false)
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("replay error does not match ErrCorrupt: %v", err)
		}
		for _, r := range db.mu.runs {
			r.mu.Lock()
			r.materializeLocked()
			r.mu.Unlock()
		}
	})
}

// FuzzEngineStoreFile parses a STORE file.
func FuzzEngineStoreFile(f *testing.F) {
	f.Add(fzFixture(f).files[layout.StoreName])
	f.Fuzz(func(t *testing.T, b []byte) {
		fzBoth(b, func(b []byte) {
			s, err := layout.ParseStore("STORE", b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error does not match ErrCorrupt: %v", err)
				}
				return
			}
			enc := s.Marshal()
			s2, err := layout.ParseStore("STORE", enc)
			if err != nil || *s2 != *s {
				t.Fatalf("STORE %x re-encodes to %x, parsing to %+v (%v)", b, enc, s2, err)
			}
		})
	})
}

// FuzzEngineCheckpointFile parses a CHECKPOINT file.
func FuzzEngineCheckpointFile(f *testing.F) {
	s := fzFixture(f)
	f.Add(s.files[layout.CheckpointName])
	// And one with an in-flight atom and several runs, from the encoder.
	cp := layout.Checkpoint{Gen: 7, Replay: wal.Pos{Segment: 3, Offset: 4096}, LedgerGen: 7, StoreID: [16]byte{1, 2, 3},
		Runs: []layout.CheckpointRun{{ID: "r", LastSeq: 4, FrameSeq: 4, IndexedSeq: 4, SnapSeq: 2, CkptSeq: 3,
			Inflight: []layout.InflightAction{{Index: 0, FP: ledger.Fingerprint{9}}, {Index: 2, FP: ledger.Fingerprint{8}}}}, {ID: "s"}}}
	f.Add(cp.Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		fzBoth(b, func(b []byte) {
			c, err := layout.ParseCheckpoint("CHECKPOINT", b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error does not match ErrCorrupt: %v", err)
				}
				return
			}
			enc := c.Marshal()
			c2, err := layout.ParseCheckpoint("CHECKPOINT", enc)
			if err != nil || !reflect.DeepEqual(c, c2) || !bytes.Equal(c2.Marshal(), enc) {
				t.Fatalf("CHECKPOINT %x re-encodes to %x, parsing to %+v (%v); first parse %+v", b, enc, c2, err, c)
			}
		})
	})
}

// FuzzEngineFrameFile parses a frame file and decodes the frame it holds.
func FuzzEngineFrameFile(f *testing.F) {
	s := fzFixture(f)
	for _, b := range s.fzFilesWith(layout.FramesDir + "/") {
		f.Add(b)
	}
	db, err := fzReplayDB(s)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fzBoth(b, func(b []byte) {
			ff, err := layout.ParseFrameFile("x.frame", b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error does not match ErrCorrupt: %v", err)
				}
				return
			}
			enc := ff.Marshal()
			ff2, err := layout.ParseFrameFile("x.frame", enc)
			if err != nil || !reflect.DeepEqual(ff, ff2) || !bytes.Equal(ff2.Marshal(), enc) {
				t.Fatalf("frame file %x re-encodes to %x, parsing to %+v (%v)", b, enc, ff2, err)
			}
			if _, err := db.decodeFrame(ff.Frame, ff.Run, ff.Seq, "x.frame"); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("frame decoding error does not match ErrCorrupt: %v", err)
			}
		})
	})
}

// FuzzEngineDictFile parses a dictionary file and registers the
// dictionary it holds.
func FuzzEngineDictFile(f *testing.F) {
	for _, b := range fzFixture(f).fzFilesWith(layout.DictsDir + "/") {
		f.Add(b)
	}
	f.Add(layout.MarshalDict(3, []byte("not a zstd dictionary, a raw one")))
	f.Fuzz(func(t *testing.T, b []byte) {
		fzBoth(b, func(b []byte) {
			id, dict, err := layout.ParseDict("x.dict", b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error does not match ErrCorrupt: %v", err)
				}
				return
			}
			enc := layout.MarshalDict(id, dict)
			id2, dict2, err := layout.ParseDict("x.dict", enc)
			if err != nil || id2 != id || !bytes.Equal(dict2, dict) || !bytes.Equal(layout.MarshalDict(id2, dict2), enc) {
				t.Fatalf("dictionary file %x re-encodes to %x, parsing to %d %x (%v)", b, enc, id2, dict2, err)
			}
			ds := frame.NewDicts()
			if ds.Add(id, dict) == nil {
				c := frame.NewCompressor(ds)
				in := []byte("a record body compressed with a fuzzed dictionary")
				out, err := c.Decompress(nil, c.Compress(nil, in, id))
				if err != nil || !bytes.Equal(out, in) {
					t.Fatalf("dictionary %d accepted, but a record compressed with it comes back as %q (%v)", id, out, err)
				}
			}
		})
	})
}

// FuzzEngineOpenWAL opens a whole store one of whose log segments is
// fuzzed (the others are the seed store's; there is no CHECKPOINT, so Open
// replays all of them). Verify must not panic, before and after; Open must
// fail or give a working DB: every run's state reads or fails with an
// error, and if it reads, a new atom commits and is there after a reopen.
func FuzzEngineOpenWAL(f *testing.F) {
	s := fzFixture(f)
	var segs [][]byte // the segments, in order
	for _, n := range s.fzNames(layout.WALDir + "/") {
		if strings.HasSuffix(n, ".wal") {
			segs = append(segs, s.files[n])
		}
	}
	for i, b := range segs {
		f.Add(uint8(i), fzTrimZeros(b))
	}
	f.Fuzz(func(t *testing.T, which uint8, seg []byte) {
		ctx := context.Background()
		fs := vfs.NewMem()
		for name, b := range s.files {
			if name == layout.StoreName || strings.HasPrefix(name, layout.DictsDir+"/") {
				fzWrite(t, fs, name, b)
			}
		}
		for i, b := range segs {
			if i == int(which)%len(segs) {
				b = seg
			}
			fzWrite(t, fs, fmt.Sprintf("%s/%016x.wal", layout.WALDir, i+1), b)
		}
		if _, err := Verify(ctx, fzDir, &VerifyOptions{FS: fs, Deep: true}); err != nil {
			t.Logf("verify: %v", err) // cannot check at all: reported, not a panic
		}
		opts := fzOptions(fs)
		opts.DictSamples = -1
		db, err := Open(fzDir, opts)
		if err != nil {
			return
		}
		want := map[string]uint64{}
		for _, info := range fzRuns(t, db) {
			run, err := db.Run(ctx, info.ID)
			if err != nil {
				t.Fatalf("run %q listed but not opened: %v", info.ID, err)
			}
			if _, err := run.StateE(); err != nil {
				continue // damage found lazily: an error, as it should be
			}
			for seq := uint64(0); seq <= min(run.LastSeq(), 16); seq++ {
				run.StateAt(ctx, seq)
			}
			a, err := run.Begin(ctx)
			if err != nil {
				continue // the run's atom was interrupted and is still running elsewhere
			}
			if err := a.Commit(ctx, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleUser, Content: "after the fuzzed log"})); err != nil {
				t.Fatalf("run %q: commit on a store that opened and read: %v", info.ID, err)
			}
			want[info.ID] = a.Seq()
		}
		if err := db.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		db, err = Open(fzDir, opts)
		if err != nil {
			t.Fatalf("reopen after committing to a store that opened: %v", err)
		}
		for id, seq := range want {
			run, err := db.Run(ctx, id)
			if err != nil || run.LastSeq() != seq {
				t.Fatalf("run %q after reopen: %v, last seq %d, want %d", id, err, run.LastSeq(), seq)
			}
		}
		db.Close()
		Verify(ctx, fzDir, &VerifyOptions{FS: fs, Deep: true})
	})
}

func fzRuns(t *testing.T, db *DB) []RunInfo {
	infos, err := db.Runs()
	if err != nil {
		t.Fatal(err)
	}
	return infos
}

func fzWrite(t *testing.T, fs vfs.FS, name string, b []byte) {
	name = fs.PathJoin(fzDir, name)
	if err := fs.MkdirAll(fs.PathDir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Clone(b)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// fzTrimZeros cuts the zero fill off the end of a segment, keeping a few
// bytes, so that seeds stay small.
func fzTrimZeros(b []byte) []byte {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return b[:min(len(b), n+16)]
}
