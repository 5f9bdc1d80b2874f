package seal

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"
)

// nonceOf returns the nonce of a payload sealed with key 1.
func nonceOf(t testing.TB, sealed []byte) []byte {
	t.Helper()
	if len(sealed) < 2+NonceSize || sealed[0] != Magic || sealed[1] != 1 {
		t.Fatalf("not a payload of data key 1: %x", sealed)
	}
	return sealed[2 : 2+NonceSize]
}

// reads counts the Read calls of its source.
type reads struct {
	src io.Reader
	mu  sync.Mutex
	n   int
}

func (r *reads) Read(p []byte) (int, error) {
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
	return r.src.Read(p)
}

func (r *reads) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// TestNonceCounter: a Key's payloads have the nonces base, base+1, ...
// (big-endian, 96 bits, carried across the low 64), base drawn from the
// random source at the first seal and never again; each payload still
// opens.
func TestNonceCounter(t *testing.T) {
	r := ring(t, "k1", "k1")
	src := &reads{src: &counting{}}
	tab := Table{rand: src}
	k, err := tab.Add(r, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := tab.Open(r)
	if err != nil {
		t.Fatal(err)
	}
	before := src.count()
	aad := []byte("place")
	for n := range 300 {
		sealed, err := k.Seal(nil, []byte("payload"), aad)
		if err != nil {
			t.Fatal(err)
		}
		// The source gave the data key 00..1f, then the base 20..2b.
		want := []byte{0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b}
		want[11] += byte(n)
		if n >= 0x100-0x2b {
			want[10]++ // the carry out of the last byte
		}
		if got := nonceOf(t, sealed); !bytes.Equal(got, want) {
			t.Fatalf("payload %d: nonce %x, want %x", n, got, want)
		}
		if out, err := Open(nil, sealed, aad, keys.Key); err != nil || string(out) != "payload" {
			t.Fatalf("payload %d: Open = %q, %v", n, out, err)
		}
	}
	if got := src.count() - before; got != 1 {
		t.Fatalf("300 seals read the random source %d times, want 1 (the base)", got)
	}
}

// TestAppendNonce pins the 96-bit sum, carries included.
func TestAppendNonce(t *testing.T) {
	for _, c := range []struct {
		base [NonceSize]byte
		n    uint64
		want [NonceSize]byte
	}{
		{[NonceSize]byte{}, 0, [NonceSize]byte{}},
		{[NonceSize]byte{11: 0xff}, 1, [NonceSize]byte{10: 1}},
		{[NonceSize]byte{3: 7, 4: 0xff, 5: 0xff, 6: 0xff, 7: 0xff, 8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff}, 2,
			[NonceSize]byte{3: 8, 11: 1}}, // carried into the high 32 bits
		{[NonceSize]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1,
			[NonceSize]byte{}}, // modulo 2^96
		{[NonceSize]byte{0: 0x80}, MaxSeals - 1, [NonceSize]byte{0: 0x80, 8: 0x3f, 9: 0xff, 10: 0xff, 11: 0xff}},
	} {
		if got := appendNonce([]byte("x"), &c.base, c.n); !bytes.Equal(got, append([]byte("x"), c.want[:]...)) {
			t.Errorf("appendNonce(%x, %d) = %x, want x%x", c.base, c.n, got, c.want)
		}
	}
}

// TestNonceConcurrent: payloads sealed at once from many goroutines all
// have distinct nonces, and two loads of the same data key (two Opens of
// the table) draw their own bases.
func TestNonceConcurrent(t *testing.T) {
	r := ring(t, "k1", "k1")
	var tab Table // crypto/rand
	if _, err := tab.Add(r, "run-1"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var mu sync.Mutex
	for load := range 2 {
		keys, err := tab.Open(r)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := keys.Scope("run-1")
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 500 {
					sealed, err := k.Seal(nil, nil, nil)
					if err != nil {
						t.Error(err)
						return
					}
					n := string(nonceOf(t, sealed))
					mu.Lock()
					if seen[n] {
						t.Errorf("load %d: nonce %x sealed twice", load, n)
					}
					seen[n] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if got := k.Sealed(); got != 4000 {
			t.Fatalf("load %d: Sealed = %d, want 4000", load, got)
		}
	}
}

// failing is a random source that fails.
type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("no entropy") }

// TestNonceSourceFails: a source that fails when the base is drawn fails
// that seal and every later one of the Key, with the source's error, and
// appends nothing.
func TestNonceSourceFails(t *testing.T) {
	k, err := newKey(4, master(1), failing{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		out, err := k.Seal([]byte("dst"), []byte("plain"), nil)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("no entropy")) || string(out) != "dst" {
			t.Fatalf("Seal with a failing source = %q, %v", out, err)
		}
	}
}

// TestMaxSeals: the key refuses its MaxSeals-th payload and every one
// after, whatever its nonce would be.
func TestMaxSeals(t *testing.T) {
	k, err := newKey(1, master(1), &counting{})
	if err != nil {
		t.Fatal(err)
	}
	k.seals.Store(MaxSeals - 1)
	if _, err := k.Seal(nil, nil, nil); err != nil {
		t.Fatalf("the last payload within the bound: %v", err)
	}
	for range 2 {
		if _, err := k.Seal(nil, nil, nil); err == nil {
			t.Fatal("a payload past MaxSeals was sealed")
		}
	}
}

// TestNameOf: a data key names equal content alike, another key (or the
// same key loaded again) otherwise as the key says, and the name is not
// the content's hash.
func TestNameOf(t *testing.T) {
	a, err := newKey(1, master(1), &counting{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := newKey(1, master(1), &counting{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := newKey(2, master(2), &counting{})
	if err != nil {
		t.Fatal(err)
	}
	var h1, h2 [32]byte
	h1[0], h2[0] = 1, 2
	if a.NameOf(h1) != again.NameOf(h1) {
		t.Fatal("one data key, loaded twice, names one content two ways")
	}
	if a.NameOf(h1) == a.NameOf(h2) || a.NameOf(h1) == b.NameOf(h1) || a.NameOf(h1) == h1 {
		t.Fatal("names collide across contents or keys, or are the hash")
	}
}
