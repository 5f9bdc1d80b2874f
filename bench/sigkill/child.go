package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/downstream"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/continuumdb/continuum/ledger"
)

// The child's protocol: one line per event on stdout, written with one
// write each and never buffered, so that a line the parent reads is an
// event that happened, whenever the child is killed:
//
//	open <open ns> <open+state ns> <records replayed> <torn bytes>
//	head <run> <last seq> <head hex>          (one per run, at open)
//	indoubt <run> <seq> <key> <idempotent>    (in-doubt actions found at open)
//	ready
//	commit <run> <seq>                        (Commit is about to be called)
//	ack <run> <seq> <head hex>                (Commit returned nil)
//	resolve <run> <seq> <key> <how>           (an in-doubt action was settled)
//	done
func emit(format string, args ...any) {
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

func hexHead(h chain.Hash) string { return hex.EncodeToString(h[:]) }

func runChild(c *config) error {
	ctx := context.Background()
	ds := downstream.NewClient(c.url)
	t0 := time.Now()
	db, err := engine.Open(c.dir, storeOptions(vfs.Default, c.mode))
	if err != nil {
		return fmt.Errorf("open %s: %w", c.dir, err)
	}
	defer db.Close()
	tOpen := time.Since(t0)
	runs := make([]*engine.Run, c.runs)
	for i := range runs {
		if runs[i], err = db.Run(ctx, workload.RunID(i)); err != nil {
			return err
		}
		if _, err := runs[i].StateE(); err != nil {
			return fmt.Errorf("run %s: state after open: %w", runs[i].ID(), err)
		}
	}
	tState := time.Since(t0)
	st := db.Stats()
	emit("open %d %d %d %d", tOpen.Nanoseconds(), tState.Nanoseconds(), st.Open.Replayed, st.Open.TornBytes)
	inDoubt := map[string]bool{} // keys of the in-doubt actions found at open
	for _, r := range runs {
		emit("head %s %d %s", r.ID(), r.LastSeq(), hexHead(r.Head()))
		seq, acts, err := r.Interrupted(ctx)
		if err != nil {
			return fmt.Errorf("run %s: interrupted: %w", r.ID(), err)
		}
		for _, a := range acts {
			if a.Status == ledger.StatusIntent {
				emit("indoubt %s %d %s %t", r.ID(), seq, a.Key, a.Idempotent)
				inDoubt[a.Key] = true
			}
		}
	}
	emit("ready")
	for {
		progressed := false
		for _, r := range runs {
			if r.LastSeq() >= uint64(c.atoms) {
				continue
			}
			if err := childStep(ctx, r, c.wseed, ds, inDoubt); err != nil {
				return fmt.Errorf("run %s: %w", r.ID(), err)
			}
			progressed = true
		}
		if !progressed {
			break
		}
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	emit("done")
	return nil
}

// childStep is agent.Step with its events reported: Begin, one Do
// (settling an in-doubt action with the downstream), Commit.
func childStep(ctx context.Context, run *engine.Run, seed int64, ds *downstream.Client, inDoubt map[string]bool) error {
	atom, err := run.Begin(ctx)
	if err != nil {
		return err
	}
	a := workload.Script(run.ID(), atom.Seq(), seed)
	act := agent.Action(a)
	execs := 0
	exec := func(ctx context.Context, key string) ([]byte, error) {
		execs++
		return ds.Exec(ctx, a.Tool, a.Args, key, a.Idempotent)
	}
	res, err := atom.Do(ctx, act, exec)
	var doubt *ledger.InDoubtError
	if errors.As(err, &doubt) {
		// Ask the outside world; an error there is not "no effect".
		got, ok, lerr := ds.LookupContext(ctx, doubt.Key)
		switch {
		case lerr != nil:
			err = fmt.Errorf("reconciling %s: %w", doubt.Key, lerr)
		case ok:
			if err = atom.ResolveInDoubt(ctx, doubt, got); err == nil {
				res = got
				emit("resolve %s %d %s lookup-found", run.ID(), atom.Seq(), doubt.Key)
			}
		default:
			if err = atom.ResolveInDoubtFailed(ctx, doubt, "the downstream has no trace of the call"); err == nil {
				emit("resolve %s %d %s lookup-none", run.ID(), atom.Seq(), doubt.Key)
				act.Key = doubt.Key // try again, under the same key
				res, err = atom.Do(ctx, act, exec)
			}
		}
	} else if err == nil && inDoubt[a.Key] && execs > 0 {
		// Declared idempotent: Do called exec again with the same key.
		emit("resolve %s %d %s reexec-same-key", run.ID(), atom.Seq(), a.Key)
	}
	delete(inDoubt, a.Key)
	if err != nil {
		atom.Fail(context.WithoutCancel(ctx), err.Error())
		return err
	}
	a.Result = res
	emit("commit %s %d", run.ID(), atom.Seq())
	if err := atom.Commit(ctx, agent.Delta(a)); err != nil {
		return err
	}
	emit("ack %s %d %s", run.ID(), atom.Seq(), hexHead(run.Head()))
	return nil
}
