package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/downstream"
	"github.com/continuumdb/continuum/ledger"
	"github.com/zeebo/blake3"
)

// agentCmd is the hidden first argument with which the demo starts itself
// as its child: the agent that gets killed. It prints one machine-readable line per event:
//
//	continuum-demo open restart_ns=N open_ns=N last_seq=N interrupted=N
//	continuum-demo forked run=ID parent=ID at=N same_state=true|false state=HEX
//	continuum-demo atom seq=N calls=N key=K
//	continuum-demo reconciled seq=N key=K found=true|false
//	continuum-demo ended run=ID status=S
//	continuum-demo run id=ID status=S parent=ID forked_at=N last_seq=N result=JSON
//	continuum-demo done last_seq=N
//
// An atom's calls counts the calls of its action's exec (0: the ledger
// had its certificate), and key is the key of the last one. With --fork
// the agent forks demoRun at demoForkAt into demoForkRun (unless an
// earlier process did) and does the fork's script there; then it lists
// the store's runs (RunInfo).
const agentCmd = "agent"

// demoKeyEnv carries the hex seed of the demo's signing key to the child:
// an ephemeral key made for one demo, so verify can check signatures.
const demoKeyEnv = "CONTINUUM_DEMO_SIGNING_SEED"

const demoEvent = "continuum-demo"

func runAgent(args []string, stdout, stderr io.Writer) int {
	fs := prog.Flags(agentCmd, agentCmd+" --dir DIR --downstream URL [--fork]", "The demo's agent (started by the demo).", "", stderr)
	dir := fs.String("dir", "", "store `directory`")
	url := fs.String("downstream", "", "base `URL` of the fake downstream")
	fork := fs.Bool("fork", false, "fork the deployment and do the reconsidered steps")
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 || *dir == "" || *url == "" {
		return cli.UsageErr(fs, stderr, "want --dir and --downstream and nothing else")
	}
	if err := demoAgent(context.Background(), *dir, *url, *fork, stdout); err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", prog, agentCmd, err)
		return cli.ExitCorrupt
	}
	return cli.ExitOK
}

func demoAgent(ctx context.Context, dir, url string, fork bool, out io.Writer) error {
	opts := &engine.Options{Logger: slog.New(slog.DiscardHandler)}
	if seed := os.Getenv(demoKeyEnv); seed != "" {
		b, err := hex.DecodeString(seed)
		if err != nil || len(b) != ed25519.SeedSize {
			return fmt.Errorf("%s is not a hex ed25519 seed", demoKeyEnv)
		}
		opts.SigningKey = ed25519.NewKeyFromSeed(b)
	}
	start := time.Now()
	db, err := engine.Open(dir, opts)
	if err != nil {
		return err
	}
	defer db.Close()
	script := demoScript()
	var run *engine.Run
	if fork {
		script = demoForkScript()
		run, err = forkDeployment(ctx, db, out)
	} else {
		run, err = db.Run(ctx, demoRun)
	}
	if err != nil {
		return err
	}
	if _, err := run.StateE(); err != nil {
		return err
	}
	restart := time.Since(start)
	interrupted, _, err := run.Interrupted(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s open restart_ns=%d open_ns=%d last_seq=%d interrupted=%d\n", demoEvent, restart.Nanoseconds(),
		db.Stats().Open.Duration.Nanoseconds(), run.LastSeq(), interrupted)

	ds := downstream.NewClient(url)
	for run.LastSeq() < uint64(len(script)) {
		atom, err := run.Begin(ctx)
		if err != nil {
			return err
		}
		step := script[atom.Seq()-1]
		var result []byte
		var calls int
		var called string // the key of the last call
		if step.tool != "" {
			act := ledger.Action{Tool: step.tool, Args: step.args, Idempotent: step.idempotent}
			exec := func(ctx context.Context, key string) ([]byte, error) {
				calls, called = calls+1, key
				return ds.Exec(ctx, step.tool, step.args, key, step.idempotent)
			}
			result, err = atom.Do(ctx, act, exec)
			var doubt *ledger.InDoubtError
			if errors.As(err, &doubt) {
				// The previous process died between dispatch and reply: ask
				// the downstream whether the call took effect.
				res, found, lerr := ds.LookupContext(ctx, doubt.Key)
				if lerr != nil {
					return lerr
				}
				if found {
					result, err = res, atom.ResolveInDoubt(ctx, doubt, res)
				} else if err = atom.ResolveInDoubtFailed(ctx, doubt, "the downstream has no trace of the call"); err == nil {
					act.Key = doubt.Key // try again, under the same key
					result, err = atom.Do(ctx, act, exec)
				}
				fmt.Fprintf(out, "%s reconciled seq=%d key=%s found=%t\n", demoEvent, atom.Seq(), doubt.Key, found)
			}
			if err != nil {
				atom.Fail(context.WithoutCancel(ctx), err.Error())
				return err
			}
		}
		if err := atom.Commit(ctx, step.delta(result)); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s atom seq=%d calls=%d key=%s\n", demoEvent, atom.Seq(), calls, called)
	}
	// The run ends once, whichever process finishes its script (one that
	// stopped between the last commit and End left it active).
	if run.Status() == engine.StatusActive {
		res := demoArgs(map[string]any{"status": "deployed", "regions": len(demoRegions), "fees_cents": demoFees(script)})
		if err := run.End(ctx, engine.StatusCompleted, res); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%s ended run=%s status=%s\n", demoEvent, run.ID(), run.Status())
	if fork {
		runs, err := db.Runs()
		if err != nil {
			return err
		}
		for _, ri := range runs {
			fmt.Fprintf(out, "%s run id=%s status=%s parent=%s forked_at=%d last_seq=%d result=%s\n",
				demoEvent, ri.ID, ri.Status, ri.Parent, ri.ForkedAt, ri.LastSeq, ri.Result)
		}
	}
	last := run.LastSeq()
	if err := db.Close(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s done last_seq=%d\n", demoEvent, last)
	return nil
}

// forkDeployment forks demoRun at demoForkAt into demoForkRun, or opens
// the fork an earlier process made, and reports whether the fork's state
// at the fork point is the original's: byte for byte in the frame's
// deterministic encoding.
func forkDeployment(ctx context.Context, db *engine.DB, out io.Writer) (*engine.Run, error) {
	at := demoForkAt()
	run, err := db.Fork(ctx, demoRun, at, demoForkRun)
	if errors.Is(err, engine.ErrRunExists) {
		run, err = db.Run(ctx, demoForkRun) // forked by a process that stopped since
	}
	if err != nil {
		return nil, err
	}
	if info := run.Info(); info.Parent != demoRun || info.ForkedAt != at {
		return nil, fmt.Errorf("run %q is not the fork of %q at %d: parent %q, forked at %d", demoForkRun, demoRun, at, info.Parent, info.ForkedAt)
	}
	src, err := db.Run(ctx, demoRun)
	if err != nil {
		return nil, err
	}
	want, err := src.StateAt(ctx, at)
	if err != nil {
		return nil, err
	}
	// The frame the fork goes on from: its state while it has no atom of
	// its own, else its StateAt the fork point.
	var got *frame.Frame
	if run.LastSeq() == at {
		got, err = run.StateE()
	} else {
		got, err = run.StateAt(ctx, at)
	}
	if err != nil {
		return nil, err
	}
	wb, gb := frame.AppendFrame(nil, want), frame.AppendFrame(nil, got)
	sum := blake3.Sum256(gb)
	fmt.Fprintf(out, "%s forked run=%s parent=%s at=%d same_state=%t state=%x\n",
		demoEvent, run.ID(), demoRun, at, bytes.Equal(wb, gb), sum[:6])
	return run, nil
}
