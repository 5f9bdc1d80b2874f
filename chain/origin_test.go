package chain_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"golang.org/x/mod/sumdb/note"
)

const originStoreID = "00112233445566778899aabbccddeeff"

func TestOriginName(t *testing.T) {
	if got, want := chain.OriginName(originStoreID), "continuum-0011223344556677"; got != want {
		t.Errorf("OriginName = %q, want %q", got, want)
	}
	if got := chain.OriginName("short"); got != "continuum-short" {
		t.Errorf("OriginName(short) = %q", got)
	}
}

// TestPublicKeyFileName: the public key file carries its origin, which
// ParsePublicKeyFile returns; ParsePublicKey reads the same key.
func TestPublicKeyFileName(t *testing.T) {
	s, pub := testSigner(t, chain.OriginName(originStoreID), 3)
	b, err := chain.MarshalPublicKey(s.Name(), pub)
	if err != nil {
		t.Fatal(err)
	}
	name, key, err := chain.ParsePublicKeyFile(b)
	if err != nil || name != s.Name() || !key.Equal(pub) {
		t.Fatalf("ParsePublicKeyFile = %q, %x, %v; want %q, %x", name, key, err, s.Name(), pub)
	}
	if k, err := chain.ParsePublicKey(b); err != nil || !k.Equal(pub) {
		t.Fatalf("ParsePublicKey = %x, %v", k, err)
	}
	if _, _, err := chain.ParsePublicKeyFile([]byte("# nothing\n")); !errors.Is(err, chain.ErrParse) {
		t.Errorf("empty key file: %v, want ErrParse", err)
	}
}

func TestSignerNames(t *testing.T) {
	s, _ := testSigner(t, "continuum-abc", 1)
	c := chain.Checkpoint{StoreID: "s", RunID: "r", Seq: 3}
	signed, err := s.SignCheckpoint(c)
	if err != nil {
		t.Fatal(err)
	}
	if names, err := chain.SignerNames(signed); err != nil || !slices.Equal(names, []string{"continuum-abc"}) {
		t.Errorf("SignerNames(signed) = %q, %v", names, err)
	}
	if names, err := chain.SignerNames(chain.MarshalCheckpoint(c)); err != nil || len(names) != 0 {
		t.Errorf("SignerNames(unsigned) = %q, %v", names, err)
	}
	if _, err := chain.SignerNames([]byte("no newline")); !errors.Is(err, chain.ErrParse) {
		t.Errorf("SignerNames(garbage): %v, want ErrParse", err)
	}
}

// TestVerifyOrigin: a key named for another origin fails with
// KindKeyOrigin, saying whose key it is; the right key under the store's
// origin verifies; the right key bytes under another signer name do not
// count as a signature of this store.
func TestVerifyOrigin(t *testing.T) {
	origin := chain.OriginName(originStoreID)
	s, pub := testSigner(t, origin, 7)
	f := fixture{storeID: originStoreID, runs: []string{"a"}, records: 8, every: 4, signer: s, seed: 5}
	es := f.build(t)

	if r := feed(t, chain.VerifyOptions{PublicKey: pub, Origin: origin}, es); !r.OK || len(r.Warnings) != 0 {
		t.Fatalf("the store's own key: ok %v, failures %v, warnings %v", r.OK, r.Failures, r.Warnings)
	}

	other := chain.OriginName("ffeeddccbbaa99887766554433221100")
	r := feed(t, chain.VerifyOptions{PublicKey: pub, Origin: other}, es)
	var found *chain.Failure
	for i := range r.Failures {
		if r.Failures[i].Kind == chain.KindKeyOrigin {
			found = &r.Failures[i]
		}
	}
	if r.OK || found == nil {
		t.Fatalf("a key of origin %s: ok %v, failures %v; want a key-origin failure", other, r.OK, r.Failures)
	}
	for _, want := range []string{other, origin, "another store"} {
		if !strings.Contains(found.Detail, want) {
			t.Errorf("key-origin detail %q does not say %q", found.Detail, want)
		}
	}

	// Signed under another name with this store's key bytes: with Origin
	// set, not a signature of this store.
	renamed, _ := testSigner(t, "continuum", 7)
	g := f
	g.signer = renamed
	r = feed(t, chain.VerifyOptions{PublicKey: pub, Origin: origin}, g.build(t))
	if r.OK || r.Failures[0].Kind != chain.KindBadSignature {
		t.Fatalf("signatures under another name: ok %v, failures %v; want bad-signature", r.OK, r.Failures)
	}
	if r := feed(t, chain.VerifyOptions{PublicKey: pub}, g.build(t)); !r.OK {
		t.Fatalf("without Origin, any name: failures %v", r.Failures)
	}
}

// TestUnanchoredWording: the unanchored-tail warning says what the
// latest checkpoint is, in inspect's words (checkpoint at seq N, signed or
// unsigned), and why it does not anchor the tail.
func TestUnanchoredWording(t *testing.T) {
	s, pub := testSigner(t, "continuum-test", 1)
	for _, tc := range []struct {
		name   string
		signer *chain.Signer
		keep   uint64
		opts   chain.VerifyOptions
		want   string
	}{
		{"signed, no key", s, 8, chain.VerifyOptions{}, "records 1..10 are not covered by a verified checkpoint: the latest checkpoint at seq 8, signed, was not verified (no public key given)"},
		{"unsigned, no key", nil, 8, chain.VerifyOptions{}, "the latest checkpoint at seq 8, unsigned, was not verified"},
		{"unsigned, key", nil, 8, chain.VerifyOptions{PublicKey: pub}, ""}, // bad-signature failures instead
		// Within the allowance of unsigned atoms, a tail is a warning.
		{"signed, key, tail", s, 8, chain.VerifyOptions{PublicKey: pub, UnsignedTail: 2}, "records 9..10 are not covered by a verified checkpoint: the last verified checkpoint is at seq 8"},
		{"no checkpoint", nil, 0, chain.VerifyOptions{}, "records 1..10 are not covered by a verified checkpoint: the run has no checkpoint yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fixture{storeID: "s", runs: []string{"a"}, records: 10, every: 4, signer: tc.signer, seed: 2}
			// Keep the checkpoints up to seq tc.keep: the records after it
			// are the tail. Store heads go too, so that only checkpoints
			// anchor.
			var es []entry
			for _, e := range f.build(t) {
				if e.kind == eStoreHead || e.kind == eCheckpoint && e.seq > tc.keep {
					continue
				}
				es = append(es, e)
			}
			r := feed(t, tc.opts, es)
			var detail string
			for _, w := range r.Warnings {
				if w.Kind == chain.KindUnanchoredTail {
					detail = w.Detail
				}
			}
			if tc.want == "" {
				if detail != "" {
					t.Errorf("unexpected unanchored-tail warning %q", detail)
				}
				return
			}
			if !strings.Contains(detail, tc.want) {
				t.Errorf("unanchored-tail detail %q, want it to contain %q", detail, tc.want)
			}
		})
	}
}

// TestSigningKeyFile: a signing key file round-trips, agrees with the
// public key file and with note.GenerateKey's format, and a damaged one is
// an error.
func TestSigningKeyFile(t *testing.T) {
	s, pub := testSigner(t, chain.OriginName(originStoreID), 9)
	_, priv := testKey(9)
	b, err := chain.MarshalSigningKey(s.Name(), priv)
	if err != nil {
		t.Fatal(err)
	}
	name, key, err := chain.ParseSigningKey(b)
	if err != nil || name != s.Name() || !key.Equal(priv) {
		t.Fatalf("ParseSigningKey = %q, %v; want %q and the key", name, err, s.Name())
	}
	if _, err := note.NewSigner(strings.TrimSpace(string(b))); err != nil {
		t.Errorf("note.NewSigner rejects the file: %v", err)
	}
	pb, _ := chain.MarshalPublicKey(name, pub)
	vkey := strings.TrimSpace(string(pb))
	if _, err := note.NewVerifier(vkey); err != nil || !strings.HasPrefix(strings.TrimSpace(string(b)), "PRIVATE+KEY+"+vkey[:strings.LastIndex(vkey, "+")]) {
		t.Errorf("signing key %q and public key %q disagree on name or hash (%v)", b, pb, err)
	}
	damaged := []byte(strings.Replace(string(b), "+A", "+B", 1))
	if _, _, err := chain.ParseSigningKey(damaged); !errors.Is(err, chain.ErrParse) {
		t.Errorf("damaged key file: %v, want ErrParse", err)
	}
	if _, _, err := chain.ParseSigningKey(append(b, b...)); !errors.Is(err, chain.ErrParse) {
		t.Errorf("two keys: %v, want ErrParse", err)
	}
}
