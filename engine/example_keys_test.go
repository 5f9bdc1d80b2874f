package engine_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
)

// Signing a store: create it, make a key named for its origin, open it
// with Options.SigningKey from its first run on, and verify with the
// public key file. `continuumctl keygen --store DIR --out FILE` writes the
// two key files of steps 2 and 3 (chain.ParseSigningKey reads FILE);
// `continuumctl verify --pubkey FILE.pub DIR` is step 4.
func ExampleOptions_signingKey() {
	dir, err := os.MkdirTemp("", "continuum-signed")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store := filepath.Join(dir, "store")
	ctx := context.Background()

	// 1. Create the store: its origin derives from its id.
	db, err := engine.Open(store, nil)
	if err != nil {
		log.Fatal(err)
	}
	origin := db.Origin()
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}

	// 2. A key for it, and 3. its public key file, named for the origin.
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		log.Fatal(err)
	}
	pubFile, err := chain.MarshalPublicKey(origin, pub)
	if err != nil {
		log.Fatal(err)
	}

	// Every checkpoint and store head written from now on is signed.
	db, err = engine.Open(store, &engine.Options{SigningKey: priv})
	if err != nil {
		log.Fatal(err)
	}
	run, err := db.Run(ctx, "deploy-42")
	if err != nil {
		log.Fatal(err)
	}
	atom, err := run.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := atom.Commit(ctx, new(frame.Delta).SetObjective("deploy the service")); err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil { // Close writes a final signed checkpoint
		log.Fatal(err)
	}

	// 4. Verify with the public key, which comes from the store's owner,
	// never from the store.
	name, key, err := chain.ParsePublicKeyFile(pubFile)
	if err != nil {
		log.Fatal(err)
	}
	rep, err := engine.Verify(ctx, store, &engine.VerifyOptions{PublicKey: key, Origin: name})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("own key:", rep.OK, rep.CheckpointsVerified > 0, len(rep.Warnings))

	// A key file of another store's origin fails, and says so.
	rep, err = engine.Verify(ctx, store, &engine.VerifyOptions{PublicKey: key, Origin: "continuum-ffffffffffffffff"})
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range rep.Failures {
		if f.Kind == chain.KindKeyOrigin {
			fmt.Println("another origin:", rep.OK, f.Kind)
		}
	}
	// Output:
	// own key: true true 0
	// another origin: false key-origin
}

// The atom a crash interrupted: after a restart, Run.Interrupted lists
// its actions, the next Begin gives its seq again (Atom.Interrupted), and
// Do of an action whose certificate is durable returns the certified
// result without calling exec. Here the "crash" is a Close in the middle
// of the atom.
func ExampleRun_Interrupted() {
	dir, err := os.MkdirTemp("", "continuum-interrupted")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	calls := 0
	deploy := func(ctx context.Context, key string) ([]byte, error) {
		calls++
		return []byte(`{"deployed":"v2"}`), nil
	}
	act := ledger.Action{Tool: "deploy", Args: []byte(`{"service":"checkout"}`)}

	db, err := engine.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	run, _ := db.Run(ctx, "deploy-42")
	atom, _ := run.Begin(ctx)
	if _, err := atom.Do(ctx, act, deploy); err != nil {
		log.Fatal(err)
	}
	db.Close() // stopped before Commit

	db, err = engine.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	run, _ = db.Run(ctx, "deploy-42")
	seq, actions, err := run.Interrupted(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("interrupted seq %d: %d action %s, %s\n", seq, len(actions), actions[0].Tool, actions[0].Status)
	atom, _ = run.Begin(ctx)
	out, err := atom.Do(ctx, act, deploy)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("seq %d interrupted %v: %s, exec called %d time\n", atom.Seq(), atom.Interrupted(), out, calls)
	// Output:
	// interrupted seq 1: 1 action deploy, done
	// seq 1 interrupted true: {"deployed":"v2"}, exec called 1 time
}
