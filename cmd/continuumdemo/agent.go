package main

import (
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
	"github.com/continuumdb/continuum/internal/downstream"
	"github.com/continuumdb/continuum/ledger"
)

// agentCmd is the hidden first argument with which the demo starts itself
// as its child: the agent that gets killed. It prints one machine-readable line per event:
//
//	continuum-demo open restart_ns=N open_ns=N last_seq=N interrupted=N
//	continuum-demo atom seq=N
//	continuum-demo reconciled seq=N key=K found=true|false
//	continuum-demo done last_seq=N
const agentCmd = "agent"

// demoKeyEnv carries the hex seed of the demo's signing key to the child:
// an ephemeral key made for one demo, so verify can check signatures.
const demoKeyEnv = "CONTINUUM_DEMO_SIGNING_SEED"

const demoEvent = "continuum-demo"

func runAgent(args []string, stdout, stderr io.Writer) int {
	fs := prog.Flags(agentCmd, agentCmd+" --dir DIR --downstream URL", "The demo's agent (started by the demo).", "", stderr)
	dir := fs.String("dir", "", "store `directory`")
	url := fs.String("downstream", "", "base `URL` of the fake downstream")
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 || *dir == "" || *url == "" {
		return cli.UsageErr(fs, stderr, "want --dir and --downstream and nothing else")
	}
	if err := demoAgent(context.Background(), *dir, *url, stdout); err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", prog, agentCmd, err)
		return cli.ExitCorrupt
	}
	return cli.ExitOK
}

func demoAgent(ctx context.Context, dir, url string, out io.Writer) error {
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
	run, err := db.Run(ctx, demoRun)
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
	script := demoScript()
	for run.LastSeq() < uint64(len(script)) {
		atom, err := run.Begin(ctx)
		if err != nil {
			return err
		}
		step := script[atom.Seq()-1]
		var result []byte
		if step.tool != "" {
			act := ledger.Action{Tool: step.tool, Args: step.args, Key: step.key, Idempotent: step.idempotent}
			exec := func(ctx context.Context, key string) ([]byte, error) {
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
		fmt.Fprintf(out, "%s atom seq=%d\n", demoEvent, atom.Seq())
	}
	if err := db.Close(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s done last_seq=%d\n", demoEvent, run.LastSeq())
	return nil
}
