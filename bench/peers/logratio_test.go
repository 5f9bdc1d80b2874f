package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
	"github.com/klauspost/compress/zstd"
)

var (
	logRatio      = flag.Bool("logratio", false, "run TestLogRatio: the agent workload's log against zstd with the same dictionary, and the store's bytes after a reopen")
	logRatioRuns  = flag.Int("logratio-runs", 16, "TestLogRatio: runs")
	logRatioAtoms = flag.Int("logratio-atoms", 500, "TestLogRatio: atoms per run")
)

// TestLogRatio writes the agent workload (the peers' continuum store:
// strict, R runs of A atoms) and measures, after Close and a reopen:
//
//   - the store's bytes on disk, by top-level entry, against the log's own
//     bytes (its records' spans, not the segments' preallocated room);
//
//   - the log's compressed record bodies (intents, certificates, atom
//     bodies: codec byte, dictionary id, payload) against the same bodies
//     compressed by zstd, each alone as the log does, with the store's own
//     trained dictionary, at its fastest, default and best levels, and
//     the CPU each takes per record.
//
//     go test -run TestLogRatio -logratio -v .
func TestLogRatio(t *testing.T) {
	if !*logRatio {
		t.Skip("a measurement: -logratio")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "s")
	s, err := openContinuum(engine.Strict)(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	cs := s.(*continuumStore)
	runs, atoms := *logRatioRuns, *logRatioAtoms
	for seq := 1; seq <= atoms; seq++ {
		for r := range runs {
			a := workload.Script(fmt.Sprintf("run-%03d", r), uint64(seq), 1)
			if err := cs.Atom(ctx, &Step{Atom: a}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	// The reopen of the requirement: open, read every run's state, close.
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for r := range runs {
		run, err := db.Run(ctx, fmt.Sprintf("run-%03d", r))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.StateE(); err != nil {
			t.Fatal(err)
		}
	}
	// StateAt's latency at two seqs of every run, after a first call
	// (Pebble opened, positions read): the derived state it starts from.
	var stateAt []time.Duration
	for r := range runs {
		run, err := db.Run(ctx, fmt.Sprintf("run-%03d", r))
		if err != nil {
			t.Fatal(err)
		}
		for _, seq := range []uint64{uint64(atoms) / 2, uint64(atoms) * 5 / 6} {
			if _, err := run.StateAt(ctx, seq); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			if _, err := run.StateAt(ctx, seq); err != nil {
				t.Fatal(err)
			}
			stateAt = append(stateAt, time.Since(t0))
		}
	}
	slices.Sort(stateAt)
	t.Logf("StateAt at seqs %d and %d of each run, after a first call: median %v, max %v", atoms/2, atoms*5/6, stateAt[len(stateAt)/2], stateAt[len(stateAt)-1])
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// The store's files by top-level entry.
	sizes := map[string]int64{}
	var total int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		top := strings.SplitN(rel, string(filepath.Separator), 2)[0]
		sizes[top] += fi.Size()
		total += fi.Size()
		return nil
	})

	// The log's records.
	dicts := frame.NewDicts()
	newest, err := layout.LoadDicts(vfs.Default, dir, dicts)
	if err != nil {
		t.Fatal(err)
	}
	dict, ok := dicts.Get(newest)
	if newest == 0 || !ok {
		t.Fatal("the store trained no dictionary")
	}
	comp := frame.NewCompressor(dicts)
	l, err := wal.Open(filepath.Join(dir, layout.WALDir), &wal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rd, err := l.NewReader(wal.Pos{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	dec := record.Decoder{}
	type body struct{ stored, plain []byte }
	var bodies []body
	var logBytes, recBytes int64
	kinds := map[record.Kind]int{}
	for rd.Next() {
		raw := rd.Record()
		logBytes += (wal.RecordHeaderSize + int64(len(raw)) + wal.RecordAlign - 1) &^ (wal.RecordAlign - 1) // its span in the segment
		recBytes += int64(len(raw))
		var r record.Record
		if err := dec.Decode(raw, rd.Pos(), "log", &r); err != nil {
			t.Fatal(err)
		}
		kinds[r.Kind]++
		var stored []byte
		switch r.Kind {
		case record.KindAtom:
			stored = r.Body
		case record.KindIntent, record.KindCert:
			stored = raw[1:]
		default:
			continue
		}
		if c, id, err := frame.PeekCodec(stored); err != nil || id != newest && c != frame.CodecNone {
			continue // compressed before the dictionary was trained
		}
		plain, err := comp.Decompress(nil, stored)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, body{append([]byte(nil), stored...), plain})
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	var plainN, storedN int64
	for _, b := range bodies {
		plainN += int64(len(b.plain))
		storedN += int64(len(b.stored))
	}
	t.Logf("%d runs x %d atoms; %d records (%v), %d bodies compressed with dictionary %d (%d bytes)", runs, atoms, kinds[record.KindAtom]+kinds[record.KindIntent]+kinds[record.KindCert], kinds, len(bodies), newest, len(dict))
	t.Logf("store after reopen: %d bytes, %.0f per atom; the log's records %d bytes (%d with their framing), %.0f per atom: store / log = %.2fx",
		total, float64(total)/float64(runs*atoms), recBytes, logBytes, float64(logBytes)/float64(runs*atoms), float64(total)/float64(logBytes))
	var names []string
	for k := range sizes {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		t.Logf("  %-12s %10d bytes  %7.0f per atom", k, sizes[k], float64(sizes[k])/float64(runs*atoms))
	}
	breakdown(t, dir, comp, newest, runs*atoms)
	t.Logf("bodies: %d bytes plain, %d stored (%.2fx)", plainN, storedN, float64(plainN)/float64(storedN))
	for _, lv := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression, zstd.SpeedBestCompression} {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(lv), zstd.WithEncoderDict(dict), zstd.WithEncoderCRC(false),
			zstd.WithSingleSegment(true), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		buf := make([]byte, 0, 1<<16)
		c0 := cpuNow()
		for _, b := range bodies {
			// The same envelope as the log's: codec byte, dictionary id.
			buf = enc.EncodeAll(b.plain, buf[:0])
			n += int64(len(buf)) + 2
		}
		cpu := cpuNow() - c0
		t.Logf("zstd %-8s with the dictionary: %d bytes (%.2fx); the log's bodies are %.3fx these; %.1f µs CPU per body",
			lv, n, float64(plainN)/float64(n), float64(storedN)/float64(n), float64(cpu.Microseconds())/float64(len(bodies)))
	}
	c0 := cpuNow()
	var n int64
	buf := make([]byte, 0, 1<<16)
	for _, b := range bodies {
		buf = comp.Compress(buf[:0], b.plain, newest)
		n += int64(len(buf))
	}
	t.Logf("the log's codec again: %d bytes, %.1f µs CPU per body", n, float64((cpuNow()-c0).Microseconds())/float64(len(bodies)))
}

// breakdown logs where the store's derived bytes go: the frame files
// (stored, raw, and what the raw frames take with the store's dictionary
// under s2 and zstd), the snapshot store's files by kind and its live keys
// by keyspace (snapshots per run, chunks, atom positions, metadata), and
// the ledger table's entries.
func breakdown(t *testing.T, dir string, comp *frame.Compressor, dictID uint32, atoms int) {
	per := func(n int64) float64 { return float64(n) / float64(atoms) }
	// frames/
	ents, _ := filepath.Glob(filepath.Join(dir, layout.FramesDir, "*"))
	var stored, raw, s2d, zd, zb int64
	var dec [2]time.Duration
	zbest, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ents {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		ff, err := layout.ParseFrameFile(p, b)
		if err != nil {
			t.Logf("  frames: %s: %v", filepath.Base(p), err)
			continue
		}
		plain, err := comp.Decompress(nil, ff.Frame)
		if err != nil {
			t.Fatal(err)
		}
		stored += int64(len(b))
		raw += int64(len(plain))
		s2b := comp.CompressWith(nil, plain, frame.CodecS2, dictID)
		zdb := comp.CompressWith(nil, plain, frame.CodecZstd, dictID)
		s2d += int64(len(s2b))
		zd += int64(len(zdb))
		zb += int64(len(zbest.EncodeAll(plain, nil)))
		// What a restart pays to decompress it, each way (best of 5).
		for i, c := range [][]byte{ff.Frame, zdb} {
			best := time.Duration(1 << 62)
			for range 5 {
				t0 := time.Now()
				if _, err := comp.Decompress(nil, c); err != nil {
					t.Fatal(err)
				}
				best = min(best, time.Since(t0))
			}
			dec[i] += best
		}
	}
	t.Logf("frames/: %d files, %d bytes (%.0f per atom); raw frames %d (%.0f per atom); the raw frames with the dictionary: s2 %d (%.0f), zstd %d (%.0f); zstd best without: %d (%.0f)",
		len(ents), stored, per(stored), raw, per(raw), s2d, per(s2d), zd, per(zd), zb, per(zb))
	if len(ents) > 0 {
		t.Logf("frames/: decompressing one takes %v as stored, %v in zstd with the dictionary (mean of the files, best of 5 each)", dec[0]/time.Duration(len(ents)), dec[1]/time.Duration(len(ents)))
	}
	// snapshots/: files by kind.
	sdir := filepath.Join(dir, layout.SnapshotsDir)
	kinds := map[string]int64{}
	files, _ := os.ReadDir(sdir)
	for _, f := range files {
		fi, err := f.Info()
		if err != nil || f.IsDir() {
			continue
		}
		k := filepath.Ext(f.Name())
		if i := strings.IndexByte(f.Name(), '-'); k == "" && i > 0 {
			k = f.Name()[:i]
		}
		kinds[k] += fi.Size()
	}
	t.Logf("snapshots/ files by kind: %v", kinds)
	db, err := pebble.Open(sdir, &pebble.Options{ReadOnly: true})
	if err != nil {
		t.Logf("snapshots/: %v", err)
	} else {
		defer db.Close()
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		type space struct{ n, key, val int64 }
		spaces := map[byte]*space{}
		perRun := map[string][]uint64{}
		for it.First(); it.Valid(); it.Next() {
			k := it.Key()
			sp := spaces[k[0]]
			if sp == nil {
				sp = &space{}
				spaces[k[0]] = sp
			}
			sp.n++
			sp.key += int64(len(k))
			sp.val += int64(len(it.Value()))
			if k[0] == 's' && len(k) > 9 {
				perRun[string(k[1:len(k)-8])] = append(perRun[string(k[1:len(k)-8])], binary.BigEndian.Uint64(k[len(k)-8:]))
			}
		}
		it.Close()
		for _, c := range []byte{'s', 'c', 'p', 'm', 0} {
			if sp := spaces[c]; sp != nil {
				t.Logf("  snapshots/ keyspace %q: %d keys, %d key bytes, %d value bytes (%.0f per atom)", c, sp.n, sp.key, sp.val, per(sp.key+sp.val))
			}
		}
		n := 0
		for r, seqs := range perRun {
			if n++; n <= 3 {
				t.Logf("  snapshots of run %q: %v", r[1:], seqs)
			}
		}
	}
	// ledger-*.tbl
	tbls, _ := filepath.Glob(filepath.Join(dir, "ledger-*.tbl"))
	for _, p := range tbls {
		fi, err := os.Stat(p)
		if err == nil {
			t.Logf("%s: %d bytes, %d entries of 72 bytes", filepath.Base(p), fi.Size(), (fi.Size()-48)/72)
		}
	}
}

// cpuNow is the process's user and system CPU time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
