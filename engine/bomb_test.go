package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
	"github.com/klauspost/compress/s2"
)

// Decompression bombs: records of a few KiB, each a valid record that
// decompresses to tens of MiB, planted in every place a reader
// decompresses. Each tool and the engine runs on them in a child process
// (a fresh heap, a deadline), which reports its peak resident memory; the
// test fails above the documented budget.

const (
	bombBase   = 20        // atoms of run r1 before the bombs
	bombBudget = 256 << 20 // peak resident bytes allowed to any reader
)

var (
	bombOnce sync.Once
	bombFill []byte
)

// bombValue is bombSize bytes that compress to almost nothing.
func bombValue(size int) []byte {
	bombOnce.Do(func() { bombFill = bytes.Repeat([]byte{'A'}, frame.MaxDecompressedSize-4<<10) })
	return bombFill[:size]
}

// craftBaseStore writes a closed store of one run r1 with bombBase atoms
// and returns the chain heads of its atoms.
func craftBaseStore(tb testing.TB, dir string) []chain.Hash {
	tb.Helper()
	ctx := context.Background()
	db, err := Open(dir, &Options{NoSync: true, DictSamples: -1, SnapshotEvery: -1, SnapshotInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	r, err := db.Run(ctx, "r1")
	if err != nil {
		tb.Fatal(err)
	}
	var heads []chain.Hash
	for i := 1; i <= bombBase; i++ {
		a, err := r.Begin(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		if err := a.Commit(ctx, new(frame.Delta).Set("step", []byte(strconv.Itoa(i)))); err != nil {
			tb.Fatal(err)
		}
		heads = append(heads, r.Head())
	}
	if err := db.Close(); err != nil {
		tb.Fatal(err)
	}
	return heads
}

// bombCompressor writes what a hostile writer stores: s2 blocks past
// frame.MaxRatio, which the engine's compressor never writes.
type bombCompressor struct{}

func (bombCompressor) Compress(dst, src []byte, _ uint32) []byte {
	return append(append(dst, byte(frame.CodecS2), 0), s2.Encode(nil, src)...)
}

// craftBombs plants n bombs of kind, each decompressing to size bytes, in
// the closed store in dir.
func craftBombs(tb testing.TB, dir, kind string, n, size int, heads []chain.Hash) {
	tb.Helper()
	comp := bombCompressor{}
	big := bombValue(size)
	fp := func() (f ledger.Fingerprint) { rand.Read(f[:]); return f }
	switch kind {
	case "certificate", "intent", "atom":
		log, err := wal.Open(filepath.Join(dir, layout.WALDir), &wal.Options{FS: vfs.Default, NoSync: true})
		if err != nil {
			tb.Fatal(err)
		}
		for i := 0; i < n; i++ {
			var rec []byte
			switch kind {
			case "certificate":
				c := &ledger.Certificate{Fingerprint: fp(), RunID: "r1", Seq: bombBase + 1, Index: uint32(i),
					Status: ledger.StatusDone, Result: big}
				rec = comp.Compress([]byte{byte(record.KindCert)}, ledger.AppendCertificate(nil, c), 0)
			case "intent":
				in := &ledger.Intent{Fingerprint: fp(), RunID: "r1", Seq: bombBase + 1, Index: uint32(i),
					Tool: "bomb", Args: big, Key: "k" + strconv.Itoa(i)}
				rec = comp.Compress([]byte{byte(record.KindIntent)}, ledger.AppendIntent(nil, in), 0)
			case "atom":
				// Atoms past the chain's end, each setting one key: the
				// frame they make stays one value big.
				d := frame.AppendDelta(nil, new(frame.Delta).Set("bomb", big))
				rec = record.AppendAtomHeader(nil, "r1", uint64(bombBase+1+i), chain.Hash{})
				rec = comp.Compress(rec, record.AppendAtomBody(nil, nil, d), 0)
			}
			if _, err := log.Append(context.Background(), rec); err != nil {
				tb.Fatal(err)
			}
		}
		if err := log.Close(); err != nil {
			tb.Fatal(err)
		}
	case "frame":
		// The frame file of r1 at its last atom, its head right, its frame
		// one big value.
		f := &frame.Frame{Memory: map[string][]byte{"bomb": big}}
		ff := &layout.FrameFile{Run: "r1", Seq: bombBase, Head: heads[bombBase-1], Frame: comp.Compress(nil, frame.AppendFrame(nil, f), 0)}
		name := filepath.Join(dir, layout.FramesDir, layout.FrameFileBase("r1"))
		if err := os.WriteFile(name, ff.Marshal(), 0o600); err != nil {
			tb.Fatal(err)
		}
	case "snapshot":
		s, err := snapshot.Open(filepath.Join(dir, layout.SnapshotsDir), nil)
		if err != nil {
			tb.Fatal(err)
		}
		b := s.NewBatch()
		for i := 0; i < n && i < bombBase; i++ {
			f := &frame.Frame{Memory: map[string][]byte{"bomb": big}}
			err := b.PutSnapshot(&snapshot.Snapshot{RunID: "r1", Seq: uint64(i + 1), Head: heads[i],
				Frame: comp.Compress(nil, frame.AppendFrame(nil, f), 0), Created: time.Now()})
			if err != nil {
				tb.Fatal(err)
			}
		}
		if err := b.Commit(false); err != nil {
			tb.Fatal(err)
		}
		if err := s.Close(); err != nil {
			tb.Fatal(err)
		}
	case "ledger-table":
		// A table whose header declares 2^40 entries (checksum fixed up).
		names, _ := filepath.Glob(filepath.Join(dir, "ledger-*.tbl"))
		if len(names) == 0 {
			tb.Fatal("the store has no ledger table")
		}
		b, err := os.ReadFile(names[0])
		if err != nil {
			tb.Fatal(err)
		}
		binary.LittleEndian.PutUint64(b[8:], 1<<40)
		binary.LittleEndian.PutUint32(b[20:], crc32.Checksum(b[:20], crc32.MakeTable(crc32.Castagnoli)))
		if err := os.WriteFile(names[0], b, 0o600); err != nil {
			tb.Fatal(err)
		}
	default:
		tb.Fatalf("unknown bomb kind %q", kind)
	}
}

// bombChildEnv names the reader a child process runs and the store: the
// test binary re-executed runs TestBombChild only.
const bombChildEnv = "CONTINUUM_BOMB_CHILD"

// TestBombChild is the child's side: it runs one reader on the store and
// prints its peak resident memory. It is skipped unless re-executed.
func TestBombChild(t *testing.T) {
	spec := os.Getenv(bombChildEnv)
	if spec == "" {
		t.Skip("runs only as the child of TestDecompressionBombs")
	}
	op, dir, _ := strings.Cut(spec, ":")
	err := bombReader(op, dir)
	fmt.Printf("bomb-result op=%s peak_rss=%d err=%q\n", op, peakRSS(t), fmt.Sprint(err))
}

// bombReader does what a tool or the engine does with a store: verify;
// inspect and export (every atom decoded, the last state rebuilt); open
// the engine and work on the run.
func bombReader(op, dir string) error {
	ctx := context.Background()
	switch op {
	case "verify":
		rep, err := Verify(ctx, dir, &VerifyOptions{Deep: true})
		if err != nil {
			return err
		}
		if !rep.OK {
			return errors.New(rep.Failures[0].String())
		}
		return nil
	case "inspect":
		in, err := Inspect(ctx, dir, nil)
		if err != nil {
			return err
		}
		defer in.Close()
		for _, r := range in.Runs() {
			for seq := uint64(1); seq <= r.LastSeq; seq++ {
				if _, err := in.Atom(ctx, r.ID, seq); err != nil {
					return err
				}
			}
			if _, err := in.StateAt(ctx, r.ID, r.LastSeq); err != nil {
				return err
			}
		}
		return nil
	case "open":
		db, err := Open(dir, &Options{NoSync: true})
		if err != nil {
			return err
		}
		r, err := db.Run(ctx, "r1")
		if err == nil {
			_ = r.State()
			_, err = r.StateAt(ctx, 5)
		}
		if err == nil {
			var a *Atom
			if a, err = r.Begin(ctx); err == nil {
				_, err = a.Do(ctx, ledger.Action{Tool: "t", Args: []byte(`{}`), Key: "after"},
					func(context.Context, string) ([]byte, error) { return []byte(`1`), nil })
				if err == nil {
					err = a.Commit(ctx, new(frame.Delta).Set("after", []byte("1")))
				}
			}
		}
		return errors.Join(err, db.Close())
	}
	return fmt.Errorf("unknown reader %q", op)
}

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	t.Skip("no VmHWM in /proc/self/status")
	return 0
}

// runBombChild runs reader op on dir in a child process with a deadline
// and returns its peak resident memory and the reader's error text.
func runBombChild(t *testing.T, op, dir string, deadline time.Duration) (int64, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBombChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), bombChildEnv+"="+op+":"+dir, "GOMEMLIMIT=128MiB")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within %v on the bombed store", op, deadline)
	}
	if err != nil {
		t.Fatalf("%s: child failed: %v\n%s", op, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "bomb-result "); ok {
			var gotOp, errText string
			var rss int64
			if _, err := fmt.Sscanf(rest, "op=%s peak_rss=%d err=%q", &gotOp, &rss, &errText); err != nil {
				t.Fatalf("%s: bad child report %q: %v", op, line, err)
			}
			return rss, errText
		}
	}
	t.Fatalf("%s: the child printed no result:\n%s", op, out)
	return 0, ""
}

// TestDecompressionBombs plants bombs in each record kind of the log, in a
// frame file, in snapshots and in the ledger table, and runs verify,
// inspect (with export's reads) and the engine on each store in a child
// process: each must finish within its deadline and stay under bombBudget
// of resident memory. Without the budget and the bounded summaries, the 40
// certificates alone made inspect hold 2.4 GB.
func TestDecompressionBombs(t *testing.T) {
	if !long() || testing.Short() {
		t.Skip("decompresses some GiB in child processes: a long suite (-long, or CONTINUUM_LONG=1)")
	}
	cases := []struct {
		kind string
		n    int
		size int
	}{
		{"certificate", 40, 60 << 20},
		{"intent", 40, 60 << 20},
		{"atom", 40, 60 << 20},
		{"frame", 1, 60 << 20},
		{"snapshot", bombBase, 60 << 20},
		{"ledger-table", 1, 0},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			heads := craftBaseStore(t, dir)
			if c.kind == "ledger-table" {
				// A table is written by a checkpoint once the ledger has
				// entries: one action, then a clean close.
				addAction(t, dir)
			}
			craftBombs(t, dir, c.kind, c.n, c.size, heads)
			for _, op := range []string{"verify", "inspect", "open"} {
				start := time.Now()
				rss, errText := runBombChild(t, op, dir, 2*time.Minute)
				t.Logf("%s on %d %s bombs of %d MiB: peak RSS %d MiB in %v; %s", op, c.n, c.kind, c.size>>20,
					rss>>20, time.Since(start).Round(time.Millisecond), errText)
				if rss > bombBudget {
					t.Errorf("%s: peak resident memory %d MiB, above the budget of %d MiB", op, rss>>20, bombBudget>>20)
				}
			}
		})
	}
}

// addAction opens the store, certifies one action in a new atom of r1, and
// closes it (which writes the ledger table).
func addAction(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	db, err := Open(dir, &Options{NoSync: true, DictSamples: -1, SnapshotEvery: -1, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := db.Run(ctx, "r1")
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Do(ctx, ledger.Action{Tool: "t", Args: []byte(`{}`), Key: "k"},
		func(context.Context, string) ([]byte, error) { return []byte(`1`), nil }); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("1"))); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCraftBombStore writes the store of the measurement in
// bench/RESULTS-crash.md (reading an untrusted store) (20 atoms, then 300 certificates of 63 MB
// each) to $CONTINUUM_CRAFT_BOMB; it is skipped without it.
func TestCraftBombStore(t *testing.T) {
	dir := os.Getenv("CONTINUUM_CRAFT_BOMB")
	if dir == "" {
		t.Skip("set CONTINUUM_CRAFT_BOMB=DIR to write the bombed store")
	}
	heads := craftBaseStore(t, dir)
	craftBombs(t, dir, "certificate", 300, 63<<20, heads)
}
