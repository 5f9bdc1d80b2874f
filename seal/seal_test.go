package seal

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/internal/goldenhex"
)

// counting is a deterministic "random" source: 0x00, 0x01, ... so that
// golden encodings are stable.
type counting struct{ n byte }

func (c *counting) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = c.n
		c.n++
	}
	return len(p), nil
}

func master(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func ring(t testing.TB, current string, ids ...string) *StaticKeyring {
	t.Helper()
	keys := map[string][]byte{}
	for i, id := range ids {
		keys[id] = master(byte(0x10 + i))
	}
	r, err := NewKeyring(keys, current)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSealOpen(t *testing.T) {
	r := ring(t, "k1", "k1")
	var tab Table
	k, err := tab.Add(r, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := tab.Open(r)
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte("the agent's memory: account 1234")
	aad := []byte("run-1/7")
	sealed, err := k.Seal([]byte("prefix"), plain, aad)
	if err != nil {
		t.Fatal(err)
	}
	sealed = sealed[len("prefix"):]
	if len(sealed) != len(plain)+Overhead+1 || !IsSealed(sealed) || bytes.Contains(sealed, plain[:8]) {
		t.Fatalf("sealed form %x", sealed)
	}
	if no, err := KeyNo(sealed); err != nil || no != 1 {
		t.Fatalf("KeyNo = %d, %v", no, err)
	}
	got, err := Open(nil, sealed, aad, keys.Key)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	// Every byte changed, the payload moved, truncated: never garbage.
	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x40
		if out, err := Open(nil, bad, aad, keys.Key); err == nil {
			t.Fatalf("byte %d changed: opened as %q", i, out)
		}
	}
	if _, err := Open(nil, sealed, []byte("run-2/7"), keys.Key); !errors.Is(err, ErrAuth) {
		t.Fatalf("moved payload: %v, want ErrAuth", err)
	}
	for n := range len(sealed) {
		if _, err := Open(nil, sealed[:n], aad, keys.Key); err == nil {
			t.Fatalf("truncated to %d bytes: opened", n)
		}
	}
	// Another data key of the same table does not open it.
	k2, err := tab.Add(r, "run-2")
	if err != nil {
		t.Fatal(err)
	}
	other, err := k2.Seal(nil, plain, aad)
	if err != nil {
		t.Fatal(err)
	}
	other[1] = 1 // claim key 1
	if _, err := Open(nil, other, aad, keys.Key); !errors.Is(err, ErrAuth) {
		t.Fatalf("payload of key 2 claiming key 1: %v, want ErrAuth", err)
	}
	if _, err := Open(nil, []byte{Magic, 9, 0, 0}, aad, keys.Key); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short payload: %v", err)
	}
}

// TestWrongOrMissingKey: the table opens only with the keyring that
// wrapped its keys; otherwise a clear error naming the data key.
func TestWrongOrMissingKey(t *testing.T) {
	var tab Table
	if _, err := tab.Add(ring(t, "k1", "k1"), "r"); err != nil {
		t.Fatal(err)
	}
	other, err := NewKeyring(map[string][]byte{"k1": master(0x99)}, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tab.Open(other); !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), "data key 1") {
		t.Fatalf("a wrong key: %v", err)
	}
	if _, err := tab.Open(ring(t, "k2", "k2")); !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), `"k1"`) {
		t.Fatalf("a missing key: %v", err)
	}
	for _, c := range []struct {
		keys    map[string][]byte
		current string
	}{
		{map[string][]byte{"k": master(1)[:16]}, "k"},
		{map[string][]byte{"": master(1)}, ""},
		{map[string][]byte{"k": master(1)}, "j"},
	} {
		if _, err := NewKeyring(c.keys, c.current); err == nil {
			t.Fatalf("NewKeyring(%v, %q) accepted", c.keys, c.current)
		}
	}
}

// TestRotation: a new current key wraps new data keys, old ones stay
// readable while the ring has the old key, and Rewrap lets it retire.
func TestRotation(t *testing.T) {
	old := ring(t, "k1", "k1")
	var tab Table
	k1, err := tab.Add(old, "a")
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := k1.Seal(nil, []byte("old data"), nil)
	if err != nil {
		t.Fatal(err)
	}
	both := ring(t, "k2", "k1", "k2")
	if _, err := tab.Add(both, "b"); err != nil {
		t.Fatal(err)
	}
	if e := tab.Entries(); e[0].KeyID != "k1" || e[1].KeyID != "k2" {
		t.Fatalf("entries %+v", e)
	}
	keys, err := tab.Open(both)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Open(nil, sealed, nil, keys.Key); err != nil || string(got) != "old data" {
		t.Fatalf("old data after rotation: %q, %v", got, err)
	}
	// The table round-trips through its encoding at every step.
	tab2, err := DecodeTable(AppendTable(nil, &tab))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := tab2.Rewrap(both); err != nil || n != 1 {
		t.Fatalf("Rewrap = %d, %v", n, err)
	}
	newOnly, err := NewKeyring(map[string][]byte{"k2": master(0x11)}, "k2")
	if err != nil {
		t.Fatal(err)
	}
	keys, err = tab2.Open(newOnly)
	if err != nil {
		t.Fatalf("after Rewrap, the new key alone: %v", err)
	}
	if got, err := Open(nil, sealed, nil, keys.Key); err != nil || string(got) != "old data" {
		t.Fatalf("old data after Rewrap: %q, %v", got, err)
	}
	// A Rewrap that cannot unwrap changes nothing.
	tab3, _ := DecodeTable(AppendTable(nil, &tab))
	before := AppendTable(nil, tab3)
	if _, err := tab3.Rewrap(newOnly); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Rewrap without the old key: %v", err)
	}
	if !bytes.Equal(AppendTable(nil, tab3), before) {
		t.Fatal("a failed Rewrap changed the table")
	}
}

// TestErase: an erased scope's payloads never open again, and say why.
func TestErase(t *testing.T) {
	r := ring(t, "k1", "k1")
	var tab Table
	ka, _ := tab.Add(r, "a")
	kb, _ := tab.Add(r, "b")
	sa, _ := ka.Seal(nil, []byte("secret of a"), nil)
	sb, _ := kb.Seal(nil, []byte("kept"), nil)
	wrappedA := bytes.Clone(tab.entries[0].Wrapped)
	if n := tab.MarkErasing("a", true); n != 1 {
		t.Fatalf("MarkErasing = %d", n)
	}
	marked, err := DecodeTable(AppendTable(nil, &tab))
	if err != nil {
		t.Fatal(err)
	}
	if got := marked.Erasing(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("Erasing after the mark, stored and read back = %q", got)
	}
	if ks, err := marked.Open(r); err != nil {
		t.Fatal(err)
	} else if got, err := Open(nil, sa, nil, ks.Key); err != nil || string(got) != "secret of a" {
		t.Fatalf("a key marked erasing opens what it sealed: %q, %v", got, err)
	}
	if nos := tab.Erase("a"); len(nos) != 1 || nos[0] != 1 {
		t.Fatalf("Erase = %v", nos)
	}
	if got := tab.Erasing(); len(got) != 0 {
		t.Fatalf("Erasing after Erase = %q", got)
	}
	stored, err := DecodeTable(AppendTable(nil, &tab))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(AppendTable(nil, stored), wrappedA) || !stored.entries[0].Erased {
		t.Fatal("the erased key's wrapped form is still in the table")
	}
	keys, err := stored.Open(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(nil, sa, nil, keys.Key); !errors.Is(err, ErrErased) {
		t.Fatalf("erased scope: %v, want ErrErased", err)
	}
	if got, err := Open(nil, sb, nil, keys.Key); err != nil || string(got) != "kept" {
		t.Fatalf("other scope: %q, %v", got, err)
	}
	if _, ok := keys.Scope("a"); ok {
		t.Fatal("an erased scope has a key")
	}
	if k, ok := keys.Scope("b"); !ok || k.No() != 2 {
		t.Fatalf("scope b: %v %v", k, ok)
	}
	if _, err := keys.Key(7); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a key never in the table: %v", err)
	}
}

func TestGoldenFormats(t *testing.T) {
	r := ring(t, "k1", "k1")
	r.rand = &counting{n: 0xa0}
	tab := Table{rand: &counting{}}
	k, err := tab.Add(r, "r1")
	if err != nil {
		t.Fatal(err)
	}
	tab.entries = append(tab.entries, Entry{No: 3, Scope: "r2", Erased: true})
	wrapped := fmt.Sprintf("%x", tab.entries[0].Wrapped)
	want := `
		434b4559 01       # "CKEY", version 1
		02                # 2 entries
		01 02 7231 01     # key 1, scope "r1", live
		02 6b31           # wrapped by "k1"
		3c ` + wrapped + ` # 60 bytes: nonce a0..ab | AES-256-GCM(data key) | tag
		03 02 7232 02     # key 3, scope "r2", erased
		00 00             # no key id, no wrapped key`
	if got := AppendTable(nil, &tab); !bytes.Equal(got, goldenhex.Decode(t, want)) {
		t.Fatalf("key table encoding changed:\n got %x", got)
	}
	if !strings.HasPrefix(wrapped, "a0a1a2a3a4a5a6a7a8a9aaab") || len(wrapped) != 2*(NonceSize+KeySize+TagSize) {
		t.Fatalf("wrapped key %s", wrapped)
	}
	// The data key is 00..1f (the table's source); its payloads are pinned.
	sealed, err := k.Seal(nil, []byte("hi"), []byte("aad"))
	if err != nil {
		t.Fatal(err)
	}
	want = `
		c5                       # Magic
		01                       # data key 1
		202122232425262728292a2b # nonce (the key's source, after the key)
		ba53                     # AES-256-GCM("hi")
		73cc53d885a99cbc5312f64b7af39cfb # tag`
	if !bytes.Equal(sealed, goldenhex.Decode(t, want)) {
		t.Fatalf("sealed payload encoding changed:\n got %x", sealed)
	}
}

func TestDecodeTableRules(t *testing.T) {
	head := func(n byte, rest ...byte) []byte { return append([]byte("CKEY\x01"), append([]byte{n}, rest...)...) }
	live := func(no byte) []byte { return []byte{no, 0, stateLive, 1, 'k', 1, 0xee} }
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "magic"},
		{"bad magic", []byte("CKEX\x01\x00"), "bad magic"},
		{"version 2", []byte("CKEY\x02\x00"), "unknown version 2"},
		{"count beyond", head(9), "exceeds the table"},
		{"key 0", head(1, live(0)...), "not ascending"},
		{"descending", head(2, append(live(2), live(1)...)...), "not ascending"},
		{"unknown state", head(1, 1, 0, 7, 0, 0), "unknown state 7"},
		{"live without key", head(1, 1, 0, stateLive, 0, 0), "no wrapped key"},
		{"erased with key", head(1, 1, 0, stateErased, 1, 'k', 1, 0xee), "keeps a wrapped key"},
		{"erasing without key", head(1, 1, 1, 'a', stateErasing, 0, 0), "no wrapped key"},
		{"the store's key erasing", head(1, 1, 0, stateErasing, 1, 'k', 1, 0xee), "the store's key 1 marked erasing"},
		{"trailing", append(head(1, live(1)...), 0), "1 bytes after"},
		{"non-minimal varint", head(1, 0x81, 0x00, 0, stateLive, 1, 'k', 1, 0xee), "bad varint"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeTable(c.b)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("DecodeTable(%x) = %v, want ErrCorrupt with %q", c.b, err, c.want)
			}
		})
	}
}

func FuzzDecodeTable(f *testing.F) {
	r := ring(f, "k1", "k1")
	var tab Table
	tab.Add(r, "a")
	tab.Add(r, "b")
	tab.Add(r, "c")
	tab.Erase("a")
	tab.MarkErasing("c", true)
	f.Add(AppendTable(nil, &tab))
	f.Add([]byte("CKEY\x01\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, err := DecodeTable(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		if again := AppendTable(nil, tab); !bytes.Equal(again, b) {
			t.Fatalf("a decoded table re-encodes to %x, not %x", again, b)
		}
		tab.Open(r) // never panics; its keys may not unwrap
	})
}

func FuzzOpen(f *testing.F) {
	r := ring(f, "k1", "k1")
	var tab Table
	k, _ := tab.Add(r, "a")
	keys, _ := tab.Open(r)
	s, _ := k.Seal(nil, []byte("payload"), []byte("aad"))
	f.Add(s, []byte("aad"))
	f.Add([]byte{Magic, 1}, []byte{})
	f.Fuzz(func(t *testing.T, b, aad []byte) {
		out, err := Open(nil, b, aad, keys.Key)
		if err != nil {
			if !errors.Is(err, ErrAuth) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is neither ErrAuth nor ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(out, []byte("payload")) || !bytes.Equal(aad, []byte("aad")) {
			t.Fatalf("forged payload opened: %q", out)
		}
	})
}

func BenchmarkSeal(b *testing.B) {
	r := ring(b, "k1", "k1")
	var tab Table
	k, _ := tab.Add(r, "a")
	keys, _ := tab.Open(r)
	aad := []byte("run-1/123")
	for _, size := range []int{200, 500, 4 << 10} {
		plain := bytes.Repeat([]byte("x"), size)
		b.Run(fmt.Sprintf("seal/%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			var buf []byte
			for b.Loop() {
				buf, _ = k.Seal(buf[:0], plain, aad)
			}
		})
		sealed, _ := k.Seal(nil, plain, aad)
		b.Run(fmt.Sprintf("open/%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			var buf []byte
			for b.Loop() {
				buf, _ = Open(buf[:0], sealed, aad, keys.Key)
			}
		})
	}
}

// TestKeyringFile: a keyring file reads back as the keyring it describes;
// each malformed file is refused, naming its line.
func TestKeyringFile(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, KeySize), bytes.Repeat([]byte{2}, KeySize)
	b := AppendKeyringFile(nil, map[string][]byte{"k1": k1, "k2": k2}, "k2")
	want := "continuum-keyring 1\ncurrent k2\nkey k1 " + strings.Repeat("01", 32) + "\nkey k2 " + strings.Repeat("02", 32) + "\n"
	if string(b) != want {
		t.Fatalf("keyring file:\n%s\nwant\n%s", b, want)
	}
	ring, err := ParseKeyringFile(append([]byte("# a comment\n\n"), b...))
	if err != nil {
		t.Fatal(err)
	}
	if ring.Current() != "k2" {
		t.Fatalf("current %q", ring.Current())
	}
	w, err := ring.Wrap("k1", k2)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := NewKeyring(map[string][]byte{"k1": k1}, "k1")
	if got, err := ref.Unwrap("k1", w); err != nil || !bytes.Equal(got, k2) {
		t.Fatalf("key k1 read back wrong: %v", err)
	}
	hexKey := strings.Repeat("01", 32)
	for _, bad := range []string{
		"",
		"current k1\nkey k1 " + hexKey,
		"continuum-keyring 2\ncurrent k1\nkey k1 " + hexKey,
		"continuum-keyring 1\nkey k1 " + hexKey,
		"continuum-keyring 1\ncurrent k2\nkey k1 " + hexKey,
		"continuum-keyring 1\ncurrent k1\ncurrent k1\nkey k1 " + hexKey,
		"continuum-keyring 1\ncurrent k1\nkey k1 " + hexKey + "\nkey k1 " + hexKey,
		"continuum-keyring 1\ncurrent k1\nkey k1 0102",
		"continuum-keyring 1\ncurrent k1\nkey k1 " + hexKey + " extra",
	} {
		if _, err := ParseKeyringFile([]byte(bad)); err == nil {
			t.Fatalf("accepted %q", bad)
		} else if strings.Contains(err.Error(), hexKey) {
			t.Fatalf("the error shows the key: %v", err)
		}
	}
}

// FuzzKeyringFile: ParseKeyringFile never panics.
func FuzzKeyringFile(f *testing.F) {
	f.Add(AppendKeyringFile(nil, map[string][]byte{"k1": bytes.Repeat([]byte{1}, KeySize)}, "k1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseKeyringFile(b)
	})
}

// TestMemoryScope: a memory scope splits back into its run and key, is
// told from a run's scope, and RunScopes lists a run's scopes with a live
// key, its memory keys' among them, and no other run's.
func TestMemoryScope(t *testing.T) {
	s := MemoryScope("r1", "email/primary")
	if run, key, ok := SplitMemoryScope(s); !ok || run != "r1" || key != "email/primary" {
		t.Fatalf("SplitMemoryScope(%q) = %q, %q, %v", s, run, key, ok)
	}
	if _, _, ok := SplitMemoryScope("r1"); ok {
		t.Fatal("a run's scope split as a memory scope")
	}
	if RunOf(s) != "r1" || RunOf("r1") != "r1" || RunOf("") != "" {
		t.Fatalf("RunOf: %q %q %q", RunOf(s), RunOf("r1"), RunOf(""))
	}
	kr := ring(t, "k1", "k1")
	var tab Table
	for _, scope := range []string{"", "r1", MemoryScope("r1", "b"), "r10", MemoryScope("r1", "a"), MemoryScope("r10", "a")} {
		if _, err := tab.Add(kr, scope); err != nil {
			t.Fatal(err)
		}
	}
	tab.Erase(MemoryScope("r1", "b"))
	if got, want := tab.RunScopes("r1"), []string{"r1", MemoryScope("r1", "a")}; !slices.Equal(got, want) {
		t.Fatalf("RunScopes(r1) = %q, want %q", got, want)
	}
	if got := tab.RunScopes(""); got != nil {
		t.Fatalf("RunScopes(\"\") = %q, want none: the store's key belongs to no run", got)
	}
}
