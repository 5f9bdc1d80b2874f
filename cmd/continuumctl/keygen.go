package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
)

const keygenUsage = "keygen (--store DIR | --origin NAME) --out FILE [--json]"

const keygenAbout = `Keygen makes a signing key for a store: FILE holds the Ed25519 signing key
(for engine.Options.SigningKey, read with chain.ParseSigningKey), FILE.pub its
public key (for verify --pubkey). Both are written 0600, atomically, and never
over an existing file. Keep FILE secret and outside the store: whoever holds it
can sign the store's checkpoints.

Both files name the store's origin, the signer name the engine signs that
store under: "continuum-" and the first 16 hex digits of the store id.
--store DIR reads it from the store's STORE file (the store must exist: open it
once, then sign it from its first run on); --origin NAME gives it directly
(DB.Origin() in the program that owns the store). verify fails a key file
whose origin is not the store's.

A store's checkpoints are signed from the moment it is opened with the key:
checkpoints written before are unsigned, and verify --pubkey reports each as a
bad signature. Make the key before the store's first run.

Exit 0: written. Exit 2: usage or I/O error (FILE exists, no store in DIR).`

const keygenExamples = `  continuumctl keygen --store ./agent-store --out ./agent.key
  continuumctl keygen --origin continuum-0123456789abcdef --out ./agent.key
  continuumctl verify --strict --pubkey ./agent.key.pub ./agent-store`

// keygenJSON is what keygen --json prints.
type keygenJSON struct {
	Origin     string `json:"origin"`
	SigningKey string `json:"signing_key"`
	PublicKey  string `json:"public_key"`
}

func runKeygen(args []string, stdout, stderr io.Writer) int {
	fs := ctl.Flags("keygen", keygenUsage, keygenAbout, keygenExamples, stderr)
	store := fs.String("store", "", "the store `DIR` whose origin the key is for (read from its STORE file)")
	origin := fs.String("origin", "", "the origin `NAME` to sign as, instead of --store (continuum-<16 hex digits>)")
	out := fs.String("out", "", "write the signing key to `FILE` and the public key to FILE.pub (required)")
	asJSON := fs.Bool("json", false, "print the origin and the two file names as JSON")
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) != 0:
		return cli.UsageErr(fs, stderr, "unexpected argument %q (the store is --store DIR)", pos[0])
	case (*store == "") == (*origin == ""):
		return cli.UsageErr(fs, stderr, "want exactly one of --store and --origin")
	case *out == "":
		return cli.UsageErr(fs, stderr, "--out is required")
	}
	name := *origin
	if *store != "" {
		var err error
		if name, err = engine.StoreOrigin(*store, nil); err != nil {
			return ctl.Fail(stderr, "keygen", err)
		}
	} else if !strings.HasPrefix(name, chain.OriginPrefix) {
		return cli.UsageErr(fs, stderr, "--origin %q is not an origin: it starts with %q (see DB.Origin)", name, chain.OriginPrefix)
	}
	pubName := *out + ".pub"
	if err := writeKeyPair(name, *out, pubName); err != nil {
		return ctl.Fail(stderr, "keygen", err)
	}
	if *asJSON {
		return done(stderr, "keygen", writeJSON(stdout, keygenJSON{Origin: name, SigningKey: *out, PublicKey: pubName}))
	}
	fmt.Fprintf(stdout, "origin       %s\n", name)
	fmt.Fprintf(stdout, "signing key  %s (secret: keep it outside the store; engine.Options.SigningKey)\n", *out)
	fmt.Fprintf(stdout, "public key   %s (for continuumctl verify --pubkey)\n", pubName)
	return cli.ExitOK
}

// writeKeyPair generates a key and writes its signing key file to keyName
// and its public key file to pubName, both under origin. Each file is made
// durable before either is renamed into place, and neither replaces an
// existing file: a crash leaves both files, neither, or only the signing
// key (which keygen never overwrites, so it is never lost).
func writeKeyPair(origin, keyName, pubName string) error {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("generate a key: %w", err)
	}
	skey, err := chain.MarshalSigningKey(origin, priv)
	if err != nil {
		return fmt.Errorf("origin %q: %w", origin, err)
	}
	vkey, err := chain.MarshalPublicKey(origin, pub)
	if err != nil {
		return fmt.Errorf("origin %q: %w", origin, err)
	}
	comment := fmt.Sprintf("# continuumctl keygen: %%s of origin %s\n", origin)
	skey = append(fmt.Appendf(nil, comment, "signing key (secret)"), skey...)
	vkey = append(fmt.Appendf(nil, comment, "public key"), vkey...)

	for _, n := range []string{keyName, pubName} {
		if _, err := os.Lstat(n); err == nil {
			return fmt.Errorf("%s exists: keygen never replaces a key file; remove it or choose another --out", n)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	tmpKey, err := createTemp(keyName, skey)
	if err != nil {
		return err
	}
	tmpPub, err := createTemp(pubName, vkey)
	if err != nil {
		os.Remove(tmpKey)
		return err
	}
	if err := publish(tmpKey, keyName, true); err != nil {
		os.Remove(tmpPub)
		return keyExists(err, keyName)
	}
	if err := publish(tmpPub, pubName, true); err != nil {
		return keyExists(err, pubName)
	}
	return syncDir(filepath.Dir(keyName)) // FILE.pub is in the same directory
}

func keyExists(err error, name string) error {
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists: keygen never replaces a key file; remove it or choose another --out", name)
	}
	return err
}
