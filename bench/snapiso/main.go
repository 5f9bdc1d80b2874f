// Command snapiso measures what the snapshot store's isolation costs:
//
//   - restart when the snapshot store must be rebuilt from the log (its
//     directory is gone, or Pebble refuses its damaged MANIFEST) against
//     a normal restart: Open, then StateAt of a past seq of a 10,000-atom run
//     (the first call that needs the store, so it waits for its open, and
//     for its rebuild);
//
//   - StateAt served from the log (the snapshot store failed: every
//     operation on its files returns EIO) against StateAt from a snapshot,
//     at seqs of a 10,000-atom run: the first call (which scans the log for
//     the run's atom positions) and the following ones.
//
// Run it so:
//
//	go run ./bench/snapiso -reps 7 -dir /tmp/snapiso
//
// The store holds the run "big" of -big atoms and -fillers runs of 1,000
// atoms; every atom is one Do and one delta of about 500 B; the frame keeps
// its last 400 messages (context compaction). Built with NoSync, closed
// cleanly, copied afresh before every timed restart. Figures are medians of
// -reps; the variants alternate, so that the machine's load falls on all.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/workload"
)

var (
	bigFlag = flag.Int("big", 10000, "atoms of the run StateAt reads")
	fillers = flag.Int("fillers", 4, "runs of 1,000 atoms beside it")
	reps    = flag.Int("reps", 7, "timed repetitions of each variant")
	dirFlag = flag.String("dir", "", "directory for the stores (default: a temporary one, removed after)")
)

const keepMsgs = 400

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func main() {
	flag.Parse()
	ctx := context.Background()
	root := *dirFlag
	if root == "" {
		d, err := os.MkdirTemp("", "continuum-snapiso")
		if err != nil {
			log.Fatal(err)
		}
		root = d
		defer os.RemoveAll(root)
	}
	pristine := filepath.Join(root, "pristine")
	os.RemoveAll(pristine)
	t0 := time.Now()
	build(ctx, pristine)
	fmt.Printf("snapiso: store of a %d-atom run and %d runs of 1,000 atoms, built in %v; %s\n\n",
		*bigFlag, *fillers, time.Since(t0).Round(time.Second), time.Now().UTC().Format("2006-01-02"))

	seqs := []uint64{uint64(*bigFlag) / 4, uint64(*bigFlag) / 2, uint64(*bigFlag) * 3 / 4, uint64(*bigFlag) - 1}

	// Restart.
	type variant struct {
		name    string
		prepare func(dir string)
	}
	variants := []variant{
		{"normal restart", func(string) {}},
		{"snapshot store missing (rebuilt from the log)", func(dir string) {
			if err := os.RemoveAll(filepath.Join(dir, "snapshots")); err != nil {
				log.Fatal(err)
			}
		}},
		{"the snapshot store's MANIFEST damaged (refused at open, moved aside, rebuilt)", func(dir string) {
			flipManifest(filepath.Join(dir, "snapshots"))
		}},
	}
	openD := map[string][]time.Duration{}
	outOfUse := map[string]int{}
	movedAside := map[string]int{}
	firstD := map[string][]time.Duration{}
	for i := 0; i < *reps; i++ {
		for _, v := range variants {
			dir := filepath.Join(root, "copy")
			os.RemoveAll(dir)
			copyTree(pristine, dir)
			v.prepare(dir)
			t0 := time.Now()
			db, err := engine.Open(dir, &engine.Options{Logger: quiet})
			if err != nil {
				log.Fatal(err)
			}
			t1 := time.Now()
			run, err := db.Run(ctx, "big")
			if err != nil {
				log.Fatal(err)
			}
			if _, err := run.StateAt(ctx, seqs[1]); err != nil {
				log.Fatal(err)
			}
			t2 := time.Now()
			if st := db.Stats(); st.SnapshotStore != nil {
				outOfUse[v.name]++
			}
			if ents, _ := filepath.Glob(filepath.Join(dir, "snapshots.broken-*")); len(ents) > 0 {
				movedAside[v.name]++
			}
			openD[v.name] = append(openD[v.name], t1.Sub(t0))
			firstD[v.name] = append(firstD[v.name], t2.Sub(t0))
			if err := db.Close(); err != nil {
				log.Fatal(err)
			}
		}
	}
	fmt.Printf("| restart | Open p50 | Open -> first StateAt(%d) p50 | ratio to normal | store moved aside and rebuilt | out of use after it |\n", seqs[1])
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: |")
	base := med(firstD[variants[0].name])
	for _, v := range variants {
		fmt.Printf("| %s | %s | %s | %.1f | %d of %d | %d of %d |\n", v.name, ms(med(openD[v.name])), ms(med(firstD[v.name])),
			float64(med(firstD[v.name]))/float64(base), movedAside[v.name], *reps, outOfUse[v.name], *reps)
	}
	fmt.Println()

	// StateAt.
	os.RemoveAll(filepath.Join(root, "copy"))
	dir := filepath.Join(root, "copy")
	copyTree(pristine, dir)
	fromSnap := map[uint64][]time.Duration{}
	fromLogFirst := []time.Duration{}
	fromLog := map[uint64][]time.Duration{}
	for i := 0; i < *reps; i++ {
		// From a snapshot: a store in use, warm.
		db, err := engine.Open(dir, &engine.Options{Logger: quiet})
		if err != nil {
			log.Fatal(err)
		}
		run, _ := db.Run(ctx, "big")
		if _, err := run.StateAt(ctx, seqs[0]); err != nil { // waits for the store
			log.Fatal(err)
		}
		for _, s := range seqs {
			t := time.Now()
			if _, err := run.StateAt(ctx, s); err != nil {
				log.Fatal(err)
			}
			fromSnap[s] = append(fromSnap[s], time.Since(t))
		}
		if st := db.Stats(); st.SnapshotStore != nil {
			log.Fatalf("snapshot store out of use: %v", st.SnapshotStore)
		}
		db.Close()

		// From the log: every operation on the snapshot store's files fails.
		failing := errorfs.InjectorFunc(func(op errorfs.Op) error {
			if strings.Contains(op.Path, "/snapshots") {
				return syscall.EIO
			}
			return nil
		})
		db, err = engine.Open(dir, &engine.Options{FS: errorfs.Wrap(vfs.Default, failing), Logger: quiet})
		if err != nil {
			log.Fatal(err)
		}
		run, _ = db.Run(ctx, "big")
		t := time.Now()
		if _, err := run.StateAt(ctx, seqs[0]); err != nil {
			log.Fatal(err)
		}
		fromLogFirst = append(fromLogFirst, time.Since(t))
		for _, s := range seqs {
			t := time.Now()
			if _, err := run.StateAt(ctx, s); err != nil {
				log.Fatal(err)
			}
			fromLog[s] = append(fromLog[s], time.Since(t))
		}
		if st := db.Stats(); st.SnapshotStore == nil {
			log.Fatal("the snapshot store was in use through a failing filesystem")
		}
		db.Close()
	}
	fmt.Printf("first StateAt(%d) from the log (scans the log for the run's positions): %s\n\n", seqs[0], ms(med(fromLogFirst)))
	fmt.Println("| StateAt seq | from a snapshot p50 | from the log p50 | log / snapshot |")
	fmt.Println("| ---: | ---: | ---: | ---: |")
	for _, s := range seqs {
		a, b := med(fromSnap[s]), med(fromLog[s])
		fmt.Printf("| %d | %s | %s | %.1f |\n", s, ms(a), ms(b), float64(b)/float64(a))
	}
}

func build(ctx context.Context, dir string) {
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	world := agent.NewWorld()
	runs := map[string]int{"big": *bigFlag}
	for i := 0; i < *fillers; i++ {
		runs[workload.RunID(i)] = 1000
	}
	for id, n := range runs {
		run, err := db.Run(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := step(ctx, run, world); err != nil {
				log.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
}

// step is agent.Step with context compaction: past keepMsgs messages, each
// atom drops as many old ones as it adds.
func step(ctx context.Context, run *engine.Run, ds agent.Downstream) error {
	atom, err := run.Begin(ctx)
	if err != nil {
		return err
	}
	a := workload.Script(run.ID(), atom.Seq(), 1)
	res, err := atom.Do(ctx, agent.Action(a), func(ctx context.Context, key string) ([]byte, error) {
		return ds.Exec(ctx, a.Tool, a.Args, key, a.Idempotent)
	})
	if err != nil {
		return err
	}
	a.Result = res
	d := agent.Delta(a)
	if 2*atom.Seq() > keepMsgs {
		d.DropMessages(2)
	}
	return atom.Commit(ctx, d)
}

// flipManifest flips one byte in the middle of the newest MANIFEST of the
// Pebble directory dir.
func flipManifest(dir string) {
	names, err := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if err != nil || len(names) == 0 {
		log.Fatalf("no MANIFEST in %s", dir)
	}
	sort.Strings(names)
	name := names[len(names)-1]
	b, err := os.ReadFile(name)
	if err != nil {
		log.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(name, b, 0o600); err != nil {
		log.Fatal(err)
	}
}

func copyTree(from, to string) {
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		log.Fatalf("cp: %v: %s", err, out)
	}
}

func med(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
