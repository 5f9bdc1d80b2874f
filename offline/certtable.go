package offline

import (
	"hash/maphash"

	"github.com/continuumdb/continuum/ledger"
)

// certTable holds, by fingerprint, the done and resolved certificates a
// verify scan has read: what each atom's chained payload needs of its
// actions (certSeen). It replaces a map[ledger.Fingerprint]certSeen, on
// verify's hot path: there a new certificate cost a lookup that missed
// the cache (the duplicate check) and then an insert, both in an 80-byte
// slot of a table of every certificate of the log. Here insert is one
// probe, and a probe reads a compact array of 8-byte slots; the entries
// themselves are appended in log order, so that the lookups of an atom,
// which follows its certificates closely, find them in cache.
//
// Fingerprints are hashed with a random seed (hash/maphash): a store
// forged with colliding fingerprints cannot make the probes long.
//
// The zero certTable is empty and ready for use. It is not safe for
// concurrent use.
type certTable struct {
	seed maphash.Seed
	// slots is a power-of-two open-addressing table (linear probing),
	// at most half full: 0 is empty, else the high 24 bits of the
	// fingerprint's hash (a tag, so that a probe rarely reads an entry
	// that is not the one) and, below them, the entry's index plus one
	// (40 bits: far more entries than memory holds).
	slots []uint64
	// ents holds the entries in chunks of entryChunk, in the order
	// added: entry k is ents[k/entryChunk][k%entryChunk]. Chunks, so that
	// growing never copies the entries (a slice of them, doubled, cost
	// more than the map it replaces).
	ents [][]certEntry
	n    int // entries
}

const entryChunk = 1024

type certEntry struct {
	fp ledger.Fingerprint
	certSeen
}

const (
	slotIndexBits = 40
	slotIndexMask = 1<<slotIndexBits - 1
)

// slot is what slots holds for entry index k of a fingerprint hashed to h.
func slot(h uint64, k int) uint64 { return h>>slotIndexBits<<slotIndexBits | uint64(k+1) }

func (t *certTable) entry(k int) *certEntry { return &t.ents[k/entryChunk][k%entryChunk] }

func (t *certTable) hash(fp *ledger.Fingerprint) uint64 {
	return maphash.Bytes(t.seed, fp[:])
}

// find returns the index in slots where fp is, or the empty slot where it
// would go, and whether it is there.
func (t *certTable) find(fp *ledger.Fingerprint, h uint64) (int, bool) {
	mask := uint64(len(t.slots) - 1)
	tag := h >> slotIndexBits
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		switch {
		case s == 0:
			return int(i), false
		case s>>slotIndexBits == tag && t.entry(int(s&slotIndexMask-1)).fp == *fp:
			return int(i), true
		}
	}
}

// get returns the certificate of fp, if the table has one.
func (t *certTable) get(fp *ledger.Fingerprint) (certSeen, bool) {
	if t.n == 0 {
		return certSeen{}, false
	}
	// An atom follows its actions' certificates: its first lookup is
	// nearly always of the entry added last, found without hashing.
	if e := t.entry(t.n - 1); e.fp == *fp {
		return e.certSeen, true
	}
	i, ok := t.find(fp, t.hash(fp))
	if !ok {
		return certSeen{}, false
	}
	return t.entry(int(t.slots[i]&slotIndexMask - 1)).certSeen, true
}

// has reports whether the table has a certificate of fp.
func (t *certTable) has(fp *ledger.Fingerprint) bool {
	_, ok := t.get(fp)
	return ok
}

// add records c as the certificate of fp, unless the table has one of fp
// already: then it changes nothing and returns false.
func (t *certTable) add(fp *ledger.Fingerprint, c certSeen) bool {
	if t.slots == nil {
		t.seed = maphash.MakeSeed()
		t.slots = make([]uint64, 1024)
	}
	h := t.hash(fp)
	i, ok := t.find(fp, h)
	if ok {
		return false
	}
	if t.n%entryChunk == 0 {
		t.ents = append(t.ents, make([]certEntry, entryChunk))
	}
	*t.entry(t.n) = certEntry{fp: *fp, certSeen: c}
	t.slots[i] = slot(h, t.n)
	t.n++
	if 2*t.n > len(t.slots) {
		t.grow()
	}
	return true
}

// grow doubles the slots and places every entry again.
func (t *certTable) grow() {
	t.slots = make([]uint64, 2*len(t.slots))
	for k := range t.n {
		e := t.entry(k)
		h := t.hash(&e.fp)
		i, _ := t.find(&e.fp, h)
		t.slots[i] = slot(h, k)
	}
}
