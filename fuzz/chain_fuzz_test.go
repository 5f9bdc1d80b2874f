package fuzz

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/continuumdb/continuum/chain"
)

// chainKey is the fixed signing key of the chain fuzz targets.
func chainKey() (ed25519.PublicKey, ed25519.PrivateKey) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	return priv.Public().(ed25519.PublicKey), priv
}

func chainSigner(t testing.TB) *chain.Signer {
	_, priv := chainKey()
	s, err := chain.NewSigner("continuum-fuzz", priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzChainCheckpoint parses arbitrary bytes as a checkpoint. It must never
// panic; what parses must re-encode to the same checkpoint, an unsigned
// text must be the one canonical encoding, and a signature can only verify
// on a checkpoint that parses identically.
func FuzzChainCheckpoint(f *testing.F) {
	s := chainSigner(f)
	for _, c := range []chain.Checkpoint{
		{StoreID: "store", RunID: "run-1", Seq: 1, Head: chain.Hash{1}},
		{StoreID: "", RunID: "we\"ird\n\x00 id", Seq: 1<<64 - 1, Head: chain.Hash{0xff}, Final: true},
	} {
		f.Add(chain.MarshalCheckpoint(c))
		b, err := s.SignCheckpoint(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	pub, _ := chainKey()
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := chain.ParseCheckpoint(b)
		vc, verr := chain.VerifyCheckpoint(b, pub)
		if err != nil {
			if !errors.Is(err, chain.ErrParse) {
				t.Fatalf("parse error does not wrap ErrParse: %v", err)
			}
			if verr == nil {
				t.Fatalf("unparseable checkpoint verifies: %q", b)
			}
			return
		}
		if verr == nil && vc != c {
			t.Fatalf("verified %+v differs from parsed %+v", vc, c)
		}
		text := chain.MarshalCheckpoint(c)
		c2, err := chain.ParseCheckpoint(text)
		if err != nil || c2 != c {
			t.Fatalf("re-encoding does not round trip: %+v -> %q -> %+v, %v", c, text, c2, err)
		}
		if !bytes.Contains(b, []byte("\n\n")) && !bytes.Equal(text, b) {
			t.Fatalf("two encodings of one checkpoint:\n%q\n%q", b, text)
		}
		if bytes.Contains(b, []byte("\n\n")) && !bytes.HasPrefix(b, text) {
			t.Fatalf("signed checkpoint text is not canonical:\n%q\n%q", b, text)
		}
	})
}

// FuzzChainStoreHead is FuzzChainCheckpoint for store heads.
func FuzzChainStoreHead(f *testing.F) {
	s := chainSigner(f)
	for _, h := range []chain.StoreHead{
		{StoreID: "store"},
		{StoreID: "s", Runs: []chain.RunHead{{RunID: "", Seq: 0}, {RunID: "a b", Seq: 5, Head: chain.Hash{5}}, {RunID: "z\n", Seq: 9, Head: chain.Hash{9}}}},
	} {
		f.Add(chain.MarshalStoreHead(h))
		b, err := s.SignStoreHead(h)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	pub, _ := chainKey()
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := chain.ParseStoreHead(b)
		vh, verr := chain.VerifyStoreHead(b, pub)
		if err != nil {
			if !errors.Is(err, chain.ErrParse) {
				t.Fatalf("parse error does not wrap ErrParse: %v", err)
			}
			if verr == nil {
				t.Fatalf("unparseable store head verifies: %q", b)
			}
			return
		}
		if verr == nil && !chainSameHead(vh, h) {
			t.Fatalf("verified %+v differs from parsed %+v", vh, h)
		}
		text := chain.MarshalStoreHead(h)
		h2, err := chain.ParseStoreHead(text)
		if err != nil || !chainSameHead(h, h2) {
			t.Fatalf("re-encoding does not round trip: %+v -> %q -> %+v, %v", h, text, h2, err)
		}
		if !bytes.Contains(b, []byte("\n\n")) && !bytes.Equal(text, b) {
			t.Fatalf("two encodings of one store head:\n%q\n%q", b, text)
		}
	})
}

func chainSameHead(a, b chain.StoreHead) bool {
	return a.StoreID == b.StoreID && slices.Equal(a.Runs, b.Runs)
}

// FuzzChainFiles parses arbitrary bytes as the two files verification
// reads from the user: a trusted state and a public key file.
func FuzzChainFiles(f *testing.F) {
	var buf bytes.Buffer
	st := chain.State{StoreID: "store", Runs: map[string]chain.RunHead{"a": {RunID: "a", Seq: 3, Head: chain.Hash{3}}, "b\n": {RunID: "b\n", Seq: 1}}}
	if err := chain.WriteState(&buf, st); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	pub, _ := chainKey()
	pk, err := chain.MarshalPublicKey("continuum-fuzz", pub)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(pk)
	sk, err := chain.MarshalSigningKey("continuum-fuzz", ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sk)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := chain.ReadState(bytes.NewReader(b))
		if err == nil {
			var out bytes.Buffer
			if err := chain.WriteState(&out, s); err != nil {
				t.Fatalf("parsed state does not write: %v", err)
			}
			s2, err := chain.ReadState(&out)
			if err != nil || s2.StoreID != s.StoreID || len(s2.Runs) != len(s.Runs) {
				t.Fatalf("state does not round trip: %+v %+v %v", s, s2, err)
			}
			for id, r := range s.Runs {
				if s2.Runs[id] != r {
					t.Fatalf("run %q: %+v != %+v", id, s2.Runs[id], r)
				}
			}
		} else if !errors.Is(err, chain.ErrParse) {
			t.Fatalf("state error does not wrap ErrParse: %v", err)
		}
		k, err := chain.ParsePublicKey(b)
		if err == nil && len(k) != ed25519.PublicKeySize {
			t.Fatalf("public key of %d bytes", len(k))
		}
		if err != nil && !errors.Is(err, chain.ErrParse) {
			t.Fatalf("public key error does not wrap ErrParse: %v", err)
		}
		name, k2, err := chain.ParsePublicKeyFile(b)
		if err == nil && !k2.Equal(k) {
			t.Fatalf("ParsePublicKeyFile and ParsePublicKey disagree")
		}
		if err == nil {
			if out, merr := chain.MarshalPublicKey(name, k2); merr != nil {
				t.Fatalf("parsed public key %q does not marshal: %v", name, merr)
			} else if n2, k3, perr := chain.ParsePublicKeyFile(out); perr != nil || n2 != name || !k3.Equal(k2) {
				t.Fatalf("public key file does not round trip: %q %v", out, perr)
			}
		}
		sname, sk, err := chain.ParseSigningKey(b)
		switch {
		case err != nil && !errors.Is(err, chain.ErrParse):
			t.Fatalf("signing key error does not wrap ErrParse: %v", err)
		case err == nil:
			out, merr := chain.MarshalSigningKey(sname, sk)
			if merr != nil {
				t.Fatalf("parsed signing key %q does not marshal: %v", sname, merr)
			}
			if n2, k3, perr := chain.ParseSigningKey(out); perr != nil || n2 != sname || !k3.Equal(sk) {
				t.Fatalf("signing key file does not round trip: %v", perr)
			}
		}
	})
}

// chainEntry is one record of the fuzzed store, in log order.
type chainEntry struct {
	op      byte // 'r' run, 'x' record, 'c' checkpoint, 'h' store head
	run     string
	seq     uint64
	payload []byte
	hash    chain.Hash
	nonce   chain.Nonce
	b       []byte
}

// chainStore builds a signed store of two runs with checkpoints every 3
// records and at the end, and a store head after each round.
func chainStore(t testing.TB) []chainEntry {
	s := chainSigner(t)
	h, _ := chain.NewHasher(nil)
	runs := []string{"a", "b"}
	var es []chainEntry
	heads := map[string]chain.Hash{}
	for i, r := range runs {
		n := chain.Nonce{byte(i + 1)}
		es = append(es, chainEntry{op: 'r', run: r, nonce: n})
		heads[r] = h.Genesis(r, n)
	}
	const records = 7
	for i := uint64(1); i <= records; i++ {
		for _, r := range runs {
			p := []byte(fmt.Sprintf("payload %s %d", r, i))
			heads[r] = h.Link(r, i, heads[r], p)
			es = append(es, chainEntry{op: 'x', run: r, seq: i, payload: p, hash: heads[r]})
		}
		if i%3 == 0 || i == records {
			sh := chain.StoreHead{StoreID: "fz"}
			for _, r := range runs {
				b, err := s.SignCheckpoint(chain.Checkpoint{StoreID: "fz", RunID: r, Seq: i, Head: heads[r], Final: i == records})
				if err != nil {
					t.Fatal(err)
				}
				es = append(es, chainEntry{op: 'c', run: r, seq: i, b: b})
				sh.Runs = append(sh.Runs, chain.RunHead{RunID: r, Seq: i, Head: heads[r]})
			}
			b, err := s.SignStoreHead(sh)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, chainEntry{op: 'h', b: b})
		}
	}
	return es
}

// FuzzChainVerify tampers with a signed store as the fuzzer says (flip a
// payload or head byte, delete, duplicate or swap entries) and checks that
// the verifier never panics and reports every run whose records changed,
// unless the change is the one documented blind spot: a run cut to a
// prefix with every later checkpoint and store head cut too.
func FuzzChainVerify(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 5, 1})
	f.Add([]byte{2, 9, 0, 4, 3, 7})
	f.Add([]byte{1, 3, 200, 3, 1, 2})
	orig := chainStore(f)
	pub, _ := chainKey()
	f.Fuzz(func(t *testing.T, ops []byte) {
		all := slices.Clone(ops)
		es := make([]chainEntry, len(orig))
		for i, e := range orig {
			e.payload = slices.Clone(e.payload)
			es[i] = e
		}
		for len(ops) >= 3 && len(es) > 0 {
			op, i, x := ops[0], int(ops[1])%len(es), ops[2]
			ops = ops[3:]
			switch op % 5 {
			case 0:
				if len(es[i].payload) > 0 {
					es[i].payload[int(x)%len(es[i].payload)] ^= x | 1
				}
			case 1:
				if es[i].op == 'x' {
					es[i].hash[x%32] ^= x | 1
				}
			case 2:
				es = slices.Delete(es, i, i+1)
			case 3:
				es = slices.Insert(es, int(x)%(len(es)+1), es[i])
			case 4:
				j := int(x) % len(es)
				es[i], es[j] = es[j], es[i]
			}
		}
		v, err := chain.NewVerifier(chain.VerifyOptions{PublicKey: pub, Workers: 1 + len(es)%2})
		if err != nil {
			t.Fatal(err)
		}
		v.Store("fz")
		for i, e := range es {
			loc := fmt.Sprint(i)
			switch e.op {
			case 'r':
				v.Run(e.run, e.nonce, loc)
			case 'x':
				v.Record(e.run, e.seq, e.payload, e.hash, loc)
			case 'c':
				v.Checkpoint(e.b, loc)
			case 'h':
				v.StoreHead(e.b, loc)
			}
		}
		r := v.Finish()
		ok := map[string]bool{}
		for _, rr := range r.Runs {
			ok[rr.RunID] = rr.OK
		}
		for _, run := range []string{"a", "b"} {
			want := chainRecords(orig, run)
			got := chainRecords(es, run)
			if slices.EqualFunc(got, want, chainSameRecord) {
				continue
			}
			prefix := len(got) <= len(want) && slices.EqualFunc(got, want[:len(got)], chainSameRecord)
			if prefix && chainMaxAnchor(es, run) <= uint64(len(got)) {
				continue // cut together with every later anchor: the documented blind spot
			}
			if ok[run] {
				t.Fatalf("run %s changed but verified OK; ops %v", run, all)
			}
		}
	})
}

func chainRecords(es []chainEntry, run string) []chainEntry {
	var out []chainEntry
	for _, e := range es {
		if e.op == 'x' && e.run == run {
			out = append(out, e)
		}
	}
	return out
}

func chainSameRecord(a, b chainEntry) bool {
	return a.seq == b.seq && a.hash == b.hash && bytes.Equal(a.payload, b.payload)
}

// chainMaxAnchor is the highest seq any surviving checkpoint or store head
// commits for run.
func chainMaxAnchor(es []chainEntry, run string) uint64 {
	var m uint64
	for _, e := range es {
		switch e.op {
		case 'c':
			if c, err := chain.ParseCheckpoint(e.b); err == nil && c.RunID == run {
				m = max(m, c.Seq)
			}
		case 'h':
			if h, err := chain.ParseStoreHead(e.b); err == nil {
				for _, rh := range h.Runs {
					if rh.RunID == run {
						m = max(m, rh.Seq)
					}
				}
			}
		}
	}
	return m
}
