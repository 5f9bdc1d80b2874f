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

const eraseUsage = "erase DIR --run ID [--run ID]... [--memory-key KEY]... --keyring FILE [--reason TEXT] [--key FILE] [--chain-key FILE] [--json]"

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

With --memory-key KEY (repeat for more keys) and one --run, erase destroys
only the values of that memory key of the run, which may still be active:
each value of a key the store was written with as erasable
(engine.Options.ErasableKeys) is sealed with a data key of its own, and erase
records an erase-key record (run, key, the data keys, time, reason; signed
with --key) and then drops those data keys from KEYS (DB.EraseKey). Every
value of the key written so far, in the log, frame files, snapshots and
forks, can then never be opened; the run's other state stays, and inspect,
export and diff show the key as erased. A value written later is sealed with
a new data key. A key whose values were not sealed with a key of their own,
or whose values are all erased already, is an error (exit 2).

Erase opens the store, so it takes the store's lock: it fails while another
process has the store open. From that process, call DB.Erase (DB.EraseKey)
instead. A crash during an erasure is finished by the next Open of the store.

Exit 0: done. Exit 1: the store is damaged. Exit 2: usage or I/O error (the
store is open elsewhere, plaintext, a run is active or has a fork not erased;
a memory key not erasable, or erased already).`

const eraseExamples = `  continuumctl erase ./agent-store --keyring ./agent.keyring --run support-4411 --reason "GDPR request 2291"
  continuumctl erase ./agent-store --keyring ./agent.keyring --run support-4411 --memory-key email --reason "GDPR request 2292"`

type eraseJSON struct {
	Erased []erasedJSON `json:"erased"`
	// ErasedKeys are the memory keys erased (--memory-key); absent without.
	ErasedKeys []erasedKeyJSON `json:"erased_keys,omitempty"`
}

// erasedKeyJSON is the erasure of one memory key of a run (engine.ErasedKey).
type erasedKeyJSON struct {
	Run    string    `json:"run"`
	Key    string    `json:"key"`
	Seq    uint64    `json:"seq"`     // the run's last seq when it was erased
	KeyNos []uint64  `json:"key_nos"` // the data keys destroyed
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
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
	var memKeys runList
	fs.Var(&memKeys, "memory-key", "erase only the values of memory `KEY` of the one run named (repeat for more keys)")
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
	if len(memKeys) > 0 && len(ids) != 1 {
		return cli.UsageErr(fs, stderr, "--memory-key erases keys of one run: name exactly one --run, not %d", len(ids))
	}
	for _, k := range memKeys {
		if k == "" || len(k) > engine.MaxMemoryKeyLen {
			return cli.UsageErr(fs, stderr, "--memory-key of %d bytes: a memory key has 1 to %d", len(k), engine.MaxMemoryKeyLen)
		}
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
	if len(memKeys) > 0 {
		return eraseKeys(db, ids[0], memKeys, *reason, *asJSON, stdout, stderr)
	}
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

// eraseKeys erases memory keys keys of run id (DB.EraseKey), closes db and
// prints what was erased.
func eraseKeys(db *engine.DB, id string, keys []string, reason string, asJSON bool, stdout, stderr io.Writer) int {
	out := eraseJSON{Erased: []erasedJSON{}, ErasedKeys: []erasedKeyJSON{}}
	for _, k := range keys {
		e, err := db.EraseKey(context.Background(), id, k, reason)
		if err != nil {
			db.Close()
			if len(out.ErasedKeys) > 0 {
				err = fmt.Errorf("%w (erased before it: %d of the keys named)", err, len(out.ErasedKeys))
			}
			return ctl.Fail(stderr, "erase", err)
		}
		out.ErasedKeys = append(out.ErasedKeys, erasedKeyJSON{Run: e.Run, Key: e.Key, Seq: e.Seq, KeyNos: e.KeyNos, At: e.At.UTC(), Reason: e.Reason})
	}
	if err := db.Close(); err != nil {
		return ctl.Fail(stderr, "erase", err)
	}
	if asJSON {
		if err := writeJSON(stdout, out); err != nil {
			return ctl.Fail(stderr, "erase", err)
		}
		return cli.ExitOK
	}
	for _, e := range out.ErasedKeys {
		fmt.Fprintf(stdout, "erased memory key %q of run %q after seq %d at %s, %s destroyed: %s\n",
			e.Key, e.Run, e.Seq, e.At.Format(time.RFC3339Nano), dataKeys(e.KeyNos), e.Reason)
	}
	return cli.ExitOK
}
