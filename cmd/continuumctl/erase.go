package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
)

const eraseUsage = "erase DIR --run ID [--run ID]... --keyring FILE [--reason TEXT] [--key FILE] [--chain-key FILE] [--json]"

const eraseAbout = `Erase destroys the content of ended (or deleted) runs of an encrypted store:
each run is deleted, if it is not yet, by an erase record of the log, and its
data key is then dropped from the store's KEYS, so that nothing the key sealed
(the run's atoms, the intents and certificates of its actions, its end result,
its frame files and snapshots) can be opened again, by anyone, in this store
or in any copy of its log. The records stay, sealed: verify still checks every
link of the chain, and lists the run as erased by policy, not as damaged.

The records of an action with an explicit idempotency key are the store's,
not the run's (another run may have repeated the action and needs its result):
they stay readable. A run forked from one named must be erased first (it holds
its parent's state at its fork point). A plaintext store cannot be erased this
way: delete its runs with gc, whose compaction removes their records.

Erase opens the store, so it takes the store's lock: it fails while another
process has the store open. From that process, call DB.Erase instead. A crash
during an erasure is finished by the next Open of the store.

Exit 0: done. Exit 1: the store is damaged. Exit 2: usage or I/O error (the
store is open elsewhere, plaintext, a run is active or has a fork not erased).`

const eraseExamples = `  continuumctl erase ./agent-store --keyring ./agent.keyring --run support-4411 --reason "GDPR request 2291"`

type eraseJSON struct {
	Erased []erasedJSON `json:"erased"`
}

type erasedJSON struct {
	Run    string    `json:"run"`
	Seq    uint64    `json:"seq"` // the erase record's link
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

func runErase(args []string, stdout, stderr io.Writer) int {
	fs := ctl.Flags("erase", eraseUsage, eraseAbout, eraseExamples, stderr)
	var ids runList
	fs.Var(&ids, "run", "erase run `ID` (repeat for more; a fork before the run it was forked from)")
	reason := fs.String("reason", "", "the `TEXT` each erase record records (default: \"erased by request\")")
	keyFile := fs.String("key", "", "sign the erase records with the signing key `FILE` (continuumctl keygen)")
	chainKey := fs.String("chain-key", "", "`file` holding the keyed-mode chain secret the store was written with")
	keyring := keyringFlag(fs)
	asJSON := fs.Bool("json", false, "print the erasures as JSON")
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return cli.UsageErr(fs, stderr, "want exactly one store directory")
	}
	if len(ids) == 0 {
		return cli.UsageErr(fs, stderr, "name the runs to erase with --run")
	}
	if *keyring == "" {
		return cli.UsageErr(fs, stderr, "--keyring is required: only an encrypted store can be erased")
	}
	if len(*reason) > engine.MaxDeleteReason {
		return cli.UsageErr(fs, stderr, "--reason of %d bytes: the limit is %d", len(*reason), engine.MaxDeleteReason)
	}
	dir := pos[0]
	opts := &engine.Options{Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	ring, err := readKeyring(*keyring)
	if err != nil {
		return ctl.Fail(stderr, "erase", err)
	}
	opts.Keyring = ring
	if *keyFile != "" {
		key, err := readSigningKey(*keyFile, dir)
		if err != nil {
			return ctl.Fail(stderr, "erase", err)
		}
		opts.SigningKey = key
	}
	if *chainKey != "" {
		k, err := readChainKey(*chainKey)
		if err != nil {
			return ctl.Fail(stderr, "erase", err)
		}
		opts.ChainKey = k
	}
	if _, err := engine.StoreOrigin(dir, nil); err != nil {
		return ctl.Fail(stderr, "erase", err) // not a store: Open would create one
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		if errors.Is(err, engine.ErrLocked) {
			err = fmt.Errorf("%w\n(another process has the store open: stop it, or call DB.Erase from it)", err)
		}
		return ctl.Fail(stderr, "erase", err)
	}
	out := eraseJSON{Erased: []erasedJSON{}}
	for _, id := range ids {
		d, err := db.Erase(context.Background(), id, *reason)
		if err != nil {
			db.Close()
			if len(out.Erased) > 0 {
				err = fmt.Errorf("%w (erased before it: %d of the runs named)", err, len(out.Erased))
			}
			return ctl.Fail(stderr, "erase", err)
		}
		out.Erased = append(out.Erased, erasedJSON{Run: d.ID, Seq: d.Erasure.Seq, At: d.Erasure.At.UTC(), Reason: d.Erasure.Reason})
	}
	if err := db.Close(); err != nil {
		return ctl.Fail(stderr, "erase", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return ctl.Fail(stderr, "erase", err)
		}
		return cli.ExitOK
	}
	for _, e := range out.Erased {
		fmt.Fprintf(stdout, "erased run %q at seq %d: %s\n", e.Run, e.Seq, e.Reason)
	}
	return cli.ExitOK
}
