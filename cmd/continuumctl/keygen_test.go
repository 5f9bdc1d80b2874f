package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

// TestKeygenSignsAStore follows the documented path: create the store,
// make its key with keygen --store, write runs signed with it, and verify
// --strict with the public key. Both files are 0600 and name the store's
// origin; keygen never replaces a key file.
func TestKeygenSignsAStore(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "store")
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	origin := db.Origin()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	keyFile := filepath.Join(tmp, "agent.key")
	code, out, errOut := runCLI("keygen", "--store", dir, "--out", keyFile, "--json")
	if code != cli.ExitOK {
		t.Fatalf("keygen: exit %d, stderr %s", code, errOut)
	}
	var got keygenJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("keygen --json: %v\n%s", err, out)
	}
	if want := (keygenJSON{Origin: origin, SigningKey: keyFile, PublicKey: keyFile + ".pub"}); got != want {
		t.Errorf("keygen --json = %+v, want %+v", got, want)
	}
	for _, f := range []string{keyFile, keyFile + ".pub"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(tmp, ".*tmp-*")); len(leftovers) != 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	name, key, err := chain.ParseSigningKey(b)
	if err != nil || name != origin {
		t.Fatalf("signing key file: origin %q, %v; want %q", name, err, origin)
	}
	pb, _ := os.ReadFile(keyFile + ".pub")
	pubName, pub, err := chain.ParsePublicKeyFile(pb)
	if err != nil || pubName != origin || !pub.Equal(key.Public()) {
		t.Fatalf("public key file: origin %q, %v; want %q and the signing key's public half", pubName, err, origin)
	}

	db, err = engine.Open(dir, &engine.Options{SigningKey: key})
	if err != nil {
		t.Fatal(err)
	}
	run, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		a, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Commit(ctx, new(frame.Delta).AppendScratch([]byte{byte('a' + i)})); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	code, v := verifyJSONOut(t, dir, "--strict", "--pubkey", keyFile+".pub")
	if code != cli.ExitOK || v.CheckpointsVerified == 0 || len(v.Warnings) != 0 || v.Signing != "" {
		t.Errorf("verify --strict with keygen's key: exit %d, %d verified, warnings %v, failures %v, signing %q",
			code, v.CheckpointsVerified, kinds(v.Warnings), kinds(v.Failures), v.Signing)
	}

	// keygen never replaces a key.
	code, _, errOut = runCLI("keygen", "--origin", origin, "--out", keyFile)
	if code != cli.ExitUsage || !strings.Contains(errOut, keyFile+" exists") {
		t.Errorf("keygen over an existing key: exit %d, stderr %q", code, errOut)
	}
	if b2, _ := os.ReadFile(keyFile); string(b2) != string(b) {
		t.Error("keygen changed an existing key file")
	}
}

// TestVerifyKeyOfAnotherOrigin: a public key file of another origin fails
// verify with a message that names both origins, even when the key bytes
// are the store's own (a key file written under a guessed name).
func TestVerifyKeyOfAnotherOrigin(t *testing.T) {
	dir := fixture(t, "signed")
	origin := chain.OriginName(storeID(t, dir))
	tmp := t.TempDir()

	other := filepath.Join(tmp, "other.key")
	if code, _, errOut := runCLI("keygen", "--origin", "continuum-ffffffffffffffff", "--out", other); code != cli.ExitOK {
		t.Fatalf("keygen --origin: exit %d, %s", code, errOut)
	}
	guessed := filepath.Join(tmp, "guessed.pub")
	b, err := chain.MarshalPublicKey("continuum", ed25519.NewKeyFromSeed(testSigningSeed).Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(guessed, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, file, keyOrigin string }{
		{"another store's key", other + ".pub", "continuum-ffffffffffffffff"},
		{"the store's key under a guessed name", guessed, "continuum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI("verify", "--pubkey", tc.file, dir)
			if code != cli.ExitCorrupt {
				t.Errorf("exit %d, want 1; stderr %s", code, errOut)
			}
			for _, want := range []string{"key-origin", `"` + tc.keyOrigin + `"`, `"` + origin + `"`, "another store"} {
				if !strings.Contains(out, want) {
					t.Errorf("verify does not say %q:\n%s", want, out)
				}
			}
			_, v := verifyJSONOut(t, "--pubkey", tc.file, dir)
			if !slices.Contains(kinds(v.Failures), "key-origin") {
				t.Errorf("--json failures %v, want key-origin", kinds(v.Failures))
			}
		})
	}
}

// TestVerifyStrictNeverSigned: --strict on a store written without a key
// says that the store was never signed and what to do, rather than only
// counting warnings; on a signed store without --pubkey it asks for the key.
func TestVerifyStrictNeverSigned(t *testing.T) {
	code, out, _ := runCLI("verify", "--strict", fixture(t, "clean"))
	if code != cli.ExitCorrupt || !strings.Contains(out, "signing: the store was never signed") ||
		!strings.Contains(out, "continuumctl keygen") {
		t.Errorf("unsigned store, --strict: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI("verify", "--strict", fixture(t, "signed"))
	if code != cli.ExitCorrupt || !strings.Contains(out, "give --pubkey FILE") || strings.Contains(out, "never signed") {
		t.Errorf("signed store without --pubkey, --strict: exit %d\n%s", code, out)
	}
}
