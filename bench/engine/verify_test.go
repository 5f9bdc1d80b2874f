package enginebench

// Verify of a whole store on one core (issue 16, goal 8: >= 1M records/s):
//
//	go test -run '^$' -bench VerifyStore -benchtime 5x -count 5 ./bench/engine
//
// The store holds the agent workload (internal/workload: each atom one Do
// of ~200 B args and ~300 B result, one ~500 B delta) of 40 runs of 2,000 atoms, written
// with fsync off. Each iteration verifies it with GOMAXPROCS=1, as
// `continuumctl verify` does (engine.Verify, not Deep), and reports log
// records per second of wall time and CPU time per record (every record
// of the log, chained or not: intents and certificates too). The baseline,
// read-log, is the same process reading every record of the log through
// the record cursor (framing CRC, decompression, decoding) and nothing
// else: what verify costs beyond reading. floor is the work no verify of
// this format can skip, on the same records held in memory: the checksum
// of each record, the decompression of each compressed part (intents,
// certificates, atom bodies) and BLAKE3 of each atom's chained payload
// and each certified result, with the libraries the store was written
// with; nothing else (no decoding, no checks, no I/O).
//
// Building the store takes longer than verifying it. To compare two
// builds of verify on one store, alternately, give both the same
// directory: the first run builds it there, the others reuse it.
//
//	go test -c -o verify.test ./bench/engine
//	./verify.test -test.run '^$' -test.bench VerifyStore -test.benchtime 5x -verifystore /tmp/vstore

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/crc32c"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
	"github.com/zeebo/blake3"
)

var verifyStore = flag.String("verifystore", "", "BenchmarkVerifyStore: the directory of its store, built there if it does not exist and reused if it does (default: a new one per run)")

func buildVerifyStore(b *testing.B, runs, perRun int) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "s")
	if *verifyStore != "" {
		dir = *verifyStore
		if _, err := os.Stat(filepath.Join(dir, layout.StoreName)); err == nil {
			return dir
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	atoms := script()
	for i := 0; i < runs*perRun; i++ {
		run, err := db.Run(ctx, fmt.Sprint("run-", i%runs))
		if err != nil {
			b.Fatal(err)
		}
		a := atoms[i/runs] // each run plays the script once
		a.Key = fmt.Sprint("k", i)
		atom, err := run.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := atom.Do(ctx, agent.Action(a), func(context.Context, string) ([]byte, error) { return a.Result, nil }); err != nil {
			b.Fatal(err)
		}
		if err := atom.Commit(ctx, agent.Delta(a)); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

func BenchmarkVerifyStore(b *testing.B) {
	dir := buildVerifyStore(b, 40, scriptLen)
	ctx := context.Background()
	logRecords, err := readLog(dir) // every record of the log, chained or not
	if err != nil {
		b.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	rate := func(b *testing.B, records uint64, start time.Time, cpu time.Duration) {
		b.ReportMetric(float64(records)/time.Since(start).Seconds(), "records/s")
		b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(records), "cpu-ns/record")
	}
	b.Run("verify", func(b *testing.B) {
		var records uint64
		start, cpu := time.Now(), cpuTime()
		for b.Loop() {
			rep, err := engine.Verify(ctx, dir, nil)
			if err != nil || !rep.OK {
				b.Fatalf("verify: %v %v", err, rep.Failures)
			}
			records += logRecords
		}
		rate(b, records, start, cpu)
	})
	b.Run("read-log", func(b *testing.B) {
		var records uint64
		start, cpu := time.Now(), cpuTime()
		for b.Loop() {
			n, err := readLog(dir)
			if err != nil {
				b.Fatal(err)
			}
			records += n
		}
		rate(b, records, start, cpu)
	})
	// Last: its records held in memory would delay the others' collections.
	b.Run("floor", func(b *testing.B) {
		f, err := loadFloor(dir)
		if err != nil {
			b.Fatal(err)
		}
		var records uint64
		var phases [3]time.Duration // checksums, decompression, BLAKE3
		start, cpu := time.Now(), cpuTime()
		for b.Loop() {
			if err := f.run(&phases); err != nil {
				b.Fatal(err)
			}
			records += uint64(f.records)
		}
		rate(b, records, start, cpu)
		for i, unit := range []string{"crc-ns/record", "decompress-ns/record", "blake3-ns/record"} {
			b.ReportMetric(float64(phases[i].Nanoseconds())/float64(records), unit)
		}
		b.ReportMetric(float64(f.hashed)/float64(len(f.payloads)), "hashed-B/atom")
		b.ReportMetric(float64(f.plain)/float64(len(f.payloads)), "decompressed-B/atom")
	})
}

// readLog reads every record of the store's log as continuumctl scan does,
// and returns how many it read.
func readLog(dir string) (uint64, error) {
	var n uint64
	err := engine.Scan(context.Background(), dir, nil, func(*engine.LogRecord) error { n++; return nil })
	return n, err
}

// floorWork is what a verify of the log cannot skip, in memory: every
// record's bytes to checksum, every compressed part to decompress, every
// atom's chained payload (its body and its results' digests, as
// offline.Verify rebuilds it) and every certified result to hash.
type floorWork struct {
	comp       *frame.Compressor
	hasher     *chain.Hasher
	records    int
	raw        [][]byte // every record as the log holds it
	compressed [][]byte // the compressed part of each intent, certificate and atom
	payloads   [][]byte // each atom's chained payload
	results    [][]byte // each done certificate's result
	hashed     int      // bytes of payloads and results
	plain      int      // bytes decompressed
	buf        []byte
}

func loadFloor(dir string) (*floorWork, error) {
	fs := vfs.Default
	dicts := frame.NewDicts()
	if _, err := layout.LoadDicts(fs, dir, dicts); err != nil {
		return nil, err
	}
	log, err := wal.Open(fs.PathJoin(dir, layout.WALDir), &wal.Options{FS: fs, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer log.Close()
	comp := frame.NewCompressor(dicts)
	hasher, err := chain.NewHasher(nil)
	if err != nil {
		return nil, err
	}
	f := &floorWork{comp: comp, hasher: hasher}
	c, err := record.NewCursor(log, func(uint64) string { return "wal" }, wal.Pos{}, &record.Decoder{Comp: comp, Ledger: true, Dicts: dicts})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	sums := map[ledger.Fingerprint][32]byte{}
	for c.Next() {
		r := c.Record()
		f.records++
		f.raw = append(f.raw, bytes.Clone(r.Raw))
		switch r.Kind {
		case record.KindIntent:
			f.compressed = append(f.compressed, bytes.Clone(r.Raw[1:]))
			f.plain += len(r.Plain)
		case record.KindCert:
			f.compressed = append(f.compressed, bytes.Clone(r.Raw[1:]))
			f.plain += len(r.Plain)
			if r.Cert.Status == ledger.StatusDone {
				f.results = append(f.results, bytes.Clone(r.Cert.Result))
				f.hashed += len(r.Cert.Result)
				sums[r.Cert.Fingerprint] = blake3.Sum256(r.Cert.Result)
			}
		case record.KindAtom:
			f.compressed = append(f.compressed, bytes.Clone(r.Body))
			plain, body, err := (&record.Decoder{Comp: comp}).DecodeAtom(nil, r, "wal")
			if err != nil {
				return nil, err
			}
			f.plain += len(plain)
			for _, fp := range body.Actions {
				s := sums[fp]
				plain = append(plain, s[:]...)
			}
			f.payloads = append(f.payloads, plain)
			f.hashed += len(plain)
		}
	}
	return f, c.Err()
}

// run does the work once, adding the CPU time of its phases to phases.
func (f *floorWork) run(phases *[3]time.Duration) error {
	t := cpuTime()
	lap := func(i int) {
		now := cpuTime()
		phases[i] += now - t
		t = now
	}
	var crc uint32
	for _, r := range f.raw {
		crc = crc32c.Update(crc, r)
	}
	lap(0)
	for _, c := range f.compressed {
		var err error
		if f.buf, err = f.comp.Decompress(f.buf[:0], c); err != nil {
			return err
		}
	}
	lap(1)
	var h chain.Hash
	for _, p := range f.payloads {
		h = f.hasher.Link("run", 1, h, p)
	}
	for _, r := range f.results {
		s := blake3.Sum256(r)
		h[0] ^= s[0]
	}
	lap(2)
	floorSink = uint64(crc) + uint64(h[0])
	return nil
}

var floorSink uint64 // keeps the floor's work from being optimized away
