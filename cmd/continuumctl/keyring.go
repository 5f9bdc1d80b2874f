package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/seal"
)

// keyringHelp documents --keyring for every command that takes it.
const keyringHelp = "keyring `FILE` of an encrypted store (engine.Options.Keyring's keys): lines \"continuum-keyring 1\",\n" +
	"\"current ID\" and one \"key ID HEX\" (64 hex digits) per key; see seal.ParseKeyringFile. Keep it 0600, outside the store"

// keyringFlag adds --keyring to fs.
func keyringFlag(fs *flag.FlagSet) *string { return fs.String("keyring", "", keyringHelp) }

// readKeyring reads the keyring file name; "" is none.
func readKeyring(name string) (seal.Keyring, error) {
	if name == "" {
		return nil, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	ring, err := seal.ParseKeyringFile(b)
	clear(b)
	if err != nil {
		return nil, fmt.Errorf("keyring %s: %w", name, err)
	}
	return ring, nil
}

const rekeyUsage = "rekey DIR --keyring FILE [--json]"

const rekeyAbout = `Rekey re-wraps every data key of an encrypted store that the keyring's current
key did not wrap, with the current key, and writes the store's key table (KEYS)
durably. After it the keyring's older keys can be retired: the store opens with
the current key alone. The sealed data is not touched, so rekey takes
milliseconds whatever the store's size. Rotate a key in three steps: add the
new key to the keyring file and make it current (new data keys are wrapped
with it from the next Open on), run rekey, then remove the old key.

Rekey opens the store, so it takes the store's lock: it fails while another
process has the store open. From that process, call DB.Rekey instead.

Exit 0: done. Exit 1: the store is damaged. Exit 2: usage or I/O error (the
store is open elsewhere, the keyring lacks a key the store needs).`

const rekeyExamples = `  continuumctl rekey ./agent-store --keyring ./agent.keyring`

func runRekey(args []string, stdout, stderr io.Writer) int {
	fs := ctl.Flags("rekey", rekeyUsage, rekeyAbout, rekeyExamples, stderr)
	keyring := keyringFlag(fs)
	asJSON := fs.Bool("json", false, "print how many keys were re-wrapped, and with which key, as JSON")
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return cli.UsageErr(fs, stderr, "want exactly one store directory")
	}
	if *keyring == "" {
		return cli.UsageErr(fs, stderr, "--keyring is required")
	}
	dir := pos[0]
	ring, err := readKeyring(*keyring)
	if err != nil {
		return ctl.Fail(stderr, "rekey", err)
	}
	if _, err := engine.StoreOrigin(dir, nil); err != nil {
		return ctl.Fail(stderr, "rekey", err) // not a store: Open would create one
	}
	db, err := engine.Open(dir, &engine.Options{Keyring: ring,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		if errors.Is(err, engine.ErrLocked) {
			err = fmt.Errorf("%w\n(another process has the store open: stop it, or call DB.Rekey from it)", err)
		}
		return ctl.Fail(stderr, "rekey", err)
	}
	n, err := db.Rekey()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ctl.Fail(stderr, "rekey", err)
	}
	if *asJSON {
		b, _ := json.Marshal(struct {
			Rewrapped int    `json:"rewrapped"`
			Current   string `json:"current"`
		}{n, ring.Current()})
		fmt.Fprintf(stdout, "%s\n", b)
		return cli.ExitOK
	}
	fmt.Fprintf(stdout, "%d data keys re-wrapped with %q; the keyring's other keys are no longer needed by %s\n", n, ring.Current(), dir)
	return cli.ExitOK
}
