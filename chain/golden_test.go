package chain_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/continuumdb/continuum/chain"
)

var update = flag.Bool("update", false, "rewrite testdata/format_v1.golden")

// TestFormatGolden freezes every byte format of version 1 (format.go): the
// hashes of fixed inputs, checkpoint and store head texts with their
// Ed25519 signatures (deterministic), the public key file and the state
// JSON. A diff here means a format change, which needs a new version.
func TestFormatGolden(t *testing.T) {
	var b bytes.Buffer
	unkeyed, _ := chain.NewHasher(nil)
	keyed, _ := chain.NewHasher(bytes.Repeat([]byte{0x01}, chain.KeySize))
	nonce := chain.Nonce{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	for _, m := range []struct {
		name string
		h    *chain.Hasher
	}{{"unkeyed", unkeyed}, {"keyed 0x01*32", keyed}} {
		g := m.h.Genesis("run-1", nonce)
		h1 := m.h.Link("run-1", 1, g, []byte("hello"))
		h2 := m.h.Link("run-1", 2, h1, nil)
		fmt.Fprintf(&b, "# %s: h(0) of run-1, nonce 000102...0f\n%s\n", m.name, g)
		fmt.Fprintf(&b, "# %s: h(1), payload \"hello\"\n%s\n", m.name, h1)
		fmt.Fprintf(&b, "# %s: h(2), empty payload\n%s\n", m.name, h2)
	}
	s, pub := testSigner(t, "continuum-golden", 1)
	c := chain.Checkpoint{StoreID: "store-1", RunID: "run \"1\"\n", Seq: 2, Head: chain.Hash{0xab}, Final: true}
	signed, err := s.SignCheckpoint(c)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "# checkpoint, signed with the key of seed 0x01*32\n%s", signed)
	sh := chain.StoreHead{StoreID: "store-1", Runs: []chain.RunHead{{RunID: "a", Seq: 1, Head: chain.Hash{1}}, {RunID: "b c", Seq: 9, Head: chain.Hash{9}}}}
	signed, err = s.SignStoreHead(sh)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "# store head, same key\n%s", signed)
	pk, err := chain.MarshalPublicKey(s.Name(), pub)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "# public key file\n%s", pk)
	fmt.Fprintf(&b, "# trusted state\n")
	if err := chain.WriteState(&b, chain.State{StoreID: "store-1", Runs: map[string]chain.RunHead{"a": sh.Runs[0], "b c": sh.Runs[1]}}); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join("testdata", "format_v1.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatalf("version 1 formats changed; got:\n%s\nwant:\n%s", b.Bytes(), want)
	}
}
