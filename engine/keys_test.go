package engine

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/seal"
)

// testRing returns a keyring of the keys named by ids (each 32 bytes of
// its first letter), wrapping with current.
func testRing(t testing.TB, current string, ids ...string) *seal.StaticKeyring {
	t.Helper()
	keys := map[string][]byte{}
	for _, id := range ids {
		keys[id] = bytes.Repeat([]byte{id[len(id)-1]}, seal.KeySize)
	}
	ring, err := seal.NewKeyring(keys, current)
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

func encOpts(fs vfs.FS, ring seal.Keyring) *Options {
	return &Options{FS: fs, NoSync: true, DictSamples: -1, Keyring: ring}
}

// commitOne creates run id (if new) and commits one atom setting k = v.
func commitOne(t testing.TB, db *DB, id, k, v string) {
	t.Helper()
	ctx := context.Background()
	r, err := db.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set(k, []byte(v))); err != nil {
		t.Fatal(err)
	}
}

// TestKeyringOpen: an encrypted store has KEYS with a store key and one
// key per run; Open without a keyring, with one lacking the key, or with
// a wrong key fails at Open with the documented error; a plaintext store
// refuses a keyring.
func TestKeyringOpen(t *testing.T) {
	fs := vfs.NewMem()
	db, err := Open("s", encOpts(fs, testRing(t, "k1", "k1")))
	if err != nil {
		t.Fatal(err)
	}
	commitOne(t, db, "r1", "a", "1")
	commitOne(t, db, "r2", "a", "2")
	es := db.KeyEntries()
	if len(es) != 3 || es[0].Scope != "" || es[1].Scope != "r1" || es[2].Scope != "r2" {
		t.Fatalf("key table %+v, want the store's key then r1's and r2's", es)
	}
	for _, e := range es {
		if e.KeyID != "k1" || e.Erased {
			t.Fatalf("entry %+v: want live, wrapped by k1", e)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := layout.ReadFile(fs, "s/STORE")
	if err != nil {
		t.Fatal(err)
	}
	if sf, err := layout.ParseStore("STORE", b); err != nil || !sf.Sealed() || sf.Keyed() {
		t.Fatalf("STORE %+v (%v): want sealed, unkeyed", sf, err)
	}

	for _, c := range []struct {
		name string
		ring seal.Keyring
		want error
	}{
		{"none", nil, ErrKeyring},
		{"lacking", testRing(t, "k2", "k2"), seal.ErrUnknownKey},
		{"wrong", nil, nil},
	} {
		ring := c.ring
		if c.name == "wrong" {
			// Same id, other bytes.
			r, err := seal.NewKeyring(map[string][]byte{"k1": bytes.Repeat([]byte{9}, seal.KeySize)}, "k1")
			if err != nil {
				t.Fatal(err)
			}
			ring, c.want = r, seal.ErrWrongKey
		}
		_, err := Open("s", encOpts(fs, ring))
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: Open: %v, want %v", c.name, err, c.want)
		}
	}

	plain := vfs.NewMem()
	db, err = Open("p", &Options{FS: plain, NoSync: true, DictSamples: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Rekey(); !errors.Is(err, ErrKeyring) {
		t.Fatalf("Rekey of a plaintext store: %v, want ErrKeyring", err)
	}
	db.Close()
	if _, err := plain.Stat("p/" + layout.KeysName); err == nil {
		t.Fatal("a plaintext store has KEYS")
	}
	if _, err := Open("p", encOpts(plain, testRing(t, "k1", "k1"))); !errors.Is(err, ErrKeyring) {
		t.Fatalf("plaintext store opened with a keyring: %v, want ErrKeyring", err)
	}
}

// TestKeyRotationRestart: after a restart with a new current key, new
// runs' keys are wrapped with it and the old runs stay readable with the
// old key; Rekey re-wraps the old ones, after which the old key can be
// retired.
func TestKeyRotationRestart(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	db, err := Open("s", encOpts(fs, testRing(t, "k1", "k1")))
	if err != nil {
		t.Fatal(err)
	}
	commitOne(t, db, "old", "a", "before rotation")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open("s", encOpts(fs, testRing(t, "k2", "k1", "k2")))
	if err != nil {
		t.Fatal(err)
	}
	commitOne(t, db, "new", "a", "after rotation")
	commitOne(t, db, "old", "b", "old run, new atom")
	byScope := map[string]string{}
	for _, e := range db.KeyEntries() {
		byScope[e.Scope] = e.KeyID
	}
	if byScope[""] != "k1" || byScope["old"] != "k1" || byScope["new"] != "k2" {
		t.Fatalf("wrapping keys by scope %v: want the new run's by k2, the others still by k1", byScope)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// The old key cannot be retired before Rekey.
	if _, err := Open("s", encOpts(fs, testRing(t, "k2", "k2"))); !errors.Is(err, seal.ErrUnknownKey) {
		t.Fatalf("Open without the old key before Rekey: %v, want ErrUnknownKey", err)
	}
	db, err = Open("s", encOpts(fs, testRing(t, "k2", "k1", "k2")))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := db.Rekey(); err != nil || n != 2 {
		t.Fatalf("Rekey: %d, %v; want 2 keys re-wrapped", n, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open("s", encOpts(fs, testRing(t, "k2", "k2")))
	if err != nil {
		t.Fatalf("Open with the new key alone after Rekey: %v", err)
	}
	defer db.Close()
	for id, want := range map[string]map[string]string{
		"old": {"a": "before rotation", "b": "old run, new atom"},
		"new": {"a": "after rotation"},
	} {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		st, err := r.StateE()
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if got := string(st.Memory[k]); got != v {
				t.Fatalf("run %s: %s = %q, want %q", id, k, got, v)
			}
		}
	}
}

// TestOlderKeysRefused: a KEYS older than the log (a backup of it restored
// without the log's) lacks the keys of the runs created since; Open says
// so instead of reading their sealed records as damage.
func TestOlderKeysRefused(t *testing.T) {
	fs := vfs.NewMem()
	ring := testRing(t, "k1", "k1")
	db, err := Open("s", encOpts(fs, ring))
	if err != nil {
		t.Fatal(err)
	}
	commitOne(t, db, "first", "a", "1")
	old, err := layout.ReadFile(fs, "s/KEYS")
	if err != nil {
		t.Fatal(err)
	}
	commitOne(t, db, "second", "a", "2")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := layout.WriteFileAtomic(fs, "s/KEYS", old, true); err != nil {
		t.Fatal(err)
	}
	_, err = Open("s", encOpts(fs, ring))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `run "second"`) || !strings.Contains(err.Error(), "KEYS") {
		t.Fatalf("Open with an older KEYS: %v, want a corruption error naming KEYS and run second", err)
	}
}

// nopReplicator acknowledges everything.
type nopReplicator struct{}

func (nopReplicator) Replicate([][][]byte) error         { return nil }
func (nopReplicator) ReplicateFile(string, []byte) error { return nil }

// TestSealedNotReplicated: Open refuses a keyring with a Replicator, whose
// replicas could not open the runs created after their copy of KEYS.
func TestSealedNotReplicated(t *testing.T) {
	o := encOpts(vfs.NewMem(), testRing(t, "k1", "k1"))
	o.Replicator = nopReplicator{}
	if _, err := Open("s", o); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "KEYS") {
		t.Fatalf("Open with a keyring and a Replicator: %v, want ErrInvalidOptions naming KEYS", err)
	}
}
