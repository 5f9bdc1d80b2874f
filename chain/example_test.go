package chain_test

import (
	"crypto/ed25519"
	"fmt"

	"github.com/continuumdb/continuum/chain"
)

// Example chains three records, signs a final checkpoint, then verifies the
// store with the public key, as `continuumctl verify --pubkey` does.
func Example() {
	pub, priv, _ := ed25519.GenerateKey(nil)
	signer, _ := chain.NewSigner("example-store", priv)
	h, _ := chain.NewHasher(nil)

	nonce, _ := chain.NewNonce()
	head := h.Genesis("run-1", nonce)
	payloads := [][]byte{[]byte("think"), []byte("act"), []byte("observe")}
	heads := make([]chain.Hash, len(payloads))
	for i, p := range payloads {
		head = h.Link("run-1", uint64(i+1), head, p)
		heads[i] = head
	}
	cp, _ := signer.SignCheckpoint(chain.Checkpoint{StoreID: "store-1", RunID: "run-1", Seq: 3, Head: head, Final: true})

	v, _ := chain.NewVerifier(chain.VerifyOptions{PublicKey: pub})
	v.Store("store-1")
	v.Run("run-1", nonce, "log:0")
	for i, p := range payloads {
		v.Record("run-1", uint64(i+1), p, heads[i], fmt.Sprintf("log:%d", i+1))
	}
	v.Checkpoint(cp, "log:4")
	r := v.Finish()
	fmt.Println(r.OK, r.Records, r.CheckpointsVerified, len(r.Warnings))

	// The same store with the second record edited.
	v, _ = chain.NewVerifier(chain.VerifyOptions{PublicKey: pub})
	v.Store("store-1")
	v.Run("run-1", nonce, "log:0")
	for i, p := range payloads {
		if i == 1 {
			p = []byte("act!")
		}
		v.Record("run-1", uint64(i+1), p, heads[i], fmt.Sprintf("log:%d", i+1))
	}
	v.Checkpoint(cp, "log:4")
	r = v.Finish()
	fmt.Println(r.OK, r.Failures[0].Kind, r.Failures[0].Seq, r.Failures[0].Location)
	// Output:
	// true 3 1 0
	// false hash-mismatch 2 log:2
}

// A store's key files name its origin, the signer name the engine signs
// its checkpoints under: the signing key file (secret) and the public key
// file that verify takes, as `continuumctl keygen` writes them.
func ExampleMarshalSigningKey() {
	storeID := "00112233445566778899aabbccddeeff" // DB.StoreID of the store
	origin := chain.OriginName(storeID)
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // use ed25519.GenerateKey
	skey, _ := chain.MarshalSigningKey(origin, priv)
	vkey, _ := chain.MarshalPublicKey(origin, priv.Public().(ed25519.PublicKey))

	name, key, _ := chain.ParseSigningKey(skey) // for engine.Options.SigningKey
	pubName, pub, _ := chain.ParsePublicKeyFile(vkey)
	fmt.Println(origin, name == origin, pubName == origin, pub.Equal(key.Public()))
	fmt.Print(string(vkey))
	// Output:
	// continuum-0011223344556677 true true true
	// continuum-0011223344556677+2aa6d410+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop
}
