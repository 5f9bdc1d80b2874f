package engine

// Native fuzz targets for the engine's own formats (format.go): the log
// records (run, atom, fail, and every other kind through replay), the atom
// body, the STORE, CHECKPOINT, frame and dictionary files, and a whole store
// whose log segment is fuzzed. Each is seeded with real bytes written by a
// small real store (fzFixture). Properties: nothing panics (I6); a decoder
// that accepts its input gives a value that encodes and decodes back to
// itself, byte for byte from the second encoding on (the formats accept
// non-minimal varints, so the first re-encoding may be shorter than the
// input).
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
	"github.com/continuumdb/continuum/ledger"
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
	if err := db.Close(); err != nil {
		return err
	}

	s.files = map[string][]byte{}
	var walk func(dir string) error
	walk = func(dir string) error {
		names, err := fs.List(dir)
		if err != nil {
			return err
		}
		for _, n := range names {
			p := fs.PathJoin(dir, n)
			if n == "snapshots" || n == lockFile {
				continue
			}
			st, err := fs.Stat(p)
			if err != nil {
				return err
			}
			if st.IsDir() {
				if err := walk(p); err != nil {
					return err
				}
				continue
			}
			b, err := readFile(fs, p)
			if err != nil {
				return err
			}
			s.files[strings.TrimPrefix(p, fzDir+"/")] = b
		}
		return nil
	}
	if err := walk(fzDir); err != nil {
		return err
	}

	s.dicts = map[uint32][]byte{}
	dicts := frame.NewDicts()
	for name, b := range s.files {
		if strings.HasPrefix(name, dictsDir+"/") {
			id, dict, err := parseDictFile(name, b)
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
	log, err := wal.Open(fs.PathJoin(fzDir, walDir), &wal.Options{FS: fs, ReadOnly: true})
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
		if rec[0] == kindAtom {
			a, err := decodeAtomRecord(rec)
			if err != nil {
				return err
			}
			body, err := comp.Decompress(nil, a.body)
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
	binary.LittleEndian.PutUint32(out[len(out)-4:], crc32.Checksum(out[:len(out)-4], castagnoli))
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
	db := &DB{fs: vfs.NewMem(), dir: fzDir, hasher: h, ledger: ledger.New(), dicts: frame.NewDicts(),
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for id, d := range s.dicts {
		if err := db.dicts.Add(id, d); err != nil {
			return nil, err
		}
	}
	db.comp = frame.NewCompressor(db.dicts)
	db.mu.runs = map[string]*Run{}
	return db, nil
}

// FuzzEngineRecord decodes a log record of any kind: with its own decoder
// (round trip), and through replay into a store that already holds the
// seed store's records, then materializes the runs' frames.
func FuzzEngineRecord(f *testing.F) {
	s := fzFixture(f)
	for _, r := range s.records {
		f.Add(r)
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		fzRecordRoundTrip(t, rec)
		db, err := fzReplayDB(s)
		if err != nil {
			t.Fatal(err)
		}
		pos := wal.Pos{Segment: 1, Offset: wal.SegmentHeaderSize}
		for _, r := range s.records {
			if r[0] == kindRun {
				if err := db.replay(r, pos, false); err != nil {
					t.Fatalf("replaying a seed record: %v", err)
				}
			}
		}
		err = db.replay(rec, wal.Pos{Segment: 2, Offset: wal.SegmentHeaderSize}, false)
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

func fzRecordRoundTrip(t *testing.T, rec []byte) {
	if len(rec) == 0 {
		return
	}
	switch rec[0] {
	case kindRun:
		r, err := decodeRunRecord(rec)
		if err != nil {
			return
		}
		b := appendRunRecord(nil, r)
		r2, err := decodeRunRecord(b)
		if err != nil || !reflect.DeepEqual(r, r2) || !bytes.Equal(appendRunRecord(nil, r2), b) {
			t.Fatalf("run record %x: decodes to %+v, which re-encodes to %x, decoding to %+v (%v)", rec, r, b, r2, err)
		}
	case kindAtom:
		a, err := decodeAtomRecord(rec)
		if err != nil {
			return
		}
		b := append(appendAtomHeader(nil, a.run, a.seq, a.head), a.body...)
		a2, err := decodeAtomRecord(b)
		if err != nil || a2.run != a.run || a2.seq != a.seq || a2.head != a.head || !bytes.Equal(a2.body, a.body) {
			t.Fatalf("atom record %x: re-encodes to %x, decoding to %+v (%v)", rec, b, a2, err)
		}
	case kindFail:
		fr, err := decodeFailRecord(rec)
		if err != nil {
			return
		}
		b := appendFailRecord(nil, fr)
		fr2, err := decodeFailRecord(b)
		if err != nil || !reflect.DeepEqual(fr, fr2) || !bytes.Equal(appendFailRecord(nil, fr2), b) {
			t.Fatalf("fail record %x: decodes to %+v, which re-encodes to %x, decoding to %+v (%v)", rec, fr, b, fr2, err)
		}
	}
}

// FuzzEngineAtomBody decodes an uncompressed atom body and its delta.
func FuzzEngineAtomBody(f *testing.F) {
	for _, b := range fzFixture(f).bodies {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := decodeAtomBody(b)
		if err != nil {
			return
		}
		enc := appendAtomBody(nil, a.actions, a.delta)
		a2, err := decodeAtomBody(enc)
		if err != nil || !reflect.DeepEqual(a.actions, a2.actions) || !bytes.Equal(a.delta, a2.delta) ||
			!bytes.Equal(appendAtomBody(nil, a2.actions, a2.delta), enc) {
			t.Fatalf("atom body %x re-encodes to %x, decoding to %+v (%v)", b, enc, a2, err)
		}
		if d, err := frame.DecodeDelta(a.delta); err == nil {
			f := newFrame()
			if f.CanApply(d) == nil {
				f.Apply(d)
			}
		}
	})
}

// FuzzEngineStoreFile parses a STORE file.
func FuzzEngineStoreFile(f *testing.F) {
	f.Add(fzFixture(f).files[storeFileName])
	f.Fuzz(func(t *testing.T, b []byte) {
		fzBoth(b, func(b []byte) {
			s, err := parseStoreFile("STORE", b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error does not match ErrCorrupt: %v", err)
				}
				return
			}
			enc := s.marshal()
			s2, err := parseStoreFile("STORE", enc)
			if err != nil || *s2 != *s {
				t.Fatalf("STORE %x re-encodes to %x, parsing to %+v (%v)", b, enc, s2, err)
			}
		})
	})
}

// FuzzEngineCheckpointFile parses a CHECKPOINT file.
func FuzzEngineCheckpointFile(f *testing.F) {
	s := fzFixture(f)
	f.Add(s.files[checkpointName])
	// And one with an in-flight atom and several runs, from the encoder.
	cp := checkpointFile{gen: 7, replay: walPos{seg: 3, off: 4096}, ledgerGen: 7, storeID: [16]byte{1, 2, 3},
		runs: []checkpointRun{{id: "r", lastSeq: 4, frameSeq: 4, indexedSeq: 4, snapSeq: 2, ckptSeq: 3,
			inflight: []inflightAction{{index: 0, fp: ledger.Fingerprint{9}}, {index: 2, fp: ledger.Fingerprint{8}}}}, {id: "s"}}}
	f.Add(cp.marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		fzBoth(b, func(b []byte) {
			c, err := parseCheckpointFile("CHECKPOINT", b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error does not match ErrCorrupt: %v", err)
				}
				return
			}
			enc := c.marshal()
			c2, err := parseCheckpointFile("CHECKPOINT", enc)
			if err != nil || !reflect.DeepEqual(c, c2) || !bytes.Equal(c2.marshal(), enc) {
				t.Fatalf("CHECKPOINT %x re-encodes to %x, parsing to %+v (%v); first parse %+v", b, enc, c2, err, c)
			}
		})
	})
}

// FuzzEngineFrameFile parses a frame file and decodes the frame it holds.
func FuzzEngineFrameFile(f *testing.F) {
	s := fzFixture(f)
	for _, b := range s.fzFilesWith(framesDir + "/") {
		f.Add(b)
	}
	db, err := fzReplayDB(s)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fzBoth(b, func(b []byte) {
			ff, err := parseFrameFile("x.frame", b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error does not match ErrCorrupt: %v", err)
				}
				return
			}
			enc := ff.marshal()
			ff2, err := parseFrameFile("x.frame", enc)
			if err != nil || !reflect.DeepEqual(ff, ff2) || !bytes.Equal(ff2.marshal(), enc) {
				t.Fatalf("frame file %x re-encodes to %x, parsing to %+v (%v)", b, enc, ff2, err)
			}
			if _, err := db.decodeFrame(ff.frame, "x.frame"); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("frame decoding error does not match ErrCorrupt: %v", err)
			}
		})
	})
}

// FuzzEngineDictFile parses a dictionary file and registers the
// dictionary it holds.
func FuzzEngineDictFile(f *testing.F) {
	for _, b := range fzFixture(f).fzFilesWith(dictsDir + "/") {
		f.Add(b)
	}
	f.Add(marshalDictFile(3, []byte("not a zstd dictionary, a raw one")))
	f.Fuzz(func(t *testing.T, b []byte) {
		fzBoth(b, func(b []byte) {
			id, dict, err := parseDictFile("x.dict", b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error does not match ErrCorrupt: %v", err)
				}
				return
			}
			enc := marshalDictFile(id, dict)
			id2, dict2, err := parseDictFile("x.dict", enc)
			if err != nil || id2 != id || !bytes.Equal(dict2, dict) || !bytes.Equal(marshalDictFile(id2, dict2), enc) {
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
	for _, n := range s.fzNames(walDir + "/") {
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
			if name == storeFileName || strings.HasPrefix(name, dictsDir+"/") {
				fzWrite(t, fs, name, b)
			}
		}
		for i, b := range segs {
			if i == int(which)%len(segs) {
				b = seg
			}
			fzWrite(t, fs, fmt.Sprintf("%s/%016x.wal", walDir, i+1), b)
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
