package seal

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// An Entry is one data key of a table: wrapped, never in the clear.
type Entry struct {
	No     uint64 // the key's number, named by the payloads it sealed
	Scope  string // "" for the store, a run id, or a memory scope (MemoryScope)
	Erased bool   // the key is gone: what it sealed cannot be opened
	// Erasing: the key is live, and the erasure of its scope has begun
	// (Table.MarkErasing) but not finished.
	Erasing bool
	KeyID   string // the id of the keyring's key that wrapped it ("" if erased)
	Wrapped []byte // the wrapped data key (nil if erased)
}

// A Table is the list of a store's data keys, in ascending number. The
// zero Table is empty and ready. A Table is not safe for concurrent use;
// its owner writes it to disk durably before it seals anything with a key
// it added.
type Table struct {
	entries []Entry
	rand    io.Reader // nil: crypto/rand
}

func (t *Table) random() io.Reader {
	if t.rand != nil {
		return t.rand
	}
	return rand.Reader
}

// Entries returns a copy of the table's entries.
func (t *Table) Entries() []Entry {
	out := slices.Clone(t.entries)
	for i := range out {
		out[i].Wrapped = slices.Clone(out[i].Wrapped)
	}
	return out
}

// Clone returns a copy of t: its owner changes the copy, writes it
// durably, and only then replaces t by it.
func (t *Table) Clone() *Table {
	return &Table{entries: (&Table{entries: t.entries}).Entries(), rand: t.rand}
}

// Add creates a data key for scope (a run id, or "" for the store),
// wraps it with ring's current key, appends it to t and returns it, ready
// to seal.
func (t *Table) Add(ring Keyring, scope string) (*Key, error) {
	if len(scope) > MaxScope {
		return nil, fmt.Errorf("seal: scope of %d bytes, above %d", len(scope), MaxScope)
	}
	raw := make([]byte, KeySize)
	if _, err := io.ReadFull(t.random(), raw); err != nil {
		return nil, fmt.Errorf("seal: data key: %w", err)
	}
	id := ring.Current()
	wrapped, err := ring.Wrap(id, raw)
	if err != nil {
		return nil, fmt.Errorf("seal: wrap a data key with %q: %w", id, err)
	}
	if len(id) == 0 || len(id) > MaxKeyID || len(wrapped) > MaxWrapped {
		return nil, fmt.Errorf("seal: the keyring's key id %q (%d bytes) or wrapped key (%d bytes) is out of bounds", id, len(id), len(wrapped))
	}
	no := uint64(1)
	if n := len(t.entries); n > 0 {
		no = t.entries[n-1].No + 1
	}
	k, err := newKey(no, raw, t.random())
	if err != nil {
		return nil, err
	}
	t.entries = append(t.entries, Entry{No: no, Scope: scope, KeyID: id, Wrapped: wrapped})
	return k, nil
}

// Erase drops the data keys of scope (crypto-shredding: what they sealed
// can never be opened again, once t is written over its old copy) and
// keeps their entries, marked erased. It returns the numbers of the keys
// it erased.
func (t *Table) Erase(scope string) []uint64 {
	var nos []uint64
	for i := range t.entries {
		if e := &t.entries[i]; e.Scope == scope && !e.Erased {
			e.Erased, e.Erasing, e.KeyID, e.Wrapped = true, false, "", nil
			nos = append(nos, e.No)
		}
	}
	return nos
}

// MarkErasing marks the live keys of scope erasing (on) or live again
// (off): the owner writes t durably with the mark before the first step
// of an erasure, so that the erasure is finished, or undone, however it
// is interrupted. It returns how many keys it marked.
func (t *Table) MarkErasing(scope string, on bool) int {
	n := 0
	for i := range t.entries {
		if e := &t.entries[i]; e.Scope == scope && !e.Erased && e.Erasing != on {
			e.Erasing = on
			n++
		}
	}
	return n
}

// Erasing returns the scopes with a key marked erasing, sorted.
func (t *Table) Erasing() []string {
	var out []string
	for _, e := range t.entries {
		if e.Erasing && !slices.Contains(out, e.Scope) {
			out = append(out, e.Scope)
		}
	}
	slices.Sort(out)
	return out
}

// Rewrap re-wraps every live data key that ring's current key did not
// wrap, with the current key: after it (and once t is durable) the older
// keys can be retired from the keyring. The sealed data is untouched. It
// changes nothing unless every key re-wraps; it returns how many did.
func (t *Table) Rewrap(ring Keyring) (int, error) {
	cur := ring.Current()
	type change struct {
		i       int
		wrapped []byte
	}
	var changes []change
	for i, e := range t.entries {
		if e.Erased || e.KeyID == cur {
			continue
		}
		raw, err := ring.Unwrap(e.KeyID, e.Wrapped)
		if err != nil {
			return 0, fmt.Errorf("seal: data key %d: %w", e.No, err)
		}
		w, err := ring.Wrap(cur, raw)
		clear(raw)
		if err != nil {
			return 0, fmt.Errorf("seal: data key %d: wrap with %q: %w", e.No, cur, err)
		}
		if len(w) > MaxWrapped {
			return 0, fmt.Errorf("seal: data key %d: wrapped key of %d bytes, above %d", e.No, len(w), MaxWrapped)
		}
		changes = append(changes, change{i, w})
	}
	for _, c := range changes {
		t.entries[c.i].KeyID, t.entries[c.i].Wrapped = cur, c.wrapped
	}
	return len(changes), nil
}

// Open unwraps every live data key of t with ring. A key the ring lacks
// or that does not open a data key is an error naming the data key,
// matching ErrUnknownKey or ErrWrongKey: a wrong or missing user key is
// found here, before any payload is read.
func (t *Table) Open(ring Keyring) (*Keys, error) {
	ks := NewKeys()
	for _, e := range t.entries {
		if e.Erased {
			ks.erased[e.No] = e.Scope
			continue
		}
		raw, err := ring.Unwrap(e.KeyID, e.Wrapped)
		if err != nil {
			return nil, fmt.Errorf("seal: data key %d (scope %q): %w", e.No, e.Scope, err)
		}
		k, err := newKey(e.No, raw, t.random())
		clear(raw)
		if err != nil {
			return nil, fmt.Errorf("seal: data key %d: %w", e.No, err)
		}
		ks.Put(e.Scope, k)
	}
	return ks, nil
}

// Keys are the unwrapped data keys of a table, by number and by scope.
// Safe for concurrent use.
type Keys struct {
	mu     sync.RWMutex
	byNo   map[uint64]*Key
	scopes map[string]*Key // the newest key of each scope
	scope  map[uint64]string
	erased map[uint64]string // the scope of each erased key
}

// NewKeys returns an empty set of keys, for a new table.
func NewKeys() *Keys {
	return &Keys{byNo: map[uint64]*Key{}, scopes: map[string]*Key{}, scope: map[uint64]string{}, erased: map[uint64]string{}}
}

// Put adds k, a key of scope (just added to the table), as the newest of
// its scope.
func (ks *Keys) Put(scope string, k *Key) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.byNo[k.no] = k
	ks.scope[k.no] = scope
	if old, ok := ks.scopes[scope]; !ok || old.no < k.no {
		ks.scopes[scope] = k
	}
}

// Key returns the data key numbered no: an error matching ErrErased if it
// was erased, ErrCorrupt if the table never had it.
func (ks *Keys) Key(no uint64) (*Key, error) {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	if k, ok := ks.byNo[no]; ok {
		return k, nil
	}
	if scope, ok := ks.erased[no]; ok {
		return nil, fmt.Errorf("%w: data key %d (of %q)", ErrErased, no, scope)
	}
	return nil, fmt.Errorf("%w: %w: data key %d", ErrCorrupt, ErrNoKey, no)
}

// Scope returns the newest data key of scope, if there is one.
func (ks *Keys) Scope(scope string) (*Key, bool) {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	k, ok := ks.scopes[scope]
	return k, ok
}

// ScopeKeys returns the live data keys of scope, the newest first.
func (ks *Keys) ScopeKeys(scope string) []*Key {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	var out []*Key
	for no, s := range ks.scope {
		if s == scope {
			out = append(out, ks.byNo[no])
		}
	}
	slices.SortFunc(out, func(a, b *Key) int { return cmp.Compare(b.no, a.no) })
	return out
}

// ScopeOf returns the scope of the live data key numbered no.
func (ks *Keys) ScopeOf(no uint64) (string, bool) {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	s, ok := ks.scope[no]
	return s, ok
}

// ErasedScope returns the scope of the erased data key numbered no.
func (ks *Keys) ErasedScope(no uint64) (string, bool) {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	s, ok := ks.erased[no]
	return s, ok
}

// Drop forgets the keys of scope (after Table.Erase).
func (ks *Keys) Drop(scope string, erased []uint64) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	delete(ks.scopes, scope)
	for _, no := range erased {
		delete(ks.byNo, no)
		delete(ks.scope, no)
		ks.erased[no] = scope
	}
}

// AppendTable appends t's encoding (format.go).
func AppendTable(dst []byte, t *Table) []byte {
	dst = append(dst, tableMagic...)
	dst = append(dst, tableVersion)
	dst = binary.AppendUvarint(dst, uint64(len(t.entries)))
	for _, e := range t.entries {
		dst = binary.AppendUvarint(dst, e.No)
		dst = appendBytes(dst, []byte(e.Scope))
		state := byte(stateLive)
		switch {
		case e.Erased:
			state = stateErased
		case e.Erasing:
			state = stateErasing
		}
		dst = append(dst, state)
		dst = appendBytes(dst, []byte(e.KeyID))
		dst = appendBytes(dst, e.Wrapped)
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// DecodeTable decodes what AppendTable wrote. Anything else is an error
// matching ErrCorrupt that says what is wrong; the result does not alias
// b.
func DecodeTable(b []byte) (*Table, error) {
	d := decoder{b: b}
	if string(d.fixed("magic", len(tableMagic))) != tableMagic && d.err == nil {
		d.fail("bad magic")
	}
	if v := d.byte("version"); d.err == nil && v != tableVersion {
		d.fail("unknown version %d", v)
	}
	n := d.uvarint("entry count")
	if d.err == nil && n > uint64(len(b)) {
		d.fail("entry count %d exceeds the table", n)
	}
	t := &Table{}
	for i := uint64(0); i < n && d.err == nil; i++ {
		var e Entry
		e.No = d.uvarint("key number")
		e.Scope = string(d.bytes("scope", MaxScope))
		state := d.byte("state")
		e.KeyID = string(d.bytes("key id", MaxKeyID))
		e.Wrapped = slices.Clone(d.bytes("wrapped key", MaxWrapped))
		if d.err != nil {
			break
		}
		switch {
		case e.No == 0 || (len(t.entries) > 0 && e.No <= t.entries[len(t.entries)-1].No):
			d.fail("entry %d: key number %d not ascending from 1", i, e.No)
		case state == stateErased:
			e.Erased = true
			if e.KeyID != "" || len(e.Wrapped) != 0 {
				d.fail("entry %d: erased key %d keeps a wrapped key", i, e.No)
			}
		case state != stateLive && state != stateErasing:
			d.fail("entry %d: unknown state %d", i, state)
		case e.KeyID == "" || len(e.Wrapped) == 0:
			d.fail("entry %d: live key %d has no wrapped key", i, e.No)
		default:
			e.Erasing = state == stateErasing
			if e.Erasing && e.Scope == "" {
				d.fail("entry %d: the store's key %d marked erasing", i, e.No)
			}
		}
		t.entries = append(t.entries, e)
	}
	if d.err == nil && d.off != len(b) {
		d.fail("%d bytes after the last entry", len(b)-d.off)
	}
	if d.err != nil {
		return nil, d.err
	}
	return t, nil
}

// decoder reads a key table's fields, remembering the first error.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: key table at byte %d: %s", ErrCorrupt, d.off, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) fixed(what string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b)-d.off {
		d.fail("%s: %d bytes past the end", what, n-(len(d.b)-d.off))
		return nil
	}
	b := d.b[d.off : d.off+n]
	d.off += n
	return b
}

func (d *decoder) byte(what string) byte {
	if b := d.fixed(what, 1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, w := binary.Uvarint(d.b[d.off:])
	if w <= 0 || w != uvarintLen(v) {
		d.fail("%s: bad varint", what)
		return 0
	}
	d.off += w
	return v
}

func (d *decoder) bytes(what string, max int) []byte {
	n := d.uvarint(what + " length")
	if d.err == nil && n > uint64(max) {
		d.fail("%s: length %d above %d", what, n, max)
	}
	if d.err != nil {
		return nil
	}
	return d.fixed(what, int(n))
}

// MemoryScope is the scope of the data keys that seal the values of memory
// key key of run: run, a NUL byte (which no run id holds) and key.
func MemoryScope(run, key string) string { return run + "\x00" + key }

// SplitMemoryScope returns the run and memory key of a memory scope; ok
// is false for a run's or the store's scope.
func SplitMemoryScope(scope string) (run, key string, ok bool) {
	return strings.Cut(scope, "\x00")
}

// RunOf returns the run a scope belongs to: the run of a memory scope, the
// scope itself otherwise ("" for the store).
func RunOf(scope string) string {
	run, _, _ := strings.Cut(scope, "\x00")
	return run
}

// RunScopes returns the scopes of t that belong to run (its own, and its
// memory keys'), with a live or erasing key, sorted.
func (t *Table) RunScopes(run string) []string {
	if run == "" {
		return nil // the store's key belongs to no run
	}
	var out []string
	for _, e := range t.entries {
		if !e.Erased && RunOf(e.Scope) == run && !slices.Contains(out, e.Scope) {
			out = append(out, e.Scope)
		}
	}
	slices.Sort(out)
	return out
}

// EraseNos drops the live data keys numbered nos, as Erase does for a
// scope's, and returns the numbers it erased (those of nos that were
// live): for an erasure of the keys a record names, whatever their scope
// holds besides.
func (t *Table) EraseNos(nos []uint64) []uint64 {
	var out []uint64
	for i := range t.entries {
		if e := &t.entries[i]; !e.Erased && slices.Contains(nos, e.No) {
			e.Erased, e.Erasing, e.KeyID, e.Wrapped = true, false, "", nil
			out = append(out, e.No)
		}
	}
	return out
}

// Retire stops scope's newest key from sealing (Scope finds none, so the
// owner adds a new key before it seals again); the retired keys still
// open what they sealed until DropNos.
func (ks *Keys) Retire(scope string) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	delete(ks.scopes, scope)
}

// DropNos forgets the keys numbered nos (after Table.EraseNos); a scope
// whose newest key is among them has none until a new one is Put.
func (ks *Keys) DropNos(nos []uint64) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for _, no := range nos {
		scope, ok := ks.scope[no]
		if !ok {
			continue
		}
		if k, ok := ks.scopes[scope]; ok && k.no == no {
			delete(ks.scopes, scope)
		}
		delete(ks.byNo, no)
		delete(ks.scope, no)
		ks.erased[no] = scope
	}
}
