package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/continuumdb/continuum/internal/crc32c"

	"github.com/google/go-cmp/cmp"
)

// randomLedger fills a ledger with n random fingerprints through the replay
// API and returns it with its expected contents.
func randomLedger(rng *rand.Rand, n int) (*Ledger, map[Fingerprint]Entry) {
	l := New()
	want := map[Fingerprint]Entry{}
	for range n {
		var fp Fingerprint
		for k := range fp {
			fp[k] = byte(rng.Uint32())
		}
		il := Loc{Segment: rng.Uint64N(100), Offset: rng.Int64()}
		cl := Loc{Segment: rng.Uint64N(100), Offset: rng.Int64()}
		applyEntry(l, want, fp, Status(1+rng.IntN(4)), il, cl)
	}
	return l, want
}

// applyEntry records an action of status st through the replay API, its
// intent at il and (unless st is StatusIntent) its certificate at cl, and
// what l must answer for it in want.
func applyEntry(l *Ledger, want map[Fingerprint]Entry, fp Fingerprint, st Status, il, cl Loc) {
	l.ApplyIntent(&Intent{Fingerprint: fp}, il)
	e := Entry{Fingerprint: fp, Status: st, IntentLoc: il}
	if st != StatusIntent {
		l.ApplyCertificate(&Certificate{Fingerprint: fp, Status: st}, cl, false)
		e.CertLoc = cl
	}
	want[fp] = e
}

func TestTableRoundTrip(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for _, n := range []int{0, 1, 2, 17, 1000} {
		l, want := randomLedger(rng, n)
		tbl := l.AppendTable([]byte("hdr"))
		if string(tbl[:3]) != "hdr" || len(tbl) != 3+tableHeaderSize+n*tableEntrySize {
			t.Fatalf("n=%d: table of %d bytes", n, len(tbl))
		}
		r := New()
		if err := r.LoadTable(tbl[3:]); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if r.Len() != n {
			t.Fatalf("n=%d: Len %d", n, r.Len())
		}
		var wantDoubt []Fingerprint
		for fp, e := range want {
			got, ok := r.Lookup(fp)
			if !ok || !cmp.Equal(got, Entry{Fingerprint: fp, Status: e.Status, IntentLoc: e.IntentLoc, CertLoc: e.CertLoc}) {
				t.Fatalf("n=%d: Lookup(%s) = %+v, %v; want %+v", n, fp, got, ok, e)
			}
			if e.Status == StatusIntent {
				wantDoubt = append(wantDoubt, fp)
			}
			// A near miss is absent.
			miss := fp
			miss[31] ^= 1
			if _, ok := want[miss]; !ok {
				if _, found := r.Lookup(miss); found {
					t.Fatalf("n=%d: found absent %s", n, miss)
				}
			}
		}
		slices.SortFunc(wantDoubt, func(a, b Fingerprint) int { return bytes.Compare(a[:], b[:]) })
		if got := r.InDoubt(); !slices.Equal(got, wantDoubt) {
			t.Fatalf("n=%d: InDoubt %d entries, want %d", n, len(got), len(wantDoubt))
		}
		s := r.Stats()
		if s.Entries != n || s.TableEntries != n || s.MapEntries != 0 || s.InDoubt != len(wantDoubt) ||
			s.TableBytes != int64(len(tbl)-3) {
			t.Fatalf("n=%d: Stats %+v", n, s)
		}
		// Writing the loaded table again gives the same bytes.
		if again := r.AppendTable(nil); !bytes.Equal(again, tbl[3:]) {
			t.Fatalf("n=%d: re-written table differs", n)
		}
	}
}

func TestTableMapPrecedence(t *testing.T) {
	ctx := context.Background()
	j := newMemJournal()
	a := mustIntent(t, "t", `"a"`, 1, 0, false) // in doubt in the table, certified later
	b := mustIntent(t, "t", `"b"`, 1, 1, false) // done in the table
	c := mustIntent(t, "t", `"c"`, 1, 2, true)  // failed in the table, retried later
	d := mustIntent(t, "t", `"d"`, 1, 3, false) // only in the map
	old := New()
	old.ApplyIntent(a, Loc{Segment: 1, Offset: 10})
	old.ApplyIntent(b, Loc{Segment: 1, Offset: 11})
	old.ApplyCertificate(&Certificate{Fingerprint: b.Fingerprint, Status: StatusDone}, Loc{Segment: 1, Offset: 12}, false)
	old.ApplyIntent(c, Loc{Segment: 1, Offset: 13})
	old.ApplyCertificate(&Certificate{Fingerprint: c.Fingerprint, Status: StatusFailed}, Loc{Segment: 1, Offset: 14}, false)
	tbl := old.AppendTable(nil)

	l := New()
	if err := l.LoadTable(tbl); err != nil {
		t.Fatal(err)
	}
	if got := l.InDoubt(); len(got) != 1 || got[0] != a.Fingerprint {
		t.Fatalf("InDoubt %v", got)
	}
	// The tail after the table.
	l.ApplyCertificate(&Certificate{Fingerprint: a.Fingerprint, Status: StatusDone, Result: []byte("A")}, Loc{Segment: 2, Offset: 0}, true)
	l.ApplyIntent(b, Loc{Segment: 2, Offset: 1}) // stray: b stays done
	l.ApplyIntent(c, Loc{Segment: 2, Offset: 2})
	l.ApplyIntent(d, Loc{Segment: 2, Offset: 3})
	for _, tc := range []struct {
		in   *Intent
		want Entry
	}{
		{a, Entry{Status: StatusDone, IntentLoc: Loc{Segment: 1, Offset: 10}, CertLoc: Loc{Segment: 2, Offset: 0}, Result: []byte("A")}},
		{b, Entry{Status: StatusDone, IntentLoc: Loc{Segment: 1, Offset: 11}, CertLoc: Loc{Segment: 1, Offset: 12}}},
		{c, Entry{Status: StatusIntent, IntentLoc: Loc{Segment: 2, Offset: 2}, CertLoc: Loc{Segment: 1, Offset: 14}}},
		{d, Entry{Status: StatusIntent, IntentLoc: Loc{Segment: 2, Offset: 3}}},
	} {
		got, _ := l.Lookup(tc.in.Fingerprint)
		tc.want.Fingerprint = tc.in.Fingerprint
		if got.Status != tc.want.Status || got.IntentLoc != tc.want.IntentLoc || got.CertLoc != tc.want.CertLoc ||
			!bytes.Equal(got.Result, tc.want.Result) {
			t.Fatalf("%s: Lookup %+v, want %+v", tc.in.Args, got, tc.want)
		}
	}
	if got := l.InDoubt(); len(got) != 2 {
		t.Fatalf("InDoubt %v, want c and d", got)
	}
	s := l.Stats()
	if s.Entries != 4 || s.TableEntries != 3 || s.InDoubt != 2 || s.HeldResultBytes != 1 {
		t.Fatalf("Stats %+v", s)
	}
	// Merged table: map entries win.
	r := New()
	if err := r.LoadTable(l.AppendTable(nil)); err != nil {
		t.Fatal(err)
	}
	for _, in := range []*Intent{a, b, c, d} {
		want, _ := l.Lookup(in.Fingerprint)
		got, _ := r.Lookup(in.Fingerprint)
		want.Result = nil
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("merged %+v, want %+v", got, want)
		}
	}
	// Do against the table-backed index: a is done (held), b is read back
	// from the journal, which does not hold it here: an error, never exec.
	never := func(context.Context, string) ([]byte, error) { t.Fatal("exec called"); return nil, nil }
	if res, err := l.Do(ctx, j, a, never); err != nil || string(res) != "A" {
		t.Fatalf("Do a = %q, %v", res, err)
	}
	if _, err := l.Do(ctx, j, b, never); err == nil {
		t.Fatal("Do b without its certificate in the journal succeeded")
	}
}

func TestTableCorrupt(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	l, _ := randomLedger(rng, 5)
	good := l.AppendTable(nil)
	reseal := func(b []byte) []byte {
		binary.LittleEndian.PutUint32(b[16:], crc32c.Checksum(b[tableHeaderSize:]))
		binary.LittleEndian.PutUint32(b[20:], crc32c.Checksum(b[:20]))
		return b
	}
	edit := func(f func([]byte) []byte) []byte { return f(bytes.Clone(good)) }
	e1 := tableHeaderSize + tableEntrySize // offset of entry 1
	tests := []struct {
		name  string
		b     []byte
		where string
	}{
		{"empty", nil, "truncated header"},
		{"short header", good[:23], "offset 23"},
		{"magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }), "bad magic"},
		{"version", edit(func(b []byte) []byte { b[4] = 9; return reseal(b) }), "unknown version 9"},
		{"header checksum", edit(func(b []byte) []byte { b[9] ^= 1; return b }), "header checksum"},
		{"entry size", edit(func(b []byte) []byte { b[6] = 64; return reseal(b) }), "entry size 64"},
		{"count too big", edit(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[8:], 1<<60); return reseal(b) }), "offset 8"},
		{"count too small", edit(func(b []byte) []byte { b[8]--; return reseal(b) }), "offset 8"},
		{"truncated body", reseal(bytes.Clone(good[:len(good)-1])), "offset 8"},
		{"body checksum", edit(func(b []byte) []byte { b[e1+40] ^= 0x10; return b }), "body checksum"},
		{"bad status", edit(func(b []byte) []byte { b[e1+tableStatusOff] = 0; return reseal(b) }), fmt.Sprintf("offset %d", e1+tableStatusOff)},
		{"status too big", edit(func(b []byte) []byte { b[e1+tableStatusOff] = 5; return reseal(b) }), "bad status 5"},
		{"reserved", edit(func(b []byte) []byte { b[e1+tableStatusOff+3] = 1; return reseal(b) }), fmt.Sprintf("offset %d", e1+tableStatusOff+3)},
		{"unsorted", edit(func(b []byte) []byte {
			tmp := bytes.Clone(b[e1 : e1+tableEntrySize])
			copy(b[e1:], b[e1+tableEntrySize:e1+2*tableEntrySize])
			copy(b[e1+tableEntrySize:], tmp)
			return reseal(b)
		}), "not in ascending"},
		{"duplicate", edit(func(b []byte) []byte {
			copy(b[e1:e1+32], b[e1-tableEntrySize:])
			return reseal(b)
		}), fmt.Sprintf("offset %d", e1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := New()
			r.ApplyIntent(&Intent{Fingerprint: Fingerprint{42}}, Loc{})
			err := r.LoadTable(tc.b)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.where) {
				t.Fatalf("LoadTable = %v, want ErrCorrupt mentioning %q", err, tc.where)
			}
			if s := r.Stats(); s.Entries != 1 || s.TableEntries != 0 {
				t.Fatalf("a failed LoadTable changed the ledger: %+v", s)
			}
		})
	}
	// Every single-bit flip is caught.
	for i := range len(good) * 8 {
		b := bytes.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		if err := New().LoadTable(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit flip %d not detected: %v", i, err)
		}
	}
}

// TestCheckpointConcurrent runs actions while checkpointing, then crashes:
// the recovered ledger (last checkpoint table + journal after its mark)
// knows every certificate, so no certified exec runs again.
func TestCheckpointConcurrent(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	ctx := context.Background()
	j, l := newMemJournal(), New()
	n := 400
	if testing.Short() {
		n = 150
	}
	ins := make([]*Intent, n)
	for i := range ins {
		ins[i] = mustIntent(t, "tool", fmt.Sprintf(`{"i":%d}`, i), uint64(i), 0, rng.IntN(2) == 0)
	}
	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	exec := func(ctx context.Context, key string) ([]byte, error) {
		mu.Lock()
		calls[key]++
		mu.Unlock()
		return []byte(key), nil
	}
	var (
		lastTable []byte
		lastMark  int
	)
	stop := make(chan struct{})
	checkpointed := make(chan struct{})
	go func() {
		defer close(checkpointed)
		// At least one checkpoint, however late this goroutine runs: on
		// a loaded machine the actions may all be done before it starts.
		for {
			var mark int
			tbl := l.Checkpoint(nil, func() { mark = j.len() })
			lastTable, lastMark = tbl, mark
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				if _, err := l.Do(ctx, j, ins[i], exec); err != nil {
					t.Errorf("Do %d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-checkpointed

	r := New()
	if err := r.LoadTable(lastTable); err != nil {
		t.Fatal(err)
	}
	j.replay(t, r, lastMark, false)
	if r.Len() != n || len(r.InDoubt()) != 0 {
		t.Fatalf("recovered Len %d, in doubt %d; want %d certified", r.Len(), len(r.InDoubt()), n)
	}
	for i, in := range ins {
		res, err := r.Do(ctx, j, in, exec)
		if err != nil || string(res) != in.Key {
			t.Fatalf("recovered Do %d = %q, %v", i, res, err)
		}
	}
	for k, c := range calls {
		if c != 1 {
			t.Fatalf("exec for %s ran %d times", k, c)
		}
	}
	if s := l.Stats(); s.MapEntries > n || s.Entries != n {
		t.Fatalf("Stats %+v", s)
	}
}

// TestRandomCrashes drives random actions through random crashes (the
// journal stops accepting writes after a random number of them) and
// recoveries, with random checkpoints, and checks I3 on the history: an
// exec never runs after its certificate is durable, an in-doubt one reruns
// only if idempotent and always with the same key.
func TestRandomCrashes(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	ctx := context.Background()
	rounds := 300
	if testing.Short() {
		rounds = 100
	}
	const nActions = 12
	ins := make([]*Intent, nActions)
	for i := range ins {
		ins[i] = mustIntent(t, "tool", fmt.Sprintf(`[%d]`, i), 1, uint32(i), i%3 != 0)
	}
	j := newMemJournal()
	certified := map[Fingerprint]bool{} // durable done/resolved certificates
	calls := map[string]int{}
	var table []byte
	mark := 0
	l := New()
	for round := range rounds {
		j.crashAfter(rng.IntN(6))
		for range 1 + rng.IntN(6) {
			in := ins[rng.IntN(nActions)]
			before := j.len()
			inDoubt := lastRecordIsIntent(t, j.records(), in.Fingerprint)
			fail := rng.IntN(4) == 0
			_, err := l.Do(ctx, j, in, func(ctx context.Context, key string) ([]byte, error) {
				if certified[in.Fingerprint] {
					t.Fatalf("seed %d round %d: exec of a certified action", seed, round)
				}
				if inDoubt && !in.Idempotent {
					t.Fatalf("seed %d round %d: exec of an in-doubt non-idempotent action", seed, round)
				}
				if key != in.Key {
					t.Fatalf("exec with key %q, want %q", key, in.Key)
				}
				calls[key]++
				if fail {
					return nil, errors.New("flaky")
				}
				return []byte("ok"), nil
			})
			for _, rec := range j.records()[before:] {
				if c, derr := DecodeCertificate(rec); derr == nil && c.Status.certified() {
					certified[c.Fingerprint] = true
				}
				if inDoubt {
					if _, derr := DecodeIntent(rec); derr == nil {
						t.Fatalf("seed %d round %d: a second intent for an in-doubt action", seed, round)
					}
				}
			}
			if errors.Is(err, ErrInDoubt) {
				if !inDoubt {
					t.Fatalf("seed %d round %d: ErrInDoubt for an action not in doubt", seed, round)
				}
				if in.Idempotent {
					t.Fatalf("seed %d: ErrInDoubt for an idempotent action", seed)
				}
				if rng.IntN(2) == 0 {
					before := j.len()
					if rerr := l.Resolve(ctx, j, in, []byte("manual")); rerr == nil {
						for _, rec := range j.records()[before:] {
							if c, derr := DecodeCertificate(rec); derr == nil && c.Status.certified() {
								certified[c.Fingerprint] = true
							}
						}
					}
				}
			}
		}
		if rng.IntN(5) == 0 {
			table = l.Checkpoint(nil, func() { mark = j.len() })
		}
		// Crash and recover.
		j.revive()
		l = New()
		if table != nil {
			if err := l.LoadTable(table); err != nil {
				t.Fatal(err)
			}
		}
		j.replay(t, l, mark, rng.IntN(2) == 0)
		for fp := range certified {
			if e, ok := l.Lookup(fp); !ok || !e.Status.certified() {
				t.Fatalf("seed %d round %d: certified %s recovered as %+v", seed, round, fp, e)
			}
		}
	}
}

// lastRecordIsIntent reports whether the last record of fp in the log is an
// intent: the action is in doubt.
func lastRecordIsIntent(t *testing.T, recs [][]byte, fp Fingerprint) bool {
	t.Helper()
	doubt := false
	for _, rec := range recs {
		if in, err := DecodeIntent(rec); err == nil {
			if in.Fingerprint == fp {
				doubt = true
			}
			continue
		}
		c, err := DecodeCertificate(rec)
		if err != nil {
			t.Fatal(err)
		}
		if c.Fingerprint == fp {
			doubt = false
		}
	}
	return doubt
}

// TestTableFindSkewed checks lookups in tables whose fingerprints are far
// from uniform (shared prefixes, clusters, extremes), where interpolation
// guesses badly and bisection must take over.
func TestTableFindSkewed(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 4))
	gens := map[string]func(i int) Fingerprint{
		"shared 8-byte prefix": func(i int) Fingerprint {
			var fp Fingerprint
			binary.BigEndian.PutUint64(fp[8:], rng.Uint64())
			return fp
		},
		"clustered": func(i int) Fingerprint {
			var fp Fingerprint
			if i%10 == 0 {
				binary.BigEndian.PutUint64(fp[:], rng.Uint64())
			} else {
				binary.BigEndian.PutUint64(fp[:], uint64(i))
			}
			fp[31] = byte(i)
			return fp
		},
		"extremes": func(i int) Fingerprint {
			var fp Fingerprint
			switch i % 3 {
			case 0:
				binary.BigEndian.PutUint64(fp[:], math.MaxUint64-uint64(rng.IntN(4)))
			case 1:
				binary.BigEndian.PutUint64(fp[:], uint64(rng.IntN(4)))
			default:
				binary.BigEndian.PutUint64(fp[:], 1<<63)
			}
			binary.BigEndian.PutUint64(fp[24:], rng.Uint64())
			return fp
		},
	}
	for name, gen := range gens {
		t.Run(name, func(t *testing.T) {
			l := New()
			var fps []Fingerprint
			for i := range 3000 {
				fp := gen(i)
				fps = append(fps, fp)
				l.ApplyCertificate(&Certificate{Fingerprint: fp, Status: StatusDone}, Loc{Segment: 1, Offset: int64(i)}, false)
			}
			r := New()
			if err := r.LoadTable(l.AppendTable(nil)); err != nil {
				t.Fatal(err)
			}
			for _, fp := range fps {
				if _, ok := r.Lookup(fp); !ok {
					t.Fatalf("%s not found", fp)
				}
				for _, d := range []int{0, 8, 31} {
					miss := fp
					miss[d] ^= 0x40
					_, inMap := l.Lookup(miss)
					if _, ok := r.Lookup(miss); ok != inMap {
						t.Fatalf("%s: found %v, want %v", miss, ok, inMap)
					}
				}
			}
		})
	}
}

// stallingJournal appends a certificate to the log, then stalls before
// returning it, holding open the window in which the record is in the log
// but not yet applied to the index.
type stallingJournal struct {
	*memJournal
	stalled, release chan struct{}
}

func (j *stallingJournal) WriteCertificate(ctx context.Context, c *Certificate) (Loc, error) {
	loc, err := j.memJournal.WriteCertificate(ctx, c)
	close(j.stalled)
	<-j.release
	return loc, err
}

// TestCheckpointWaitsForJournalWrite: a Checkpoint that starts while a
// certificate is in the log but not yet applied must not take its mark
// before the certificate is applied, or recovery from (table, mark) would
// lose the certificate and see the action in doubt.
func TestCheckpointWaitsForJournalWrite(t *testing.T) {
	ctx := context.Background()
	j := &stallingJournal{memJournal: newMemJournal(), stalled: make(chan struct{}), release: make(chan struct{})}
	l := New()
	in := mustIntent(t, "t", `{"w":1}`, 1, 0, true)
	doDone := make(chan error, 1)
	go func() {
		_, err := l.Do(ctx, j, in, func(context.Context, string) ([]byte, error) { return []byte("ok"), nil })
		doDone <- err
	}()
	<-j.stalled
	var (
		table []byte
		mark  int
	)
	cpDone := make(chan struct{})
	go func() {
		defer close(cpDone)
		table = l.Checkpoint(nil, func() { mark = j.len() })
	}()
	// Without the ordering, Checkpoint would finish here, inside the window.
	// Waiting is only a chance for that bug to show; no outcome depends on
	// how long it takes.
	select {
	case <-cpDone:
	case <-time.After(50 * time.Millisecond):
	}
	close(j.release)
	if err := <-doDone; err != nil {
		t.Fatal(err)
	}
	<-cpDone
	r := New()
	if err := r.LoadTable(table); err != nil {
		t.Fatal(err)
	}
	j.replay(t, r, mark, false)
	if e, _ := r.Lookup(in.Fingerprint); e.Status != StatusDone {
		t.Fatalf("recovered from (table, mark %d): %v, want done", mark, e.Status)
	}
}

// TestTableVersion3 round-trips CheckpointAt's tables: version 3 while
// every location fits its 48-byte entries (offsets below 1 GiB, segments
// in 32 bits), version 2 from the first that does not (what was written
// before it widened), and a table of either version merged with new
// entries by the next checkpoint.
func TestTableVersion3(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	origin := TableOrigin{Gen: 2, Pos: Loc{Segment: 9, Offset: 4096}}
	mark := func() TableOrigin { return origin }
	fits := func() Loc { return Loc{Segment: rng.Uint64N(math.MaxUint32 + 1), Offset: rng.Int64N(1 << 30)} }
	for _, c := range []struct {
		name    string
		n       int
		wide    Loc // the location of entry wideAt (Segment 0: none)
		wideAt  int
		version byte
	}{
		{"empty", 0, Loc{}, 0, 3},
		{"fits", 500, Loc{}, 0, 3},
		{"the largest that fits", 3, Loc{Segment: math.MaxUint32, Offset: 1<<30 - 1}, 1, 3},
		{"an offset of 1 GiB", 300, Loc{Segment: 1, Offset: 1 << 30}, 150, 2},
		{"a segment past 32 bits", 300, Loc{Segment: math.MaxUint32 + 1, Offset: 40}, 299, 2},
		{"the first entry", 10, Loc{Segment: 1 << 40, Offset: 8}, 0, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := New()
			want := map[Fingerprint]Entry{}
			fps := make([]Fingerprint, c.n)
			for i := range fps {
				for k := range fps[i] {
					fps[i][k] = byte(rng.Uint32())
				}
			}
			slices.SortFunc(fps, func(a, b Fingerprint) int { return bytes.Compare(a[:], b[:]) })
			for i, fp := range fps {
				il, cl := fits(), fits()
				if c.wide.Segment != 0 && i == c.wideAt {
					cl = c.wide
				}
				st := Status(1 + rng.IntN(4))
				if c.wide.Segment != 0 && i == c.wideAt {
					st = StatusResolved // a certificate, at the location
				}
				applyEntry(l, want, fp, st, il, cl)
			}
			check := func(what string, tbl []byte, version byte) {
				t.Helper()
				size := tableEntrySizeV3
				if version == 2 {
					size = tableEntrySize
				}
				if tbl[4] != version || len(tbl) != tableHeaderSizeV2+len(want)*size {
					t.Fatalf("%s: version %d, %d bytes; want version %d, %d bytes", what, tbl[4], len(tbl), version, tableHeaderSizeV2+len(want)*size)
				}
				r := New()
				if err := r.LoadTable(tbl); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if o, err := ReadTableOrigin(tbl); err != nil || o != origin {
					t.Fatalf("%s: origin %+v, %v", what, o, err)
				}
				for fp, w := range want {
					if got, ok := r.Lookup(fp); !ok || got.Status != w.Status || got.IntentLoc != w.IntentLoc || got.CertLoc != w.CertLoc {
						t.Fatalf("%s: entry %x: %+v, %v; want %+v", what, fp[:4], got, ok, w)
					}
				}
			}
			tbl := bytes.Clone(l.CheckpointAt(nil, mark))
			check("checkpoint", tbl, c.version)
			// The next checkpoint merges the loaded table with new entries
			// that fit: its version is the first's unless the new ones
			// widen it.
			r := New()
			if err := r.LoadTable(tbl); err != nil {
				t.Fatal(err)
			}
			for range 20 {
				var fp Fingerprint
				for k := range fp {
					fp[k] = byte(rng.Uint32())
				}
				il := fits()
				r.ApplyIntent(&Intent{Fingerprint: fp}, il)
				want[fp] = Entry{Fingerprint: fp, Status: StatusIntent, IntentLoc: il}
			}
			check("merged", r.CheckpointAt(nil, mark), c.version)
		})
	}
}
