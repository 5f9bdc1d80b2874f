package chain_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/zeebo/blake3"
)

// reference computes h(seq) straight from the byte layout documented in
// format.go, independently of Hasher's pooled, header-buffered code.
func reference(key []byte, runID string, seq uint64, prev chain.Hash, payload []byte) chain.Hash {
	var h *blake3.Hasher
	if key == nil {
		h = blake3.NewDeriveKey(chain.ContextRecord)
	} else {
		var sub [32]byte
		blake3.DeriveKey(chain.ContextKeyed, key, sub[:])
		h, _ = blake3.NewKeyed(sub[:])
	}
	var in []byte
	in = append(in, 0x01)
	in = binary.BigEndian.AppendUint32(in, uint32(len(runID)))
	in = append(in, runID...)
	in = binary.BigEndian.AppendUint64(in, seq)
	in = append(in, prev[:]...)
	in = binary.BigEndian.AppendUint64(in, uint64(len(payload)))
	in = append(in, payload...)
	h.Write(in)
	var out chain.Hash
	copy(out[:], h.Sum(nil))
	return out
}

func referenceGenesis(runID string, nonce chain.Nonce) chain.Hash {
	h := blake3.NewDeriveKey(chain.ContextRecord)
	var in []byte
	in = append(in, 0x00)
	in = binary.BigEndian.AppendUint32(in, uint32(len(runID)))
	in = append(in, runID...)
	in = append(in, nonce[:]...)
	h.Write(in)
	var out chain.Hash
	copy(out[:], h.Sum(nil))
	return out
}

func TestLinkMatchesDocumentedFormat(t *testing.T) {
	key := bytes.Repeat([]byte{7}, chain.KeySize)
	big := bytes.Repeat([]byte("x"), 20000) // several BLAKE3 chunks
	prev := chain.Hash{1, 2, 3}
	cases := []struct {
		name    string
		key     []byte
		run     string
		seq     uint64
		payload []byte
	}{
		{"empty payload", nil, "run", 1, nil},
		{"small", nil, "r", 2, []byte("hello")},
		{"empty run id", nil, "", 3, []byte("p")},
		{"large payload", nil, "run-large", 1 << 40, big},
		{"keyed", key, "run", 1, []byte("hello")},
		{"keyed large", key, "run", 9, big},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := chain.NewHasher(c.key)
			if err != nil {
				t.Fatal(err)
			}
			got := h.Link(c.run, c.seq, prev, c.payload)
			if want := reference(c.key, c.run, c.seq, prev, c.payload); got != want {
				t.Fatalf("Link = %s, documented layout gives %s", got, want)
			}
		})
	}
	h, _ := chain.NewHasher(nil)
	n := chain.Nonce{9, 8, 7}
	if got, want := h.Genesis("run", n), referenceGenesis("run", n); got != want {
		t.Fatalf("Genesis = %s, documented layout gives %s", got, want)
	}
}

// TestLinkSeparatesEveryField changes one input at a time; each must change
// the hash, and ambiguous splits between run id and payload must not
// collide.
func TestLinkSeparatesEveryField(t *testing.T) {
	h, _ := chain.NewHasher(nil)
	k, _ := chain.NewHasher(bytes.Repeat([]byte{1}, 32))
	base := h.Link("run", 5, chain.Hash{1}, []byte("payload"))
	others := map[string]chain.Hash{
		"run id":  h.Link("run2", 5, chain.Hash{1}, []byte("payload")),
		"seq":     h.Link("run", 6, chain.Hash{1}, []byte("payload")),
		"prev":    h.Link("run", 5, chain.Hash{2}, []byte("payload")),
		"payload": h.Link("run", 5, chain.Hash{1}, []byte("payloaD")),
		"shorter": h.Link("run", 5, chain.Hash{1}, []byte("payloa")),
		"keyed":   k.Link("run", 5, chain.Hash{1}, []byte("payload")),
		"genesis": h.Genesis("run", chain.Nonce{}),
		"other key": func() chain.Hash {
			k2, _ := chain.NewHasher(bytes.Repeat([]byte{2}, 32))
			return k2.Link("run", 5, chain.Hash{1}, []byte("payload"))
		}(),
	}
	for name, o := range others {
		if o == base {
			t.Errorf("changing the %s does not change the hash", name)
		}
	}
	if h.Link("ab", 1, chain.Hash{}, []byte("c")) == h.Link("a", 1, chain.Hash{}, []byte("bc")) {
		t.Error("run id and payload boundaries collide")
	}
	if h.Genesis("r", chain.Nonce{1}) == h.Genesis("r", chain.Nonce{2}) {
		t.Error("nonce does not change h(0)")
	}
}

func TestNewHasherKeySize(t *testing.T) {
	for _, n := range []int{1, 16, 31, 33, 64} {
		if _, err := chain.NewHasher(make([]byte, n)); !errors.Is(err, chain.ErrKeySize) {
			t.Errorf("key of %d bytes: err = %v, want ErrKeySize", n, err)
		}
	}
	for _, key := range [][]byte{nil, {}} {
		h, err := chain.NewHasher(key)
		if err != nil || h.Keyed() {
			t.Errorf("key %v: err %v keyed %v, want unkeyed", key, err, h != nil && h.Keyed())
		}
	}
	h, err := chain.NewHasher(make([]byte, 32))
	if err != nil || !h.Keyed() {
		t.Fatalf("32-byte key: %v", err)
	}
}

func TestLinkDoesNotAllocate(t *testing.T) {
	h, _ := chain.NewHasher(nil)
	p := make([]byte, 500)
	h.Link("run", 1, chain.Hash{}, p) // warm the pool
	if n := testing.AllocsPerRun(1000, func() { h.Link("run-id", 7, chain.Hash{3}, p) }); n != 0 {
		t.Fatalf("Link allocates %v times per call", n)
	}
}

func TestHasherConcurrent(t *testing.T) {
	h, _ := chain.NewHasher(nil)
	p := bytes.Repeat([]byte("z"), 700)
	want := reference(nil, "run", 3, chain.Hash{4}, p)
	var wg sync.WaitGroup
	errs := make(chan chain.Hash, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if got := h.Link("run", 3, chain.Hash{4}, p); got != want {
					errs <- got
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for got := range errs {
		t.Fatalf("concurrent Link = %s, want %s", got, want)
	}
}

func TestHashText(t *testing.T) {
	h := chain.Hash{0xab, 0x01}
	got, err := chain.ParseHash(h.String())
	if err != nil || got != h {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if !(chain.Hash{}).IsZero() || h.IsZero() {
		t.Fatal("IsZero wrong")
	}
	for _, bad := range []string{"", "00", h.String() + "0", "zz" + h.String()[2:]} {
		if _, err := chain.ParseHash(bad); !errors.Is(err, chain.ErrParse) {
			t.Errorf("ParseHash(%q) err = %v, want ErrParse", bad, err)
		}
	}
	n1, err1 := chain.NewNonce()
	n2, err2 := chain.NewNonce()
	if err1 != nil || err2 != nil || n1 == n2 {
		t.Fatalf("nonces %v %v: %v %v", n1, n2, err1, err2)
	}
}

// TestLinkParts: LinkParts over two pieces is Link over them joined, at
// every split, keyed or not.
func TestLinkParts(t *testing.T) {
	payload := []byte("an atom body, then the digests of its results")
	for _, key := range [][]byte{nil, bytes.Repeat([]byte{9}, 32)} {
		h, err := chain.NewHasher(key)
		if err != nil {
			t.Fatal(err)
		}
		prev := chain.Hash{1, 2, 3}
		want := h.Link("run", 7, prev, payload)
		for i := 0; i <= len(payload); i++ {
			if got := h.LinkParts("run", 7, prev, payload[:i], payload[i:]); got != want {
				t.Fatalf("key %v, split at %d: %x, want %x", key != nil, i, got[:8], want[:8])
			}
		}
		if h.LinkParts("run", 7, prev, payload, []byte{0}) == want {
			t.Fatal("a longer tail links to the same head")
		}
	}
	h, _ := chain.NewHasher(nil)
	h.LinkParts("run", 7, chain.Hash{}, payload[:5], payload[5:]) // warm the pool
	if n := testing.AllocsPerRun(100, func() { h.LinkParts("run", 7, chain.Hash{}, payload[:5], payload[5:]) }); n != 0 {
		t.Fatalf("LinkParts allocates %v times", n)
	}
}
