package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/engine"
)

// config is what parent and child agree on; the parent passes it to the
// child on its command line.
type config struct {
	cycles int
	runs   int
	atoms  int
	seed   int64
	dir    string
	mode   engine.Durability
	keep   bool
	v      bool

	// child only
	child bool
	url   string // the downstream
	wseed int64  // the workload's seed
}

func main() {
	var c config
	var mode string
	flag.IntVar(&c.cycles, "n", 40, "SIGKILL cycles in all (2800 for the full run)")
	flag.IntVar(&c.runs, "runs", 3, "runs per workload")
	flag.IntVar(&c.atoms, "atoms", 12, "atoms per run")
	flag.Int64Var(&c.seed, "seed", 0, "seed of the kill plan and the workloads (0: the clock)")
	flag.StringVar(&c.dir, "dir", "", "directory for the stores (default: a new temporary directory)")
	flag.StringVar(&mode, "mode", "strict", "durability mode: strict or relaxed")
	flag.BoolVar(&c.keep, "keep", false, "keep the stores even when every check passed")
	flag.BoolVar(&c.v, "v", false, "print every cycle")
	flag.BoolVar(&c.child, "child", false, "internal: run as the child the harness kills")
	flag.StringVar(&c.url, "downstream", "", "internal: the downstream's URL (child)")
	flag.Int64Var(&c.wseed, "wseed", 0, "internal: the workload's seed (child)")
	flag.Parse()
	switch mode {
	case "strict":
		c.mode = engine.Strict
	case "relaxed":
		c.mode = engine.Relaxed
	default:
		fmt.Fprintf(os.Stderr, "sigkill: -mode %q: want strict or relaxed\n", mode)
		os.Exit(2)
	}
	if c.runs < 1 || c.atoms < 1 || c.cycles < 0 {
		fmt.Fprintln(os.Stderr, "sigkill: -runs and -atoms must be at least 1, -n at least 0")
		os.Exit(2)
	}
	if c.child {
		if err := runChild(&c); err != nil {
			fmt.Fprintf(os.Stderr, "sigkill child: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if c.seed == 0 {
		c.seed = time.Now().UnixNano()
	}
	os.Exit(runParent(&c, os.Stdout))
}

// storeOptions are the engine options of the child, the reference and the
// final check: small segments, frequent snapshots and engine checkpoints,
// so that kills land in all of them, and zero nonces so that the chain
// heads of two stores given the same workload are equal.
func storeOptions(fs vfs.FS, mode engine.Durability) *engine.Options {
	return &engine.Options{
		FS:              fs,
		Durability:      mode,
		SegmentSize:     64 << 10,
		SnapshotEvery:   snapshotEvery,
		RestartTail:     16 << 10,
		CheckpointEvery: 5,
		DictSamples:     24,
		DictSize:        4 << 10,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		Nonces:          zeros{},
	}
}

// snapshotEvery is the snapshot period in atoms; the mid-snapshot plan
// kills just after an atom whose seq is a multiple of it.
const snapshotEvery = 4

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }
