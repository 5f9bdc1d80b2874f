package blob

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/privfs"
	"github.com/continuumdb/continuum/seal"
	"github.com/klauspost/compress/s2"
	"github.com/zeebo/blake3"
)

// testSealer is a Sealer over a data key of package seal, as the engine's
// is over a run's, with a keyed BLAKE3 for names.
type testSealer struct {
	key  *seal.Key
	keys *seal.Keys
	mac  [32]byte
}

func newTestSealer(t testing.TB, scope string) *testSealer {
	t.Helper()
	ring, err := seal.NewKeyring(map[string][]byte{"k1": bytes.Repeat([]byte{7}, seal.KeySize)}, "k1")
	if err != nil {
		t.Fatal(err)
	}
	var tab seal.Table
	k, err := tab.Add(ring, scope)
	if err != nil {
		t.Fatal(err)
	}
	ks := seal.NewKeys()
	ks.Put(scope, k)
	s := &testSealer{key: k, keys: ks}
	copy(s.mac[:], scope)
	return s
}

func (s *testSealer) Seal(dst, plain, aad []byte) ([]byte, error) { return s.key.Seal(dst, plain, aad) }
func (s *testSealer) Open(dst, sealed, aad []byte) ([]byte, error) {
	return seal.Open(dst, sealed, aad, s.keys.Key)
}
func (s *testSealer) Overhead() int { return seal.Overhead + 10 }
func (s *testSealer) Name(hash [32]byte) (out [32]byte) {
	h, _ := blake3.NewKeyed(s.mac[:])
	_, _ = h.Write(hash[:])
	h.Sum(out[:0])
	return out
}

// content returns n bytes: half of them compressible text, half random,
// from seed.
func content(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := 0; i < n; {
		run := min(n-i, 1+r.IntN(4096))
		if r.IntN(2) == 0 {
			for j := range run {
				b[i+j] = "the agent read a page of text "[j%30]
			}
		} else {
			for j := range run {
				b[i+j] = byte(r.Uint32())
			}
		}
		i += run
	}
	return b
}

func put(t testing.TB, s *Store, sl Sealer, b []byte) Ref {
	t.Helper()
	w, err := s.Create(sl, "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	// Writes of odd sizes, so chunk boundaries fall inside them.
	for off := 0; off < len(b); {
		n := min(len(b)-off, 1+(off*7919)%300_000)
		if _, err := w.Write(b[off : off+n]); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	ref, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func get(s *Store, ref Ref, sl Sealer) ([]byte, error) {
	r, err := s.Open(ref, sl)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func sealers(t *testing.T) map[string]Sealer {
	return map[string]Sealer{"plain": nil, "sealed": newTestSealer(t, "run-1")}
}

func TestRoundTrip(t *testing.T) {
	sizes := []int{0, 1, 100, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3*ChunkSize + ChunkSize/2}
	for name, sl := range sealers(t) {
		t.Run(name, func(t *testing.T) {
			s := Open(vfs.NewMem(), Dir)
			for i, n := range sizes {
				b := content(uint64(i), n)
				ref := put(t, s, sl, b)
				if ref.Size != int64(n) || ref.Hash != Hash(b) || ref.Media != "text/plain" {
					t.Fatalf("size %d: ref %v, want hash %v", n, ref, Ref{Hash: Hash(b)})
				}
				got, err := get(s, ref, sl)
				if err != nil {
					t.Fatalf("size %d: %v", n, err)
				}
				if !bytes.Equal(got, b) {
					t.Fatalf("size %d: read back %d bytes that differ", n, len(got))
				}
				if err := s.Verify(ref, sl); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestRefEncoding(t *testing.T) {
	ref := Ref{Hash: Hash([]byte("x")), Size: 1 << 40, Media: "application/pdf"}
	enc := AppendRef([]byte("prefix"), ref)
	got, rest, err := ParseRef(enc[len("prefix"):])
	if err != nil || got != ref || len(rest) != 0 {
		t.Fatalf("ParseRef: %v %v %q", got, err, rest)
	}
	for i := range len(enc) - len("prefix") {
		if _, _, err := ParseRef(enc[len("prefix") : len("prefix")+i]); !errors.Is(err, ErrRef) {
			t.Fatalf("cut at %d: %v, want ErrRef", i, err)
		}
	}
}

func FuzzParseRef(f *testing.F) {
	f.Add(AppendRef(nil, Ref{Size: 5, Media: "text/html"}))
	f.Add([]byte{1})
	// A size of 0 in two bytes (0x80 0x00): refused, one encoding a Ref.
	f.Add(append(append([]byte{1}, make([]byte, 32)...), 0x80, 0x00, 0x00))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, rest, err := ParseRef(b)
		if err != nil {
			return
		}
		again := AppendRef(nil, r)
		if !bytes.Equal(again, b[:len(b)-len(rest)]) {
			t.Fatalf("not canonical: %x re-encodes to %x", b[:len(b)-len(rest)], again)
		}
	})
}

// TestDedup: the same bytes under one key are one file, whatever the
// writes; under two keys, two files whose names say nothing of the hash.
func TestDedup(t *testing.T) {
	fs := vfs.NewMem()
	s := Open(fs, Dir)
	b := content(9, 2*ChunkSize+10)
	a1, a2 := newTestSealer(t, "run-a"), newTestSealer(t, "run-b")
	for range 3 {
		put(t, s, nil, b)
		put(t, s, a1, b)
	}
	ref := put(t, s, a2, b)
	names, err := fs.List(Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 3 {
		t.Fatalf("%d files %v, want 3 (plain, run-a, run-b)", len(names), names)
	}
	for _, n := range names {
		if n != Name(ref.Hash, nil) && (n == Name(ref.Hash, a1) || n == Name(ref.Hash, a2)) {
			continue
		}
		if n != Name(ref.Hash, nil) {
			t.Fatalf("unexpected file %s", n)
		}
	}
	if Name(ref.Hash, a1) == Name(ref.Hash, a2) || Name(ref.Hash, a1) == Name(ref.Hash, nil) {
		t.Fatal("a sealed blob's name does not depend on its key")
	}
	// A sealed blob opened with the other run's key is refused.
	if _, err := get(s, ref, a1); err != nil {
		t.Fatal(err)
	}
	w, _ := s.Create(a2, "")
	_, _ = w.Write(b)
	_ = w.Abort()
	names, _ = fs.List(Dir)
	if len(names) != 3 {
		t.Fatalf("Abort left %v", names)
	}
}

// readPrefix reads ref and checks that whatever it returns before an
// error is a prefix of want: no unverified byte leaves a Reader.
func readPrefix(t *testing.T, s *Store, ref Ref, sl Sealer, want []byte, what string) error {
	t.Helper()
	r, err := s.Open(ref, sl)
	if err != nil {
		return err
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if !bytes.HasPrefix(want, got) {
		t.Fatalf("%s: read %d bytes that are not the blob's", what, len(got))
	}
	if err == nil && !bytes.Equal(got, want) {
		t.Fatalf("%s: read %d bytes without an error, want %d", what, len(got), len(want))
	}
	return err
}

// TestDamage flips bytes of every region of a blob (header, each chunk's
// frame, payload and CRC, the trailer), truncates it, swaps it with
// another and removes it: each is an error naming the file, never other
// bytes.
func TestDamage(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for name, sl := range sealers(t) {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			s := Open(fs, Dir)
			b := content(3, ChunkSize+ChunkSize/3)
			ref := put(t, s, sl, b)
			other := put(t, s, sl, content(4, ChunkSize+5))
			file := filepath.Join(Dir, Name(ref.Hash, sl))
			orig := readAll(t, fs, file)
			offsets := []int{0, 4, 5, 8, 20, 27, headerLen, headerLen + 4, headerLen + 5, len(orig) - 1, len(orig) - 4, len(orig) - 8, len(orig) - 16, len(orig) - 24, len(orig) - 25}
			for range 60 {
				offsets = append(offsets, r.IntN(len(orig)))
			}
			for _, off := range offsets {
				d := bytes.Clone(orig)
				d[off] ^= 1 << r.IntN(8)
				writeAll(t, fs, file, d)
				err := readPrefix(t, s, ref, sl, b, fmt.Sprintf("flip at %d", off))
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("flip at %d of %d: %v, want ErrCorrupt", off, len(orig), err)
				}
			}
			for _, n := range []int{0, 1, headerLen, headerLen + 100, len(orig) / 2, len(orig) - 25, len(orig) - 1} {
				writeAll(t, fs, file, orig[:n])
				if err := readPrefix(t, s, ref, sl, b, fmt.Sprintf("cut at %d", n)); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("cut at %d: %v, want ErrCorrupt", n, err)
				}
			}
			writeAll(t, fs, file, readAll(t, fs, filepath.Join(Dir, Name(other.Hash, sl))))
			if err := readPrefix(t, s, ref, sl, b, "swapped"); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("swapped: %v, want ErrCorrupt", err)
			}
			writeAll(t, fs, file, append(bytes.Clone(orig[:len(orig)-trailerTail]), orig[len(orig)-trailerTail:]...))
			if err := s.Verify(ref, sl); err != nil {
				t.Fatalf("restored: %v", err)
			}
			if err := fs.Remove(file); err != nil {
				t.Fatal(err)
			}
			if err := s.Verify(ref, sl); !errors.Is(err, ErrNotFound) {
				t.Fatalf("removed: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestSwappedChunks: a sealed blob's chunks moved within it, or from
// another blob with the same key and a forged trailer, do not open.
func TestSwappedChunks(t *testing.T) {
	sl := newTestSealer(t, "run-1")
	fs := vfs.NewMem()
	s := Open(fs, Dir)
	b := append(bytes.Repeat([]byte("a"), ChunkSize), bytes.Repeat([]byte("b"), ChunkSize)...)
	ref := put(t, s, sl, b)
	file := filepath.Join(Dir, Name(ref.Hash, sl))
	orig := readAll(t, fs, file)
	// The two chunks compress to the same length: swap them.
	c0 := chunkAt(orig, headerLen)
	c1 := chunkAt(orig, headerLen+len(c0))
	if len(c0) != len(c1) {
		t.Skipf("chunks of %d and %d bytes", len(c0), len(c1))
	}
	d := bytes.Clone(orig)
	copy(d[headerLen:], c1)
	copy(d[headerLen+len(c1):], c0)
	writeAll(t, fs, file, d)
	if err := readPrefix(t, s, ref, sl, b, "swapped chunks"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("swapped chunks: %v, want ErrCorrupt", err)
	}
}

func chunkAt(b []byte, off int) []byte {
	n := int(uint32(b[off]) | uint32(b[off+1])<<8 | uint32(b[off+2])<<16 | uint32(b[off+3])<<24)
	return b[off : off+chunkFrame+n]
}

// TestHostileEntries: a FIFO, a symbolic link and a directory planted
// under a blob's name are refused through the store's confined FS,
// without blocking.
func TestHostileEntries(t *testing.T) {
	dir := t.TempDir()
	fs := privfs.Confine(vfs.Default, dir)
	s := Open(fs, filepath.Join(dir, Dir))
	b := content(5, 1000)
	ref := put(t, s, nil, b)
	file := filepath.Join(dir, Dir, Name(ref.Hash, nil))
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, b, 0o600); err != nil {
		t.Fatal(err)
	}
	plant := map[string]func() error{
		"fifo":    func() error { return syscall.Mkfifo(file, 0o600) },
		"symlink": func() error { return os.Symlink(secret, file) },
		"dir":     func() error { return os.Mkdir(file, 0o700) },
	}
	for what, mk := range plant {
		if err := os.RemoveAll(file); err != nil {
			t.Fatal(err)
		}
		if err := mk(); err != nil {
			t.Fatal(err)
		}
		_, err := get(s, ref, nil)
		if err == nil {
			t.Fatalf("%s: read", what)
		}
		t.Logf("%s: %v", what, err)
	}
}

// TestBomb: a blob whose trailer and Ref agree but whose chunk claims to
// decompress to more than a chunk is refused before it is decompressed.
func TestBomb(t *testing.T) {
	fs := vfs.NewMem()
	s := Open(fs, Dir)
	b := bytes.Repeat([]byte{0}, 1000)
	ref := put(t, s, nil, b)
	file := filepath.Join(Dir, Name(ref.Hash, nil))
	orig := readAll(t, fs, file)
	// Replace the one chunk by an s2 stream of 64 MiB of zeros.
	enc := s2.Encode(nil, make([]byte, 64<<20))
	body := append([]byte{kindS2}, enc...)
	frame := append(le32(uint32(len(enc))), body...)
	frame = append(frame, le32(checksum(body))...)
	c0 := chunkAt(orig, headerLen)
	d := append(append(bytes.Clone(orig[:headerLen]), frame...), orig[headerLen+len(c0):]...)
	writeAll(t, fs, file, d)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := get(s, ref, nil)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bomb: %v, want ErrCorrupt", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("reading the bomb allocated %d bytes", grew)
	}
}

// TestStreamMemory: a 64 MiB blob is written and read in a few chunks'
// worth of allocations.
func TestStreamMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB through the store")
	}
	for name, sl := range sealers(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := Open(vfs.Default, filepath.Join(dir, Dir))
			const size = 64 << 20
			var before, mid, after runtime.MemStats
			runtime.ReadMemStats(&before)
			w, err := s.Create(sl, "")
			if err != nil {
				t.Fatal(err)
			}
			src := &patterned{left: size}
			if _, err := io.Copy(w, src); err != nil {
				t.Fatal(err)
			}
			ref, err := w.Commit()
			if err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&mid)
			r, err := s.Open(ref, sl)
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(io.Discard, r)
			_ = r.Close()
			runtime.ReadMemStats(&after)
			if err != nil || n != size {
				t.Fatalf("read %d bytes: %v", n, err)
			}
			wr, rd := mid.TotalAlloc-before.TotalAlloc, after.TotalAlloc-mid.TotalAlloc
			t.Logf("allocated writing %d KiB, reading %d KiB", wr>>10, rd>>10)
			if wr > 16<<20 || rd > 16<<20 {
				t.Fatalf("allocated %d bytes writing, %d reading a %d-byte blob", wr, rd, size)
			}
		})
	}
}

// patterned is a reader of left bytes that compress somewhat.
type patterned struct{ left, i int }

func (p *patterned) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	n := min(len(b), p.left)
	for j := range n {
		b[j] = byte((p.i + j) * (p.i + j) >> 7)
	}
	p.i += n
	p.left -= n
	return n, nil
}

// TestPowerLoss: a blob is durable once Commit returns, and nothing is
// under its name before.
func TestPowerLoss(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := Open(fs, Dir)
	b := content(6, ChunkSize+77)
	w, err := s.Create(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(1, 2))})
	names, _ := crashed.List(Dir)
	for _, n := range names {
		if isBlobName(n) {
			t.Fatalf("before Commit a crash leaves %s", n)
		}
	}
	ref, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	crashed = fs.CrashClone(vfs.CrashCloneCfg{})
	got, err := get(Open(crashed, Dir), ref, nil)
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("after Commit and a crash: %v", err)
	}
}

func TestSweep(t *testing.T) {
	fs := vfs.NewMem()
	s := Open(fs, Dir)
	keep := put(t, s, nil, content(7, 5000))
	drop := put(t, s, nil, content(8, 5000))
	w, _ := s.Create(nil, "")
	_, _ = w.Write([]byte("left by a crash"))
	if err := writeFile(fs, filepath.Join(Dir, "README"), []byte("not a blob")); err != nil {
		t.Fatal(err)
	}
	files, _, err := s.Sweep(func(n string) bool { return n == Name(keep.Hash, nil) }, true)
	if err != nil || files != 2 {
		t.Fatalf("Sweep removed %d files: %v, want 2 (a blob, a temporary file)", files, err)
	}
	if err := s.Verify(keep, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(drop, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("swept blob: %v", err)
	}
	var seen []string
	_ = s.Names(func(n string) error { seen = append(seen, n); return nil })
	if len(seen) != 1 || seen[0] != Name(keep.Hash, nil) {
		t.Fatalf("Names: %v", seen)
	}
	if _, err := fs.Stat(filepath.Join(Dir, "README")); err != nil {
		t.Fatalf("Sweep removed a file not its own: %v", err)
	}
}

// FuzzReadBlob reads arbitrary files as blobs under the Ref their own
// trailer claims (as a writer of both the log and blobs/ could forge it):
// no panic, no read past a chunk's bound, and what a Reader returns
// without an error hashes to the Ref.
func FuzzReadBlob(f *testing.F) {
	for i, n := range []int{0, 10, 3000} {
		fs := vfs.NewMem()
		s := Open(fs, Dir)
		ref := put(f, s, nil, content(uint64(i), n))
		f.Add(readAll(f, fs, filepath.Join(Dir, Name(ref.Hash, nil))))
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		if len(file) < trailerTail {
			return
		}
		tail := file[len(file)-trailerTail:]
		size := int64(binary.LittleEndian.Uint64(tail) & (1<<40 - 1))
		count := chunkCount(size)
		listAt := len(file) - trailerTail - int(count)*32
		if count > 1<<20 || listAt < 0 {
			return
		}
		ref := Ref{Hash: treeHash(size, file[listAt:len(file)-trailerTail]), Size: size}
		fs := vfs.NewMem()
		if err := fs.MkdirAll(Dir, 0o700); err != nil {
			t.Fatal(err)
		}
		writeAll(t, fs, filepath.Join(Dir, Name(ref.Hash, nil)), file)
		got, err := get(Open(fs, Dir), ref, nil)
		if err == nil && Hash(got) != ref.Hash {
			t.Fatalf("read %d bytes without an error that are not the Ref's", len(got))
		}
	})
}

// TestOpenOtherSize: a reference with a blob's hash but another size names
// no blob (ErrNotFound, the caller's mistake), in a plaintext and a sealed
// store alike; the blob's file is not reported damaged.
func TestOpenOtherSize(t *testing.T) {
	for _, sealed := range []bool{false, true} {
		fs := vfs.NewMem()
		s := Open(fs, Dir)
		var sl Sealer
		if sealed {
			sl = newTestSealer(t, "run-a")
		}
		b := content(5, ChunkSize+123)
		ref := put(t, s, sl, b)
		for _, size := range []int64{0, 1, ref.Size - 1, ref.Size + 1, ref.Size + ChunkSize, 1 << 40} {
			other := ref
			other.Size = size
			_, err := s.Open(other, sl)
			if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("sealed %v, size %d for a blob of %d: %v, want ErrNotFound", sealed, size, ref.Size, err)
			}
		}
		if _, err := get(s, ref, sl); err != nil {
			t.Fatalf("sealed %v: the right reference: %v", sealed, err)
		}
	}
}

// TestVerifyAs: a plaintext blob file checks out as the name it was
// committed under, and as no other; a damaged copy, a sealed blob and a
// file that is no blob are refused.
func TestVerifyAs(t *testing.T) {
	fs := vfs.NewMem()
	s := Open(fs, "b")
	for _, n := range []int{0, 1, ChunkSize + 7} {
		data := bytes.Repeat([]byte{byte(n)}, n)
		w, err := s.Create(nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		ref, err := w.Commit()
		if err != nil {
			t.Fatal(err)
		}
		name := Name(ref.Hash, nil)
		if err := s.VerifyAs(name, name); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		other := Name(Hash(append(data, 'x')), nil)
		if err := s.VerifyAs(name, other); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%d bytes checked as another name: %v, want ErrCorrupt", n, err)
		}
		b, _ := fs.Open("b/" + name)
		st, _ := b.Stat()
		raw := make([]byte, st.Size())
		b.ReadAt(raw, 0)
		b.Close()
		for _, at := range []int{0, len(raw) / 2, len(raw) - 1} {
			bad := bytes.Clone(raw)
			bad[at] ^= 1
			f, _ := fs.Create("b/bad", vfs.WriteCategoryUnspecified)
			f.Write(bad)
			f.Close()
			if err := s.VerifyAs("bad", name); err == nil {
				t.Fatalf("%d bytes, byte %d flipped: checks out", n, at)
			}
		}
	}
	// A sealed blob cannot be checked by its name (a keyed MAC).
	sl := newTestSealer(t, "verifyas")
	w, err := s.Create(sl, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("sealed")); err != nil {
		t.Fatal(err)
	}
	sref, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if sn := Name(sref.Hash, sl); s.VerifyAs(sn, sn) == nil {
		t.Fatal("a sealed blob checks out by its name")
	}
	if err := s.VerifyAs("missing", Name(Hash(nil), nil)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing file: %v", err)
	}
	if err := s.VerifyAs("bad", "../x"); err == nil {
		t.Fatal("a name that is no blob's checks out")
	}
}
