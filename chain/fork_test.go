package chain_test

import (
	"crypto/ed25519"
	"fmt"
	"testing"

	"github.com/continuumdb/continuum/chain"
)

// forkFixture is a parent run of 5 records and a run forked from it at
// seq at, with 3 records of its own; each final checkpoint is signed.
type forkFixture struct {
	pub                       ed25519.PublicKey
	nonce, forkNonce          chain.Nonce
	heads, forkHeads          []chain.Hash // heads[i] = h(i+1); forkHeads[i] = h(at+1+i)
	parentCkpt, forkCkpt      []byte
	at                        uint64
	payloads                  [][]byte
	forkGenesis, parentHeadAt chain.Hash
}

func newForkFixture(t *testing.T, at uint64) *forkFixture {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(nil)
	signer, err := chain.NewSigner("s", priv)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := chain.NewHasher(nil)
	f := &forkFixture{pub: pub, at: at}
	f.nonce, _ = chain.NewNonce()
	f.forkNonce, _ = chain.NewNonce()
	head := h.Genesis("parent", f.nonce)
	f.parentHeadAt = head
	for i := 1; i <= 5; i++ {
		p := []byte(fmt.Sprintf("parent %d", i))
		f.payloads = append(f.payloads, p)
		head = h.Link("parent", uint64(i), head, p)
		f.heads = append(f.heads, head)
		if uint64(i) == at {
			f.parentHeadAt = head
		}
	}
	f.parentCkpt, _ = signer.SignCheckpoint(chain.Checkpoint{StoreID: "st", RunID: "parent", Seq: 5, Head: head, Final: true})
	f.forkGenesis = h.ForkGenesis("fork", f.forkNonce, "parent", at, f.parentHeadAt)
	head = f.forkGenesis
	for i := 0; i < 3; i++ {
		head = h.Link("fork", at+1+uint64(i), head, []byte(fmt.Sprintf("fork %d", i)))
		f.forkHeads = append(f.forkHeads, head)
	}
	f.forkCkpt, _ = signer.SignCheckpoint(chain.Checkpoint{StoreID: "st", RunID: "fork", Seq: at + 3, Head: head, Final: true})
	return f
}

// verify feeds the fixture in log order, the fork's creation record naming
// parentHead and at (the fixture's unless changed).
func (f *forkFixture) verify(t *testing.T, at uint64, parentHead chain.Hash) *chain.Report {
	t.Helper()
	v, err := chain.NewVerifier(chain.VerifyOptions{PublicKey: f.pub})
	if err != nil {
		t.Fatal(err)
	}
	v.Store("st")
	v.Run("parent", f.nonce, "log:0")
	for i, p := range f.payloads {
		v.Record("parent", uint64(i+1), p, f.heads[i], fmt.Sprintf("log:p%d", i+1))
	}
	v.Checkpoint(f.parentCkpt, "log:pc")
	v.Fork("fork", f.forkNonce, "parent", at, parentHead, "log:fork")
	for i := range f.forkHeads {
		v.Record("fork", f.at+1+uint64(i), []byte(fmt.Sprintf("fork %d", i)), f.forkHeads[i], fmt.Sprintf("log:f%d", i))
	}
	v.Checkpoint(f.forkCkpt, "log:fc")
	return v.Finish()
}

// TestForkChain: a fork's chain starts at its fork point with its fork
// genesis and verifies, signed, to its end, at every fork point (0, the
// middle, the parent's last seq); a fork record naming another parent head
// or fork point no longer links at the fork's first record.
func TestForkChain(t *testing.T) {
	for _, at := range []uint64{0, 3, 5} {
		t.Run(fmt.Sprint("at ", at), func(t *testing.T) {
			f := newForkFixture(t, at)
			r := f.verify(t, at, f.parentHeadAt)
			if !r.OK || len(r.Warnings) != 0 {
				t.Fatalf("intact lineage: OK %v, failures %v, warnings %v", r.OK, r.Failures, r.Warnings)
			}
			for _, rr := range r.Runs {
				if rr.RunID == "fork" && (rr.LastSeq != at+3 || !rr.Ended || rr.UnsignedTail != 0 || rr.Head != f.forkHeads[2]) {
					t.Fatalf("fork's report %+v", rr)
				}
			}
			other := f.parentHeadAt
			other[0] ^= 1
			for name, r := range map[string]*chain.Report{
				"another parent head": f.verify(t, at, other),
				"another fork point":  f.verify(t, at+1, f.parentHeadAt),
			} {
				if r.OK || len(r.Failures) == 0 || r.Failures[0].RunID != "fork" || r.Failures[0].Seq != at+1 {
					t.Errorf("%s: OK %v, failures %v; want the fork's record %d reported", name, r.OK, r.Failures, at+1)
				}
			}
		})
	}
}

// TestForkGenesisBindsEveryField: changing any input of ForkGenesis
// changes it.
func TestForkGenesisBindsEveryField(t *testing.T) {
	h, _ := chain.NewHasher(nil)
	base := h.ForkGenesis("f", chain.Nonce{1}, "p", 7, chain.Hash{2})
	for name, g := range map[string]chain.Hash{
		"run":         h.ForkGenesis("g", chain.Nonce{1}, "p", 7, chain.Hash{2}),
		"nonce":       h.ForkGenesis("f", chain.Nonce{3}, "p", 7, chain.Hash{2}),
		"parent":      h.ForkGenesis("f", chain.Nonce{1}, "q", 7, chain.Hash{2}),
		"at":          h.ForkGenesis("f", chain.Nonce{1}, "p", 8, chain.Hash{2}),
		"parent head": h.ForkGenesis("f", chain.Nonce{1}, "p", 7, chain.Hash{4}),
		"split":       h.ForkGenesis("fp", chain.Nonce{1}, "", 7, chain.Hash{2}),
	} {
		if g == base {
			t.Errorf("ForkGenesis ignores the %s", name)
		}
	}
	if base == h.Genesis("f", chain.Nonce{1}) {
		t.Error("a fork genesis equals a genesis")
	}
}
