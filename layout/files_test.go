package layout

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
)

// testDict is dictionary id's content: raw, long enough for frame.Dicts.
func testDict(id uint32) []byte {
	return fmt.Appendf(nil, "dictionary number %d of the test store", id)
}

// putFile writes b to name on fs, creating its directory.
func putFile(t *testing.T, fs vfs.FS, name string, b []byte) {
	t.Helper()
	if err := fs.MkdirAll(fs.PathDir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(fs, name, b, false); err != nil {
		t.Fatal(err)
	}
}

func TestLoadDicts(t *testing.T) {
	const dir = "db"
	dictPath := func(name string) string { return dir + "/" + DictsDir + "/" + name }

	t.Run("none", func(t *testing.T) {
		dicts := frame.NewDicts()
		newest, err := LoadDicts(vfs.NewMem(), dir, dicts)
		if err != nil || newest != 0 || len(dicts.IDs()) != 0 {
			t.Fatalf("a store without dicts/: newest %d, %v, ids %v", newest, err, dicts.IDs())
		}
	})
	t.Run("all", func(t *testing.T) {
		fs := vfs.NewMem()
		for id := uint32(1); id <= 3; id++ {
			putFile(t, fs, dictPath(DictFileName(id)), MarshalDict(id, testDict(id)))
		}
		// A temporary file of an interrupted write is not read, even if
		// it holds garbage.
		putFile(t, fs, dictPath(DictFileName(4)+".tmp"), []byte("torn"))
		dicts := frame.NewDicts()
		newest, err := LoadDicts(fs, dir, dicts)
		if err != nil || newest != 3 {
			t.Fatalf("newest %d, %v; want 3", newest, err)
		}
		if ids := dicts.IDs(); !slices.Equal(ids, []uint32{1, 2, 3}) {
			t.Fatalf("registered %v", ids)
		}
		for id := uint32(1); id <= 3; id++ {
			if d, ok := dicts.Get(id); !ok || !bytes.Equal(d, testDict(id)) {
				t.Fatalf("dictionary %d registered as %q", id, d)
			}
		}
	})

	for _, c := range []struct {
		name  string
		files map[string][]byte // under dicts/
		file  string            // the file the refusal names
		why   string
	}{{
		name:  "under another id's name",
		files: map[string][]byte{DictFileName(1): MarshalDict(1, testDict(1)), DictFileName(2): MarshalDict(3, testDict(3))},
		file:  dictPath(DictFileName(2)),
		why:   "holds dictionary 3 under another name",
	}, {
		name:  "under a name that is no id",
		files: map[string][]byte{"first.dict": MarshalDict(1, testDict(1))},
		file:  dictPath("first.dict"),
		why:   "holds dictionary 1 under another name",
	}, {
		name:  "under another spelling of its id",
		files: map[string][]byte{"1.dict": MarshalDict(1, testDict(1))},
		file:  dictPath("1.dict"),
		why:   "holds dictionary 1 under another name",
	}, {
		name:  "a gap in the ids",
		files: map[string][]byte{DictFileName(1): MarshalDict(1, testDict(1)), DictFileName(3): MarshalDict(3, testDict(3))},
		file:  dictPath(DictFileName(2)),
		why:   "missing, but dictionary 3 exists",
	}, {
		name:  "the first one missing",
		files: map[string][]byte{DictFileName(2): MarshalDict(2, testDict(2))},
		file:  dictPath(DictFileName(1)),
		why:   "missing, but dictionary 2 exists",
	}, {
		name:  "a damaged file",
		files: map[string][]byte{DictFileName(1): MarshalDict(1, testDict(1))[:20]},
		file:  dictPath(DictFileName(1)),
		why:   "checksum mismatch",
	}, {
		name:  "a dictionary the compressor refuses",
		files: map[string][]byte{DictFileName(1): MarshalDict(1, []byte("short"))},
		file:  dictPath(DictFileName(1)),
		why:   "shorter than",
	}} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			for name, b := range c.files {
				putFile(t, fs, dictPath(name), b)
			}
			newest, err := LoadDicts(fs, dir, frame.NewDicts())
			if newest != 0 {
				t.Fatalf("refusal returned newest %d", newest)
			}
			wantCorrupt(t, err, c.file, c.why)
		})
	}
}

// testLog opens a log in db/wal of segments of wal.MinSegmentSize, filled
// with n records of 1000 bytes.
func testLog(t *testing.T, fs vfs.FS, n int) *wal.Log {
	t.Helper()
	l, err := wal.Open("db/"+WALDir, &wal.Options{FS: fs, SegmentSize: wal.MinSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for range n {
		if _, err := l.Append(context.Background(), make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func TestCheckLog(t *testing.T) {
	const dir = "db"
	seg := func(id uint64) string { return dir + "/" + WALDir + "/" + wal.SegmentName(id) }

	fs := vfs.NewMem()
	l := testLog(t, fs, 12) // segments 1 to 4
	end := l.End()
	if segs := l.Segments(); len(segs) != 4 || segs[0].ID != 1 || end.Segment != 4 {
		t.Fatalf("test log: segments %+v, end %v", segs, end)
	}
	for _, cp := range []*Checkpoint{nil, {Replay: wal.Pos{Segment: 1, Offset: wal.SegmentHeaderSize}}, {Replay: end}} {
		if err := CheckLog(fs, dir, l, cp, nil); err != nil {
			t.Fatalf("checkpoint %+v: %v", cp, err)
		}
	}
	for _, c := range []struct {
		name string
		at   wal.Pos
		file string
		why  string
	}{
		{"a segment beyond the log's end", wal.Pos{Segment: 5, Offset: wal.SegmentHeaderSize}, seg(5), "missing: the log ends at " + end.String()},
		{"two segments beyond", wal.Pos{Segment: 6, Offset: 100}, seg(5), "(generation 9) replays from 6:100"},
		{"an offset beyond the log's end", wal.Pos{Segment: 4, Offset: end.Offset + 8}, seg(4), fmt.Sprintf("ends at offset %d, but db/CHECKPOINT (generation 9) replays from offset %d", end.Offset, end.Offset+8)},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantCorrupt(t, CheckLog(fs, dir, l, &Checkpoint{Gen: 9, Replay: c.at}, nil), c.file, c.why)
		})
	}

	t.Run("no log", func(t *testing.T) {
		wantCorrupt(t, CheckLog(fs, dir, nil, nil, nil), dir+"/"+WALDir, "missing: the log is gone, but db/STORE says a store was here")
	})
	t.Run("no segment", func(t *testing.T) {
		fs := vfs.NewMem()
		if err := fs.MkdirAll(dir+"/"+WALDir, 0o755); err != nil {
			t.Fatal(err)
		}
		l, err := wal.Open(dir+"/"+WALDir, &wal.Options{FS: fs, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		wantCorrupt(t, CheckLog(fs, dir, l, nil, nil), dir+"/"+WALDir, "holds no log segment")
	})
	t.Run("first segment not 1", func(t *testing.T) {
		fs := vfs.NewMem()
		l := testLog(t, fs, 12)
		if n, err := l.RemoveBelow(wal.Pos{Segment: 3}); err != nil || n != 2 {
			t.Fatalf("removed %d segments, %v", n, err)
		}
		wantCorrupt(t, CheckLog(fs, dir, l, nil, nil), seg(1), "missing: the log starts at segment 3, and no db/RETENTION says")
		// RETENTION explains a log that starts at or below its floor.
		for _, floor := range []uint64{3, 4} {
			if err := CheckLog(fs, dir, l, nil, &Retention{Floor: floor}); err != nil {
				t.Fatalf("floor %d: %v", floor, err)
			}
		}
		wantCorrupt(t, CheckLog(fs, dir, l, nil, &Retention{Floor: 2}), seg(2),
			"missing: the log starts at segment 3, but db/RETENTION says garbage collection kept every segment from 2")
	})
}

func TestCheckLedgerTable(t *testing.T) {
	l := ledger.New()
	l.ApplyIntent(&ledger.Intent{Fingerprint: ledger.Fingerprint{1}}, wal.Pos{Segment: 1, Offset: 40})
	at := wal.Pos{Segment: 3, Offset: 4096}
	v1 := l.AppendTable(nil)
	v2 := l.CheckpointAt(nil, func() ledger.TableOrigin { return ledger.TableOrigin{Gen: 7, Pos: at} })

	if why := CheckLedgerTable(v2, 7, at); why != "" {
		t.Fatalf("the table of checkpoint 7 at %v refused: %s", at, why)
	}
	// A version 1 table names no origin: taken on its checksums alone.
	if why := CheckLedgerTable(v1, 7, at); why != "" {
		t.Fatalf("a version 1 table refused: %s", why)
	}
	for _, c := range []struct {
		name string
		b    []byte
		gen  uint64
		at   wal.Pos
		why  string
	}{
		{"another generation's", v2, 8, at, "it was written by checkpoint 7 at 3:4096, CHECKPOINT is 8 at 3:4096"},
		{"another position's", v2, 7, wal.Pos{Segment: 3, Offset: 4104}, "it was written by checkpoint 7 at 3:4096, CHECKPOINT is 7 at 3:4104"},
		{"empty", nil, 7, at, "truncated"},
		{"not a table", []byte("not a ledger table, some other file"), 7, at, "magic"},
		{"a header flipped", func() []byte { b := bytes.Clone(v2); b[12] ^= 1; return b }(), 7, at, "checksum"},
	} {
		t.Run(c.name, func(t *testing.T) {
			why := CheckLedgerTable(c.b, c.gen, c.at)
			if !strings.Contains(why, c.why) {
				t.Fatalf("reason %q, want one saying %q", why, c.why)
			}
		})
	}
}

// crashFS calls at after every change it makes to the filesystem (and
// every sync), so that a test can crash there.
type crashFS struct {
	vfs.FS
	at func(op string)
}

func (c *crashFS) Unwrap() vfs.FS { return c.FS }

func (c *crashFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.Create(name, cat)
	c.at("create " + name)
	if err != nil {
		return nil, err
	}
	return &crashFile{File: f, fs: c, name: name}, nil
}

func (c *crashFS) Rename(from, to string) error {
	err := c.FS.Rename(from, to)
	c.at("rename " + from)
	return err
}

func (c *crashFS) Remove(name string) error {
	err := c.FS.Remove(name)
	c.at("remove " + name)
	return err
}

func (c *crashFS) OpenDir(name string) (vfs.File, error) {
	f, err := c.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &crashFile{File: f, fs: c, name: name}, nil
}

type crashFile struct {
	vfs.File
	fs   *crashFS
	name string
}

func (f *crashFile) Write(p []byte) (int, error) {
	// Two halves, so that a crash can fall between them.
	h := len(p) / 2
	n, err := f.File.Write(p[:h])
	f.fs.at("write half of " + f.name)
	if err != nil {
		return n, err
	}
	m, err := f.File.Write(p[h:])
	f.fs.at("write " + f.name)
	return n + m, err
}

func (f *crashFile) Sync() error {
	err := f.File.Sync()
	f.fs.at("sync " + f.name)
	return err
}

func (f *crashFile) Close() error {
	err := f.File.Close()
	f.fs.at("close " + f.name)
	return err
}

// TestWriteFileAtomicCrash crashes WriteFileAtomic after each of its steps,
// each time keeping a different share of what was not synced: the file
// then holds its old content or its new one, never a mix and never nothing
// when it existed. Once WriteFileAtomic returns, the new content survives
// any crash. WriteFileRenamed, which leaves the directory unsynced, keeps
// the first promise; after SyncDir, the second.
func TestWriteFileAtomicCrash(t *testing.T) {
	const name = "db/CHECKPOINT"
	rng := rand.New(rand.NewPCG(13, 4))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	// Written from copies: under the race detector, pebble's MemFS
	// scribbles over what it was given to write.
	oldContent, newContent := random(5000), random(9000)
	for _, c := range []struct {
		name    string
		old     bool
		renamed bool // WriteFileRenamed, then SyncDir
	}{
		{"replacing", true, false},
		{"creating", false, false},
		{"replacing, renamed then synced", true, true},
		{"creating, renamed then synced", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			if err := mem.MkdirAll("db", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := SyncDir(mem, mem.PathDir("db")); err != nil {
				t.Fatal(err)
			}
			if c.old {
				if err := WriteFileAtomic(mem, name, bytes.Clone(oldContent), false); err != nil {
					t.Fatal(err)
				}
			}
			// check crashes now, keeping pct% of what was not synced, and
			// reads the file: old or new content (or none if there was
			// none), never anything else; with mustBeNew, new content.
			points := 0
			check := func(op string, mustBeNew bool) {
				points++
				for _, pct := range []int{0, 25, 50, 75, 100} {
					for seed := range uint64(3) {
						crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(seed, uint64(pct)))})
						got, err := ReadFile(crashed, name)
						switch {
						case NotExist(err) && !c.old && !mustBeNew:
						case err != nil:
							t.Fatalf("crash after %s (%d%% of unsynced kept): %v", op, pct, err)
						case bytes.Equal(got, newContent):
						case bytes.Equal(got, oldContent) && !mustBeNew:
						default:
							t.Fatalf("crash after %s (%d%% of unsynced kept): the file holds %d bytes, neither the old %d nor the new %d",
								op, pct, len(got), len(oldContent), len(newContent))
						}
						names, err := crashed.List("db")
						if err != nil {
							t.Fatal(err)
						}
						for _, n := range names {
							if n != "CHECKPOINT" && !IsTempName(n) {
								t.Fatalf("crash after %s: a stray file %q", op, n)
							}
						}
					}
				}
			}
			fs := &crashFS{FS: mem, at: func(op string) { check(op, false) }}
			check("nothing", false)
			if c.renamed {
				if err := WriteFileRenamed(fs, name, bytes.Clone(newContent), false); err != nil {
					t.Fatal(err)
				}
				check("WriteFileRenamed returned", false)
				if err := SyncDir(fs, "db"); err != nil {
					t.Fatal(err)
				}
			} else if err := WriteFileAtomic(fs, name, bytes.Clone(newContent), false); err != nil {
				t.Fatal(err)
			}
			check("it returned", true)
			if points < 8 {
				t.Fatalf("only %d crash points: the filesystem wrapper missed the steps", points)
			}
			if got, err := ReadFile(mem, name); err != nil || !bytes.Equal(got, newContent) {
				t.Fatalf("after the write: %d bytes, %v", len(got), err)
			}
		})
	}
}

// TestWriteFileAtomicFailure: a write that fails leaves the old file and
// removes its temporary file (it holds the space the next attempt needs).
func TestWriteFileAtomicFailure(t *testing.T) {
	const name = "db/STORE"
	mem := vfs.NewMem()
	putFile(t, mem, name, []byte("old"))
	for _, step := range []string{"create", "write", "sync", "close", "rename"} {
		t.Run(step, func(t *testing.T) {
			err := WriteFileAtomic(failingFS{FS: mem, step: step}, name, []byte("new content"), false)
			if err == nil || !strings.Contains(err.Error(), errInjected.Error()) || !strings.Contains(err.Error(), name) {
				t.Fatalf("error %v: want the injected failure, naming %s", err, name)
			}
			if got, err := ReadFile(mem, name); err != nil || string(got) != "old" {
				t.Fatalf("after a failed %s: %q, %v", step, got, err)
			}
			if names, _ := mem.List("db"); !slices.Equal(names, []string{"STORE"}) {
				t.Fatalf("after a failed %s the directory holds %v", step, names)
			}
		})
	}
}

var errInjected = fmt.Errorf("injected failure")

// failingFS fails one step of a file's writing.
type failingFS struct {
	vfs.FS
	step string
}

func (f failingFS) Unwrap() vfs.FS { return f.FS }

func (f failingFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	if f.step == "create" {
		return nil, errInjected
	}
	file, err := f.FS.Create(name, cat)
	if err != nil {
		return nil, err
	}
	return failingFile{File: file, step: f.step}, nil
}

func (f failingFS) Rename(from, to string) error {
	if f.step == "rename" {
		return errInjected
	}
	return f.FS.Rename(from, to)
}

type failingFile struct {
	vfs.File
	step string
}

func (f failingFile) Write(p []byte) (int, error) {
	if f.step == "write" {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, errInjected
	}
	return f.File.Write(p)
}

func (f failingFile) Sync() error {
	if f.step == "sync" {
		return errInjected
	}
	return f.File.Sync()
}

func (f failingFile) Close() error {
	err := f.File.Close()
	if f.step == "close" {
		return errInjected
	}
	return err
}
