package chain_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/chain"
)

type entryKind uint8

const (
	eStore entryKind = iota
	eRun
	eRecord
	eCheckpoint
	eStoreHead
)

// entry is one record of the in-test store, in log order.
type entry struct {
	kind    entryKind
	run     string
	seq     uint64
	payload []byte
	hash    chain.Hash
	nonce   chain.Nonce
	b       []byte // checkpoint or store head bytes
}

func (e entry) clone() entry {
	e.payload = slices.Clone(e.payload)
	e.b = slices.Clone(e.b)
	return e
}

// fixture describes a store to build with the package's own API.
type fixture struct {
	storeID string
	runs    []string
	records int // per run
	every   int // checkpoint (and store head) every this many records; 0 none
	key     []byte
	signer  *chain.Signer // nil: unsigned checkpoints
	seed    int64
}

func defaultFixture(t testing.TB) fixture {
	s, _ := testSigner(t, "continuum-test", 1)
	return fixture{storeID: "store-1", runs: []string{"a", "b", "c"}, records: 20, every: 4, signer: s, seed: 1}
}

func (f fixture) hasher(t testing.TB) *chain.Hasher {
	h, err := chain.NewHasher(f.key)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (f fixture) build(t testing.TB) []entry {
	t.Helper()
	rng := rand.New(rand.NewSource(f.seed))
	h := f.hasher(t)
	es := []entry{{kind: eStore, run: f.storeID}}
	heads := map[string]chain.Hash{}
	for _, r := range f.runs {
		var n chain.Nonce
		rng.Read(n[:])
		es = append(es, entry{kind: eRun, run: r, nonce: n})
		heads[r] = h.Genesis(r, n)
	}
	checkpoint := func(final bool, seq uint64) {
		sh := chain.StoreHead{StoreID: f.storeID}
		for _, r := range f.runs {
			c := chain.Checkpoint{StoreID: f.storeID, RunID: r, Seq: seq, Head: heads[r], Final: final}
			es = append(es, entry{kind: eCheckpoint, run: r, seq: seq, b: f.sign(t, c)})
			sh.Runs = append(sh.Runs, chain.RunHead{RunID: r, Seq: seq, Head: heads[r]})
		}
		es = append(es, entry{kind: eStoreHead, b: f.signHead(t, sh)})
	}
	for i := 1; i <= f.records; i++ {
		for _, r := range f.runs {
			p := make([]byte, 20+rng.Intn(200))
			rng.Read(p)
			heads[r] = h.Link(r, uint64(i), heads[r], p)
			es = append(es, entry{kind: eRecord, run: r, seq: uint64(i), payload: p, hash: heads[r]})
		}
		if f.every > 0 && i%f.every == 0 || i == f.records {
			checkpoint(i == f.records, uint64(i))
		}
	}
	return es
}

func (f fixture) sign(t testing.TB, c chain.Checkpoint) []byte {
	if f.signer == nil {
		return chain.MarshalCheckpoint(c)
	}
	b, err := f.signer.SignCheckpoint(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f fixture) signHead(t testing.TB, h chain.StoreHead) []byte {
	if f.signer == nil {
		return chain.MarshalStoreHead(h)
	}
	b, err := f.signer.SignStoreHead(h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// feed gives the entries to a new Verifier in order.
func feed(t testing.TB, opts chain.VerifyOptions, es []entry) *chain.Report {
	t.Helper()
	v, err := chain.NewVerifier(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range es {
		loc := fmt.Sprintf("log:%d", i)
		switch e.kind {
		case eStore:
			v.Store(e.run)
		case eRun:
			v.Run(e.run, e.nonce, loc)
		case eRecord:
			p := slices.Clone(e.payload)
			v.Record(e.run, e.seq, p, e.hash, loc)
			for j := range p { // the caller may reuse payload after Record returns
				p[j] = 0xEE
			}
		case eCheckpoint:
			v.Checkpoint(e.b, loc)
		case eStoreHead:
			v.StoreHead(e.b, loc)
		}
	}
	return v.Finish()
}

func find(es []entry, kind entryKind, run string, seq uint64) int {
	for i, e := range es {
		if e.kind == kind && e.run == run && e.seq == seq {
			return i
		}
	}
	panic(fmt.Sprintf("test fixture has no entry kind %d run %q seq %d", kind, run, seq))
}

func remove(es []entry, i int) []entry { return append(es[:i:i], es[i+1:]...) }

// rechain recomputes the stored heads of run from seq on with h, as an
// attacker who edited a record would.
func rechain(es []entry, h *chain.Hasher, run string, from uint64) {
	var prev chain.Hash
	for i := range es {
		e := &es[i]
		switch {
		case e.kind == eRun && e.run == run:
			prev = h.Genesis(run, e.nonce)
		case e.kind == eRecord && e.run == run:
			if e.seq >= from {
				e.hash = h.Link(run, e.seq, prev, e.payload)
			}
			prev = e.hash
		}
	}
}

// resign rewrites every checkpoint and store head from the (possibly
// rechained) records, signed by s: what an attacker holding only their own
// key can do.
func resign(t testing.TB, es []entry, f fixture, s *chain.Signer) {
	heads := map[string]chain.Hash{}
	f.signer = s
	for i := range es {
		e := &es[i]
		switch e.kind {
		case eRecord:
			heads[e.run] = e.hash
		case eCheckpoint:
			c, err := chain.ParseCheckpoint(e.b)
			if err != nil {
				t.Fatal(err)
			}
			c.Head = heads[c.RunID]
			e.b = f.sign(t, c)
		case eStoreHead:
			sh, err := chain.ParseStoreHead(e.b)
			if err != nil {
				t.Fatal(err)
			}
			for j := range sh.Runs {
				sh.Runs[j].Head = heads[sh.Runs[j].RunID]
			}
			e.b = f.signHead(t, sh)
		}
	}
}

type tamperCase struct {
	name   string
	fix    func(*fixture)
	tamper func(t *testing.T, es []entry, f fixture) []entry
	opts   func(t *testing.T, o *chain.VerifyOptions, f fixture)
	// want: the run ("" = store-level failure), kind and seq. kind 0 means
	// the report must be OK.
	run      string
	kind     chain.Kind
	seq      uint64
	warnings []chain.Kind // exact warning kinds for OK cases
	others   bool         // other runs fail too (the tampering touches them)
}

func tamperCorpus() []tamperCase {
	flip := func(run string, seq uint64) func(*testing.T, []entry, fixture) []entry {
		return func(t *testing.T, es []entry, f fixture) []entry {
			i := find(es, eRecord, run, seq)
			es[i].payload[len(es[i].payload)/2] ^= 0x01
			return es
		}
	}
	return []tamperCase{
		{name: "clean"},
		{name: "empty store", fix: func(f *fixture) { f.runs = nil; f.records = 0 }},
		{name: "one-record run", fix: func(f *fixture) { f.runs = []string{"only"}; f.records = 1 }},
		{name: "one byte of a middle record changed", tamper: flip("a", 10), run: "a", kind: chain.KindHashMismatch, seq: 10},
		{name: "first record changed", tamper: flip("a", 1), run: "a", kind: chain.KindHashMismatch, seq: 1},
		{name: "last record changed", tamper: flip("a", 20), run: "a", kind: chain.KindHashMismatch, seq: 20},
		{name: "stored head of a middle record changed", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			es[find(es, eRecord, "a", 10)].hash[0] ^= 1
			return es
		}, run: "a", kind: chain.KindLinkMismatch, seq: 10},
		{name: "creation nonce changed", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			es[find(es, eRun, "b", 0)].nonce[3] ^= 1
			return es
		}, run: "b", kind: chain.KindHashMismatch, seq: 1},
		{name: "middle record changed, later hashes recomputed, caught by checkpoint", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			es = flip("a", 10)(t, es, f)
			rechain(es, f.hasher(t), "a", 10)
			return es
		}, run: "a", kind: chain.KindCheckpointMismatch, seq: 12},
		{name: "middle record changed, later hashes recomputed, caught by key",
			fix: func(f *fixture) { f.key = bytes.Repeat([]byte{0x42}, 32); f.every = 0 },
			tamper: func(t *testing.T, es []entry, f fixture) []entry {
				es = flip("a", 10)(t, es, f)
				unkeyed, _ := chain.NewHasher(nil) // the attacker lacks the key
				rechain(es, unkeyed, "a", 10)
				resign(t, es, f, f.signer) // even with the signing key stolen
				return es
			},
			opts: func(t *testing.T, o *chain.VerifyOptions, f fixture) { o.Key = f.key },
			run:  "a", kind: chain.KindLinkMismatch, seq: 10},
		{name: "keyed store verified without its key", fix: func(f *fixture) { f.key = bytes.Repeat([]byte{0x42}, 32) },
			run: "a", kind: chain.KindKeyedChain, seq: 1, others: true},
		{name: "keyed store verified with the wrong key", fix: func(f *fixture) { f.key = bytes.Repeat([]byte{0x42}, 32) },
			opts: func(t *testing.T, o *chain.VerifyOptions, f fixture) { o.Key = bytes.Repeat([]byte{0x43}, 32) },
			run:  "a", kind: chain.KindKeyedChain, seq: 1, others: true},
		{name: "keyed store, STORE says so, verified without its key", fix: func(f *fixture) { f.key = bytes.Repeat([]byte{0x42}, 32) },
			opts: func(t *testing.T, o *chain.VerifyOptions, f fixture) { o.Keyed = true },
			run:  "a", kind: chain.KindKeyedChain, seq: 1, others: true},
		{name: "first record replaced in an unkeyed store is damage, not a key", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			i := find(es, eRecord, "a", 1)
			es[i].payload = []byte("another record")
			es[i].hash[0] ^= 0xff
			return es
		}, run: "a", kind: chain.KindLinkMismatch, seq: 1},
		{name: "last 3 records removed", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			for s := uint64(18); s <= 20; s++ {
				es = remove(es, find(es, eRecord, "a", s))
			}
			return es
		}, run: "a", kind: chain.KindTruncated, seq: 18},
		{name: "record cut in half", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			i := find(es, eRecord, "a", 10)
			es[i].payload = es[i].payload[:len(es[i].payload)/2]
			return es
		}, run: "a", kind: chain.KindHashMismatch, seq: 10},
		{name: "middle record removed", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			return remove(es, find(es, eRecord, "a", 10))
		}, run: "a", kind: chain.KindSeqGap, seq: 10},
		{name: "two records swapped", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			i, j := find(es, eRecord, "a", 10), find(es, eRecord, "a", 11)
			es[i], es[j] = es[j], es[i]
			return es
		}, run: "a", kind: chain.KindSeqGap, seq: 10},
		{name: "two records swapped, seqs rewritten", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			i, j := find(es, eRecord, "a", 10), find(es, eRecord, "a", 11)
			es[i], es[j] = es[j], es[i]
			es[i].seq, es[j].seq = 10, 11
			return es
		}, run: "a", kind: chain.KindLinkMismatch, seq: 10},
		{name: "record duplicated", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			i := find(es, eRecord, "a", 10)
			return slices.Insert(es, i+1, es[i].clone())
		}, run: "a", kind: chain.KindSeqDuplicate, seq: 10},
		{name: "record copied from another run", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			i, j := find(es, eRecord, "a", 10), find(es, eRecord, "b", 10)
			es[i].payload, es[i].hash = slices.Clone(es[j].payload), es[j].hash
			return es
		}, run: "a", kind: chain.KindLinkMismatch, seq: 10},
		{name: "record of a run never created", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			e := es[find(es, eRecord, "b", 3)].clone()
			e.run = "ghost"
			return slices.Insert(es, len(es)-1, e)
		}, run: "ghost", kind: chain.KindUnknownRun, seq: 3},
		{name: "whole run removed", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			return slices.DeleteFunc(es, func(e entry) bool { return e.run == "b" })
		}, run: "b", kind: chain.KindRunMissing, seq: 1},
		{name: "whole run and its checkpoints removed, trusted state", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			es = slices.DeleteFunc(es, func(e entry) bool { return e.run == "b" || e.kind == eStoreHead })
			return es
		}, opts: trustFull, run: "b", kind: chain.KindRunMissing, seq: 1},
		{name: "older copy put back", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			// The copy taken right after the store head of seq 12.
			i := find(es, eCheckpoint, "c", 12)
			return es[:i+2]
		}, opts: trustFull, run: "a", kind: chain.KindRollback, seq: 13, others: true},
		{name: "older copy put back, no trusted state (undetectable)", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			return es[:find(es, eCheckpoint, "c", 12)+2]
		}},
		{name: "history diverges from trusted state", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			es = flip("a", 20)(t, es, f)
			rechain(es, f.hasher(t), "a", 20)
			resign(t, es, f, f.signer) // even with the signing key stolen
			return es
		}, opts: trustFull, run: "a", kind: chain.KindRollback, seq: 20},
		{name: "trusted state of another store", opts: func(t *testing.T, o *chain.VerifyOptions, f fixture) {
			trustFull(t, o, f)
			o.Trusted.StoreID = "store-2"
		}, run: "", kind: chain.KindRollback},
		{name: "forged checkpoint", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			i := find(es, eCheckpoint, "a", 8)
			c, _ := chain.ParseCheckpoint(es[i].b)
			es[i].b = bytes.Replace(es[i].b, []byte(c.Head.String()), []byte((chain.Hash{1}).String()), 1)
			return es
		}, run: "a", kind: chain.KindBadSignature, seq: 8},
		{name: "checkpoint signature stripped", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			i := find(es, eCheckpoint, "a", 8)
			c, _ := chain.ParseCheckpoint(es[i].b)
			es[i].b = chain.MarshalCheckpoint(c)
			return es
		}, run: "a", kind: chain.KindBadSignature, seq: 8},
		{name: "public key in the store replaced", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			es = flip("a", 10)(t, es, f)
			rechain(es, f.hasher(t), "a", 10)
			evil, _ := testSigner(t, "continuum-test", 66)
			resign(t, es, f, evil)
			return es
		}, run: "a", kind: chain.KindBadSignature, seq: 4, others: true},
		{name: "checkpoint from another store", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			i := find(es, eCheckpoint, "a", 8)
			c, _ := chain.ParseCheckpoint(es[i].b)
			c.StoreID = "store-2"
			es[i].b = f.sign(t, c)
			return es
		}, run: "a", kind: chain.KindCheckpointMismatch, seq: 8},
		{name: "store head edited", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			i := find(es, eStoreHead, "", 0)
			es[i].b = bytes.Replace(es[i].b, []byte(`run "b"`), []byte(`run "bb"`), 1)
			return es
		}, run: "", kind: chain.KindBadSignature},
		{name: "unreadable checkpoint", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			es[find(es, eCheckpoint, "a", 8)].b = []byte("\x00garbage")
			return es
		}, run: "", kind: chain.KindCorrupt},
		{name: "run created twice", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			e := es[find(es, eRun, "c", 0)]
			return slices.Insert(es, find(es, eRecord, "c", 5), e)
		}, run: "c", kind: chain.KindSeqDuplicate, seq: 0},
		{name: "no public key", opts: func(t *testing.T, o *chain.VerifyOptions, f fixture) { o.PublicKey = nil },
			warnings: []chain.Kind{chain.KindUnanchoredTail, chain.KindUnanchoredTail, chain.KindUnanchoredTail, chain.KindUnsigned}},
		{name: "no checkpoint after the last records", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			// Cut everything after record c:18: the copy ends between checkpoints.
			return es[:find(es, eRecord, "c", 18)+1]
		}, run: "a", kind: chain.KindUnsignedTail, seq: 17, others: true},
		{name: "no checkpoint after the last records, tail allowed", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			return es[:find(es, eRecord, "c", 18)+1]
		}, opts: func(t *testing.T, o *chain.VerifyOptions, f fixture) { o.UnsignedTail = 2 },
			warnings: []chain.Kind{chain.KindUnanchoredTail, chain.KindUnanchoredTail, chain.KindUnanchoredTail}},
		{name: "no checkpoint after the last records, tail too long", tamper: func(t *testing.T, es []entry, f fixture) []entry {
			return es[:find(es, eRecord, "c", 18)+1]
		}, opts: func(t *testing.T, o *chain.VerifyOptions, f fixture) { o.UnsignedTail = 1 },
			run: "a", kind: chain.KindUnsignedTail, seq: 17, others: true},
	}
}

// trustFull sets the trusted state to the one an earlier verification of
// the untampered store saved.
func trustFull(t *testing.T, o *chain.VerifyOptions, f fixture) {
	r := feed(t, *o, f.build(t))
	if !r.OK {
		t.Fatalf("untampered store does not verify: %v", r.Failures)
	}
	s := r.State()
	var buf bytes.Buffer
	if err := chain.WriteState(&buf, s); err != nil {
		t.Fatal(err)
	}
	s2, err := chain.ReadState(&buf)
	if err != nil {
		t.Fatal(err)
	}
	o.Trusted = &s2
}

func TestTamperCorpus(t *testing.T) {
	_, pub := testSigner(t, "continuum-test", 1)
	for _, tc := range tamperCorpus() {
		for _, workers := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/workers=%d", tc.name, workers), func(t *testing.T) {
				f := defaultFixture(t)
				if tc.fix != nil {
					tc.fix(&f)
				}
				es := f.build(t)
				if tc.tamper != nil {
					es = tc.tamper(t, es, f)
				}
				opts := chain.VerifyOptions{PublicKey: pub, Workers: workers}
				if tc.opts != nil {
					tc.opts(t, &opts, f)
				}
				r := feed(t, opts, es)
				checkReport(t, r, tc)
			})
		}
	}
}

func checkReport(t *testing.T, r *chain.Report, tc tamperCase) {
	t.Helper()
	if tc.kind == 0 {
		if !r.OK || len(r.Failures) > 0 {
			t.Fatalf("report not OK: %v", r.Failures)
		}
		var got []chain.Kind
		for _, w := range r.Warnings {
			got = append(got, w.Kind)
		}
		if !slices.Equal(got, tc.warnings) {
			t.Fatalf("warnings %v, want %v: %v", got, tc.warnings, r.Warnings)
		}
		for _, rr := range r.Runs {
			if !rr.OK || rr.Failure != nil {
				t.Fatalf("run %q not OK in an OK report", rr.RunID)
			}
		}
		return
	}
	if r.OK {
		t.Fatalf("tampering not detected; report OK with %d records", r.Records)
	}
	var f *chain.Failure
	if tc.run == "" {
		for i := range r.Failures {
			if r.Failures[i].RunID == "" {
				f = &r.Failures[i]
				break
			}
		}
	} else {
		for _, rr := range r.Runs {
			if rr.RunID == tc.run {
				if rr.OK {
					t.Fatalf("run %q reported OK; failures: %v", tc.run, r.Failures)
				}
				f = rr.Failure
			} else if rr.Failure != nil && !tc.others {
				t.Errorf("run %q also failed: %v", rr.RunID, rr.Failure)
			}
		}
	}
	if f == nil {
		t.Fatalf("no failure for run %q; failures: %v", tc.run, r.Failures)
	}
	if f.Kind != tc.kind || (tc.run != "" && f.Seq != tc.seq) {
		t.Fatalf("failure = %v\nwant kind %v seq %d", f, tc.kind, tc.seq)
	}
	if f.Location == "" && tc.kind != chain.KindRollback {
		t.Errorf("failure has no location: %v", f)
	}
	if f.String() == "" || f.Detail == "" {
		t.Errorf("failure without explanation: %+v", f)
	}
}

func TestReportState(t *testing.T) {
	_, pub := testSigner(t, "continuum-test", 1)
	f := defaultFixture(t)
	r := feed(t, chain.VerifyOptions{PublicKey: pub}, f.build(t))
	s := r.State()
	if s.StoreID != "store-1" || len(s.Runs) != 3 {
		t.Fatalf("state %+v", s)
	}
	h := f.hasher(t)
	// Recompute run a's head independently of the verifier.
	var head chain.Hash
	for _, e := range f.build(t) {
		if e.run == "a" && e.kind == eRun {
			head = h.Genesis("a", e.nonce)
		}
		if e.run == "a" && e.kind == eRecord {
			head = h.Link("a", e.seq, head, e.payload)
		}
	}
	if got := s.Runs["a"]; got.Seq != 20 || got.Head != head {
		t.Fatalf("state of a = %+v, want seq 20 head %s", got, head)
	}
	if r.Records != 60 || r.CheckpointsVerified != 3*5+5 || !r.Runs[0].Signed || r.Runs[0].Checkpoints != 5 || !r.Runs[0].Ended {
		t.Fatalf("counts: records %d verified %d run0 %+v", r.Records, r.CheckpointsVerified, r.Runs[0])
	}
}

func TestVerifierMisc(t *testing.T) {
	if _, err := chain.NewVerifier(chain.VerifyOptions{Key: []byte("short")}); !errors.Is(err, chain.ErrKeySize) {
		t.Errorf("short key: err = %v", err)
	}
	if _, err := chain.NewVerifier(chain.VerifyOptions{PublicKey: make([]byte, 3)}); !errors.Is(err, chain.ErrPublicKey) {
		t.Errorf("short public key: err = %v", err)
	}
	v, _ := chain.NewVerifier(chain.VerifyOptions{Workers: 2})
	v.Corrupt("wal/000003.log:4096", errors.New("crc mismatch"))
	r := v.Finish()
	if r.OK || len(r.Failures) != 1 || r.Failures[0].Kind != chain.KindCorrupt || r.Failures[0].Location != "wal/000003.log:4096" {
		t.Fatalf("corrupt: %+v", r)
	}
	v.Record("late", 1, nil, chain.Hash{}, "x") // ignored after Finish
	if r2 := v.Finish(); r2 != r {
		t.Fatal("Finish twice gave another report")
	}
	for k := chain.KindHashMismatch; k <= chain.KindUncheckedAnchor; k++ {
		b, err := k.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var k2 chain.Kind
		if err := k2.UnmarshalText(b); err != nil || k2 != k {
			t.Fatalf("kind %d round trip: %v %v", k, k2, err)
		}
	}
	if _, err := chain.Kind(200).MarshalText(); err == nil {
		t.Error("unknown kind marshals")
	}
}

// TestRandomTamper builds random stores, applies one random tampering and
// checks that it is detected in the right run. Every run prints its seed.
func TestRandomTamper(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	_, pub := testSigner(t, "continuum-test", 1)
	iters := 300
	if testing.Short() {
		iters = 25
	}
	for it := 0; it < iters; it++ {
		f := defaultFixture(t)
		f.seed = rng.Int63()
		f.records = 1 + rng.Intn(40)
		f.every = rng.Intn(8)
		f.runs = []string{"r0", "r1", "r2", "r3"}[:1+rng.Intn(4)]
		es := f.build(t)
		run := f.runs[rng.Intn(len(f.runs))]
		seq := uint64(1 + rng.Intn(f.records))
		i := find(es, eRecord, run, seq)
		var what string
		switch rng.Intn(6) {
		case 0:
			what = "payload byte flipped"
			if len(es[i].payload) > 0 {
				es[i].payload[rng.Intn(len(es[i].payload))] ^= byte(1 + rng.Intn(255))
			}
		case 1:
			what = "stored head byte flipped"
			es[i].hash[rng.Intn(32)] ^= byte(1 + rng.Intn(255))
		case 2:
			what = "record removed"
			es = remove(es, i)
		case 3:
			what = "record duplicated"
			es = slices.Insert(es, i+1+rng.Intn(len(es)-i), es[i].clone())
		case 4:
			what = "two records of the run swapped"
			if f.records == 1 {
				es = remove(es, i)
				break
			}
			other := uint64(1 + rng.Intn(f.records))
			for other == seq {
				other = uint64(1 + rng.Intn(f.records))
			}
			j := find(es, eRecord, run, other)
			es[i], es[j] = es[j], es[i]
			if other < seq {
				seq = other
			}
		case 5:
			what = "tail of the run removed"
			es = slices.DeleteFunc(es, func(e entry) bool { return e.kind == eRecord && e.run == run && e.seq >= seq })
		}
		r := feed(t, chain.VerifyOptions{PublicKey: pub, Workers: 1 + rng.Intn(3)}, es)
		if r.OK {
			t.Fatalf("seed %d iteration %d: %s at %s:%d not detected", seed, it, what, run, seq)
		}
		for _, rr := range r.Runs {
			if (rr.RunID == run) == rr.OK {
				t.Fatalf("seed %d iteration %d: %s at %s:%d: run %s OK=%v: %v", seed, it, what, run, seq, rr.RunID, rr.OK, rr.Failure)
			}
			if rr.RunID == run && rr.Failure.Seq > seq {
				t.Fatalf("seed %d iteration %d: %s at %s:%d reported at later seq: %v", seed, it, what, run, seq, rr.Failure)
			}
		}
	}
}

// TestLateCheckpoint covers checkpoints that arrive after later records of
// their run: compared while the head is still held, warned about after.
func TestLateCheckpoint(t *testing.T) {
	s, pub := testSigner(t, "continuum-test", 1)
	f := defaultFixture(t)
	f.runs, f.records, f.every = []string{"a"}, chain.RecentHeads+100, 0
	es := f.build(t)
	late := func(seq uint64, head chain.Hash) entry {
		b, err := s.SignCheckpoint(chain.Checkpoint{StoreID: f.storeID, RunID: "a", Seq: seq, Head: head})
		if err != nil {
			t.Fatal(err)
		}
		return entry{kind: eCheckpoint, run: "a", seq: seq, b: b}
	}
	headAt := func(seq uint64) chain.Hash { return es[find(es, eRecord, "a", seq)].hash }
	for _, workers := range []int{1, 2} {
		good := append(slices.Clone(es), late(5, headAt(5)), late(200, headAt(200)))
		r := feed(t, chain.VerifyOptions{PublicKey: pub, Workers: workers}, good)
		if !r.OK || len(r.Warnings) != 1 || r.Warnings[0].Kind != chain.KindUncheckedAnchor || r.Warnings[0].Seq != 5 || !r.Runs[0].Ended {
			t.Fatalf("late checkpoints: OK %v failures %v warnings %v", r.OK, r.Failures, r.Warnings)
		}
		bad := append(slices.Clone(es), late(200, headAt(201)))
		r = feed(t, chain.VerifyOptions{PublicKey: pub, Workers: workers}, bad)
		if r.OK || r.Runs[0].Failure.Kind != chain.KindCheckpointMismatch || r.Runs[0].Failure.Seq != 200 || r.Runs[0].Ended {
			t.Fatalf("late wrong checkpoint: %v", r.Failures)
		}
		dup := slices.Insert(slices.Clone(es), find(es, eRecord, "a", 900)+1, es[find(es, eRecord, "a", 3)])
		r = feed(t, chain.VerifyOptions{PublicKey: pub, Workers: workers}, dup)
		if f := r.Runs[0].Failure; f == nil || f.Kind != chain.KindSeqDuplicate || f.Seq != 3 || f.Expected != headAt(3) {
			t.Fatalf("old duplicate: %v", f)
		}
	}
}

func TestReportJSON(t *testing.T) {
	_, pub := testSigner(t, "continuum-test", 1)
	f := defaultFixture(t)
	es := f.build(t)
	i := find(es, eRecord, "b", 7)
	es[i].payload[0] ^= 1
	r := feed(t, chain.VerifyOptions{PublicKey: pub}, es)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	empty, err := json.Marshal(feed(t, chain.VerifyOptions{PublicKey: pub}, nil))
	if err != nil || !strings.Contains(string(empty), `"runs":[],`) || !strings.Contains(string(empty), `"failures":[],"warnings":[]`) {
		t.Errorf("empty report JSON: %s %v", empty, err)
	}
	for _, want := range []string{`"kind":"hash-mismatch"`, `"run":"b"`, `"seq":7`, `"location":"log:` + strconv.Itoa(i) + `"`, `"actual":"` + es[i].hash.String() + `"`, `"ok":false`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON report lacks %s:\n%s", want, b)
		}
	}
	var back struct {
		Failures []chain.Failure `json:"failures"`
	}
	if err := json.Unmarshal(b, &back); err != nil || len(back.Failures) != 1 || back.Failures[0] != r.Failures[0] {
		t.Fatalf("failures do not round trip through JSON: %v %+v", err, back.Failures)
	}
}

// TestStateLeavesOutRunsWithoutChain: a saved state must not pin runs the
// store never created, or the next verification would report a rollback
// against a chain that never existed.
func TestStateLeavesOutRunsWithoutChain(t *testing.T) {
	_, pub := testSigner(t, "continuum-test", 1)
	f := defaultFixture(t)
	es := f.build(t)
	ghost := es[find(es, eRecord, "a", 1)].clone()
	ghost.run = "ghost"
	es = append(es, ghost)
	es = slices.DeleteFunc(es, func(e entry) bool { return e.run == "c" })
	r := feed(t, chain.VerifyOptions{PublicKey: pub}, es)
	s := r.State()
	if _, ok := s.Runs["ghost"]; ok {
		t.Error("state pins a run with no creation record")
	}
	if _, ok := s.Runs["c"]; ok {
		t.Error("state pins a missing run")
	}
	if got := s.Runs["a"]; got.Seq != 20 {
		t.Errorf("state of a = %+v", got)
	}
}

// TestLargePayloadsAcrossBatches sends payloads larger than a worker batch
// through the parallel path, where they are copied, and checks that both
// an intact store and an edit in a large payload are judged right.
func TestLargePayloadsAcrossBatches(t *testing.T) {
	_, pub := testSigner(t, "continuum-test", 1)
	s, _ := testSigner(t, "continuum-test", 1)
	h, _ := chain.NewHasher(nil)
	var es []entry
	heads := map[string]chain.Hash{}
	for _, r := range []string{"x", "y"} {
		n := chain.Nonce{byte(len(r))}
		es = append(es, entry{kind: eRun, run: r, nonce: n})
		heads[r] = h.Genesis(r, n)
	}
	for i := uint64(1); i <= 6; i++ {
		for _, r := range []string{"x", "y"} {
			p := bytes.Repeat([]byte{byte(i)}, 300<<10+int(i))
			heads[r] = h.Link(r, i, heads[r], p)
			es = append(es, entry{kind: eRecord, run: r, seq: i, payload: p, hash: heads[r]})
		}
	}
	for _, r := range []string{"x", "y"} {
		b, err := s.SignCheckpoint(chain.Checkpoint{RunID: r, Seq: 6, Head: heads[r], Final: true})
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, entry{kind: eCheckpoint, run: r, seq: 6, b: b})
	}
	if r := feed(t, chain.VerifyOptions{PublicKey: pub, Workers: 2}, es); !r.OK || len(r.Warnings) != 0 || r.Records != 12 {
		t.Fatalf("intact store: %v %v", r.Failures, r.Warnings)
	}
	es[find(es, eRecord, "y", 4)].payload[200<<10] ^= 1
	r := feed(t, chain.VerifyOptions{PublicKey: pub, Workers: 2}, es)
	if f := r.Runs[1].Failure; r.Runs[0].Failure != nil || f == nil || f.Kind != chain.KindHashMismatch || f.Seq != 4 {
		t.Fatalf("edit in a large payload: %v", r.Failures)
	}
}

// TestLargePayloads: records above the batch size are hashed in the caller
// (not copied into a batch) once the worker has caught up; interleaved with
// small ones, over several runs, in a buffer the caller reuses, they verify
// in order, and a flipped byte in one is found at its seq.
func TestLargePayloads(t *testing.T) {
	h, err := chain.NewHasher(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, flip := range []uint64{0, 7, 8} { // b:7 is small, b:8 large
		for _, workers := range []int{1, 3} {
			v, err := chain.NewVerifier(chain.VerifyOptions{Workers: workers})
			if err != nil {
				t.Fatal(err)
			}
			v.Store("s")
			runs := []string{"a", "b", "c"}
			prev := map[string]chain.Hash{}
			for _, id := range runs {
				var n chain.Nonce
				n[0] = id[0]
				v.Run(id, n, "run "+id)
				prev[id] = h.Genesis(id, n)
			}
			buf := make([]byte, 0, 1<<20)
			for seq := uint64(1); seq <= 12; seq++ {
				for i, id := range runs {
					size := 100
					if (seq+uint64(i))%3 == 0 {
						size = 600 << 10 // above the batch size
					}
					buf = buf[:size]
					for j := range buf {
						buf[j] = byte(seq) + byte(i) + byte(j)
					}
					head := h.Link(id, seq, prev[id], buf)
					prev[id] = head
					if id == "b" && seq == flip {
						buf[size/2] ^= 1
					}
					v.Record(id, seq, buf, head, fmt.Sprintf("%s:%d", id, seq))
				}
			}
			r := v.Finish()
			if flip == 0 && !r.OK {
				t.Fatalf("workers=%d: %v", workers, r.Failures)
			}
			if flip != 0 && (r.OK || r.Failures[0].RunID != "b" || r.Failures[0].Seq != flip) {
				t.Fatalf("workers=%d: flipped b:%d, failures %v", workers, flip, r.Failures)
			}
		}
	}
}
