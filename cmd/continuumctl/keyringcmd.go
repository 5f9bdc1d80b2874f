package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"strings"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/seal"
)

const keyringUsage = "keyring --out FILE [--id ID] [--json]"

const keyringAbout = `Keyring makes a keyring file for an encrypted store: one new random 256-bit
key-encryption key named ID (default k1), current. Pass the file to every
command that reads an encrypted store (--keyring FILE) and, in Go, open the
store with it (seal.ParseKeyringFile, then engine.Options.Keyring).

The file is text (seal.ParseKeyringFile):

  continuum-keyring 1
  current ID
  key ID HEX        (64 hex digits; one line per key)

It is written 0600, atomically (a temporary file, fsync, rename, fsync of the
directory), and never over an existing file. It is the store's secret: keep it
outside the store, and back it up: without it nothing the store sealed opens.

To rotate: make a second keyring (another --id), copy its "key" line into the
store's keyring file and make it "current", run rekey, then remove the old
key's line.

Exit 0: written. Exit 2: usage or I/O error (FILE exists).`

const keyringExamples = `  continuumctl keyring --out ./agent.keyring
  continuumctl inspect ./agent-store --keyring ./agent.keyring`

func runKeyring(args []string, stdout, stderr io.Writer) int {
	fs := ctl.Flags("keyring", keyringUsage, keyringAbout, keyringExamples, stderr)
	out := fs.String("out", "", "write the keyring to `FILE` (required; never over an existing file)")
	id := fs.String("id", "k1", "the new key's `ID` (1 to 256 bytes, no spaces)")
	asJSON := fs.Bool("json", false, "print the file's name and the key's id as JSON")
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) != 0:
		return cli.UsageErr(fs, stderr, "unexpected argument %q (the file is --out FILE)", pos[0])
	case *out == "":
		return cli.UsageErr(fs, stderr, "--out is required")
	case *id == "" || len(*id) > seal.MaxKeyID || strings.ContainsAny(*id, " \t\r\n"):
		return cli.UsageErr(fs, stderr, "--id %q: want 1 to %d bytes without spaces", *id, seal.MaxKeyID)
	}
	key := make([]byte, seal.KeySize)
	if _, err := rand.Read(key); err != nil {
		return ctl.Fail(stderr, "keyring", fmt.Errorf("generate a key: %w", err))
	}
	b := seal.AppendKeyringFile([]byte("# continuumctl keyring: the keyring of an encrypted store (secret: keep it 0600, outside the store)\n"),
		map[string][]byte{*id: key}, *id)
	clear(key)
	if _, err := seal.ParseKeyringFile(b); err != nil { // what every reader of it will do
		clear(b)
		return ctl.Fail(stderr, "keyring", err)
	}
	err := writeFileAtomic(*out, b, true)
	clear(b)
	if errors.Is(err, iofs.ErrExist) {
		err = fmt.Errorf("%s exists: keyring never replaces a keyring file (its keys may be all that opens a store); choose another --out", *out)
	}
	if err != nil {
		return ctl.Fail(stderr, "keyring", err)
	}
	if *asJSON {
		return done(stderr, "keyring", writeJSON(stdout, struct {
			File    string `json:"file"`
			Current string `json:"current"`
		}{*out, *id}))
	}
	fmt.Fprintf(stdout, "keyring %s: key %q, current (secret: keep it outside the store; engine.Options.Keyring, --keyring)\n", *out, *id)
	return cli.ExitOK
}
