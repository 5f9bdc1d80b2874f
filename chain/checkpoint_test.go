package chain_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/google/go-cmp/cmp"
)

// testKey returns a deterministic key pair from a one-byte seed.
func testKey(seed byte) (ed25519.PublicKey, ed25519.PrivateKey) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return priv.Public().(ed25519.PublicKey), priv
}

func testSigner(t testing.TB, name string, seed byte) (*chain.Signer, ed25519.PublicKey) {
	t.Helper()
	pub, priv := testKey(seed)
	s, err := chain.NewSigner(name, priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, pub
}

var weirdIDs = []string{"", "run-1", "with space", "quote\"and\\slash", "new\nline", "\n\n", "tab\t", "\x00\xff invalid utf8", "日本語", "— em dash", "+plus+", "\u2028sep"}

func TestCheckpointRoundTrip(t *testing.T) {
	s, pub := testSigner(t, "continuum-test", 1)
	for _, id := range weirdIDs {
		for _, final := range []bool{false, true} {
			c := chain.Checkpoint{StoreID: "store " + id, RunID: id, Seq: 1<<64 - 1, Head: chain.Hash{1, 2, 3}, Final: final}
			un := chain.MarshalCheckpoint(c)
			got, err := chain.ParseCheckpoint(un)
			if err != nil {
				t.Fatalf("unsigned %q: %v\n%s", id, err, un)
			}
			if diff := cmp.Diff(c, got); diff != "" {
				t.Fatalf("unsigned %q round trip (-want +got):\n%s", id, diff)
			}
			signed, err := s.SignCheckpoint(c)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(signed, un) {
				t.Fatalf("signed form does not start with the unsigned text:\n%s", signed)
			}
			if got, err = chain.ParseCheckpoint(signed); err != nil || got != c {
				t.Fatalf("signed %q: %v %+v", id, err, got)
			}
			if got, err = chain.VerifyCheckpoint(signed, pub); err != nil || got != c {
				t.Fatalf("verify %q: %v %+v", id, err, got)
			}
		}
	}
}

func TestCheckpointSignatures(t *testing.T) {
	s, pub := testSigner(t, "good", 1)
	evil, _ := testSigner(t, "good", 2) // same name, other key
	otherPub, _ := testKey(3)
	c := chain.Checkpoint{StoreID: "st", RunID: "r", Seq: 4, Head: chain.Hash{9}}
	good, _ := s.SignCheckpoint(c)
	forgedKey, _ := evil.SignCheckpoint(c)
	edited := bytes.Replace(good, []byte("seq 4"), []byte("seq 5"), 1)
	cases := []struct {
		name string
		b    []byte
		pub  ed25519.PublicKey
		want error
	}{
		{"good", good, pub, nil},
		{"other public key", good, otherPub, chain.ErrBadSignature},
		{"signed by another key", forgedKey, pub, chain.ErrBadSignature},
		{"text edited after signing", edited, pub, chain.ErrBadSignature},
		{"unsigned", chain.MarshalCheckpoint(c), pub, chain.ErrBadSignature},
		{"garbage", []byte("nope"), pub, chain.ErrParse},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := chain.VerifyCheckpoint(tc.b, tc.pub)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestParseCheckpointErrors(t *testing.T) {
	good := string(chain.MarshalCheckpoint(chain.Checkpoint{StoreID: "s", RunID: "r", Seq: 12, Head: chain.Hash{0xaa}}))
	h := (chain.Hash{0xaa}).String()
	cases := []struct {
		name, in, where string
	}{
		{"empty", "", "newline"},
		{"no final newline", strings.TrimSuffix(good, "\n"), "newline"},
		{"control char", strings.Replace(good, "r\"", "r\x01\"", 1), "control character"},
		{"wrong header", strings.Replace(good, "v1", "v2", 1), "line 1"},
		{"missing line", "continuum checkpoint v1\nstore \"s\"\n", "lines"},
		{"unquoted store", strings.Replace(good, `store "s"`, "store s", 1), "line 2"},
		{"non-canonical quoting", strings.Replace(good, `run "r"`, `run "\x72"`, 1), "line 3"},
		{"seq leading zero", strings.Replace(good, "seq 12", "seq 012", 1), "line 4"},
		{"seq overflow", strings.Replace(good, "seq 12", "seq 18446744073709551616", 1), "line 4"},
		{"seq negative", strings.Replace(good, "seq 12", "seq -1", 1), "line 4"},
		{"upper-case head", strings.Replace(good, h, strings.ToUpper(h), 1), "line 5"},
		{"short head", strings.Replace(good, h, h[:10], 1), "line 5"},
		{"bad final", good + "finale\n", "line 6"},
		{"extra line", good + "final\nmore\n", "lines"},
		{"store head instead", string(chain.MarshalStoreHead(chain.StoreHead{StoreID: "s"})), "line 1"},
		{"bad signature block", good + "\nnot a signature\n", "malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := chain.ParseCheckpoint([]byte(tc.in))
			if !errors.Is(err, chain.ErrParse) || !strings.Contains(err.Error(), tc.where) {
				t.Fatalf("err = %v, want ErrParse mentioning %q", err, tc.where)
			}
		})
	}
}

func TestStoreHeadRoundTrip(t *testing.T) {
	s, pub := testSigner(t, "k", 1)
	var runs []chain.RunHead
	sorted := append([]string(nil), weirdIDs...)
	for i := range sorted {
		for j := i + 1; j < len(sorted); j++ {
			if sorted[j] < sorted[i] {
				sorted[i], sorted[j] = sorted[j], sorted[i]
			}
		}
	}
	for i, id := range sorted {
		runs = append(runs, chain.RunHead{RunID: id, Seq: uint64(i * 1000), Head: chain.Hash{byte(i)}})
	}
	for _, h := range []chain.StoreHead{{StoreID: "empty"}, {StoreID: "s p a c e", Runs: runs}} {
		got, err := chain.ParseStoreHead(chain.MarshalStoreHead(h))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(h, got); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
		signed, err := s.SignStoreHead(h)
		if err != nil {
			t.Fatal(err)
		}
		if got, err = chain.VerifyStoreHead(signed, pub); err != nil || !cmp.Equal(h, got) {
			t.Fatalf("verify: %v %+v", err, got)
		}
	}
	unsorted := chain.StoreHead{StoreID: "s", Runs: []chain.RunHead{{RunID: "b"}, {RunID: "a"}}}
	if _, err := s.SignStoreHead(unsorted); !errors.Is(err, chain.ErrParse) {
		t.Fatalf("signing unsorted runs: err = %v", err)
	}
	if _, err := chain.ParseStoreHead(chain.MarshalStoreHead(unsorted)); !errors.Is(err, chain.ErrParse) || !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("parsing unsorted runs: err = %v", err)
	}
	dup := chain.StoreHead{StoreID: "s", Runs: []chain.RunHead{{RunID: "a"}, {RunID: "a"}}}
	if _, err := chain.ParseStoreHead(chain.MarshalStoreHead(dup)); !errors.Is(err, chain.ErrParse) {
		t.Fatalf("parsing repeated run: err = %v", err)
	}
	for _, bad := range []string{
		"continuum store-head v1\n",
		"continuum store-head v1\nstore \"s\"\nrun \"a\" 1\n",
		"continuum store-head v1\nstore \"s\"\nrun \"a\"1 " + (chain.Hash{}).String() + "\n",
		"continuum store-head v1\nstore \"s\"\nrun a 1 " + (chain.Hash{}).String() + "\n",
		"continuum store-head v1\nstore \"s\"\nrun \"a\" x " + (chain.Hash{}).String() + "\n",
		"continuum store-head v1\nstore \"s\"\nrun \"a\" 1 " + (chain.Hash{}).String() + " extra\n",
	} {
		if _, err := chain.ParseStoreHead([]byte(bad)); !errors.Is(err, chain.ErrParse) {
			t.Errorf("ParseStoreHead(%q) err = %v, want ErrParse", bad, err)
		}
	}
}

func TestSignerAndPublicKeyFile(t *testing.T) {
	pub, priv := testKey(5)
	for _, name := range []string{"", "has space", "a+b"} {
		if _, err := chain.NewSigner(name, priv); !errors.Is(err, chain.ErrSignerName) {
			t.Errorf("NewSigner(%q) err = %v, want ErrSignerName", name, err)
		}
	}
	if _, err := chain.NewSigner("ok", priv[:10]); !errors.Is(err, chain.ErrPrivateKey) {
		t.Errorf("short private key: err = %v", err)
	}
	s, err := chain.NewSigner("continuum.example/store", priv)
	if err != nil {
		t.Fatal(err)
	}
	if !s.PublicKey().Equal(pub) || s.Name() != "continuum.example/store" {
		t.Fatal("signer reports another key or name")
	}
	file, err := chain.MarshalPublicKey(s.Name(), pub)
	if err != nil {
		t.Fatal(err)
	}
	got, err := chain.ParsePublicKey(append([]byte("# key of the audit trail\n\n"), file...))
	if err != nil || !got.Equal(pub) {
		t.Fatalf("ParsePublicKey: %v %x", err, got)
	}
	if _, err := chain.MarshalPublicKey("x", pub[:5]); !errors.Is(err, chain.ErrPublicKey) {
		t.Errorf("short public key: err = %v", err)
	}
	line := strings.TrimSpace(string(file))
	damaged := []byte(line[:len(line)-3] + "AAA\n")
	for name, b := range map[string][]byte{
		"empty":    nil,
		"comments": []byte("# nothing\n"),
		"two keys": append(append([]byte{}, file...), file...),
		"damaged":  damaged,
		"raw":      []byte("not a key\n"),
	} {
		if _, err := chain.ParsePublicKey(b); !errors.Is(err, chain.ErrParse) {
			t.Errorf("%s: err = %v, want ErrParse", name, err)
		}
	}
}

func TestStateJSON(t *testing.T) {
	s := chain.State{StoreID: "st\"ore", Runs: map[string]chain.RunHead{
		"b": {RunID: "b", Seq: 2, Head: chain.Hash{2}},
		"a": {RunID: "a", Seq: 1, Head: chain.Hash{1}},
		"":  {RunID: "", Seq: 0, Head: chain.Hash{}},
	}}
	var buf bytes.Buffer
	if err := chain.WriteState(&buf, s); err != nil {
		t.Fatal(err)
	}
	first := buf.String()
	for i := 0; i < 5; i++ { // map order must not leak into the bytes
		var b2 bytes.Buffer
		_ = chain.WriteState(&b2, s)
		if b2.String() != first {
			t.Fatalf("unstable output:\n%s\n%s", first, b2.String())
		}
	}
	want := `{"version":1,"store":"st\"ore","runs":[{"run":"","seq":0,"head":"` + (chain.Hash{}).String() +
		`"},{"run":"a","seq":1,"head":"` + (chain.Hash{1}).String() + `"},{"run":"b","seq":2,"head":"` + (chain.Hash{2}).String() + "\"}]}\n"
	if first != want {
		t.Fatalf("WriteState =\n%s\nwant\n%s", first, want)
	}
	got, err := chain.ReadState(strings.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	for _, bad := range []string{
		"", "{}", `{"version":2,"store":"s","runs":[]}`,
		`{"version":1,"store":"s","runs":[{"run":"a","seq":1,"head":"zz"}]}`,
		`{"version":1,"store":"s","runs":[{"run":"a","seq":1,"head":"` + (chain.Hash{}).String() + `"},{"run":"a","seq":1,"head":"` + (chain.Hash{}).String() + `"}]}`,
		`{"version":1,"store":"s","runs":[],"extra":1}`,
		`{"version":1,"store":"s","runs":[]} {}`,
		`{"version":1,"store":"s","runs":[]}}`,
	} {
		if _, err := chain.ReadState(strings.NewReader(bad)); !errors.Is(err, chain.ErrParse) {
			t.Errorf("ReadState(%q) err = %v, want ErrParse", bad, err)
		}
	}
	inconsistent := chain.State{Runs: map[string]chain.RunHead{"a": {RunID: "b"}}}
	if err := chain.WriteState(&buf, inconsistent); err == nil {
		t.Error("WriteState accepted a run stored under another id")
	}
}

func TestStoreHeadSet(t *testing.T) {
	var h chain.StoreHead
	for _, r := range []chain.RunHead{{RunID: "m", Seq: 1}, {RunID: "a", Seq: 1}, {RunID: "z", Seq: 1}, {RunID: "m", Seq: 2, Head: chain.Hash{2}}, {RunID: "", Seq: 7}} {
		h.Set(r)
	}
	want := []chain.RunHead{{RunID: "", Seq: 7}, {RunID: "a", Seq: 1}, {RunID: "m", Seq: 2, Head: chain.Hash{2}}, {RunID: "z", Seq: 1}}
	if diff := cmp.Diff(want, h.Runs); diff != "" {
		t.Fatalf("Runs (-want +got):\n%s", diff)
	}
	if _, err := chain.ParseStoreHead(chain.MarshalStoreHead(h)); err != nil {
		t.Fatalf("Set left runs unsorted: %v", err)
	}
}
