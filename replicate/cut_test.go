package replicate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

// cutFixture is a log of n records of growing size in dir/wal.
func cutFixture(t *testing.T, n int) (dir string, recs [][]byte, pos []wal.Pos, end wal.Pos) {
	t.Helper()
	dir = t.TempDir()
	l, err := wal.Open(filepath.Join(dir, layout.WALDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		rec := bytes.Repeat([]byte{byte(i + 1)}, 100+i*10) // all in the first segment
		p, err := l.Append(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		recs, pos = append(recs, rec), append(pos, p)
	}
	end = l.End()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, recs, pos, end
}

// readAll reads every record of the log in dir/wal, opened writable (as
// the engine opens it) or read-only.
func readAll(t *testing.T, dir string, readOnly bool) (*wal.Log, [][]byte) {
	t.Helper()
	l, err := wal.Open(filepath.Join(dir, layout.WALDir), &wal.Options{ReadOnly: readOnly})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := l.NewReader(wal.Pos{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var got [][]byte
	for rd.Next() {
		got = append(got, bytes.Clone(rd.Record()))
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return l, got
}

// TestCutLog: a cut leaves exactly the records before it, a log that
// appends after them, and reads them back after a reopen; a cut that a
// crash interrupted (only its last chunks zeroed) leaves a prefix of the
// records, which a second cut finishes.
func TestCutLog(t *testing.T) {
	dir, recs, pos, end := cutFixture(t, 60)
	const at = 40
	if pos[0].Segment != end.Segment {
		t.Fatalf("the fixture spans segments %d to %d", pos[0].Segment, end.Segment)
	}
	// A crash after the last 2 KiB were zeroed: what is left must be a
	// prefix.
	seg := filepath.Join(dir, layout.WALDir, fmt.Sprintf("%016x.wal", pos[at].Segment))
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	lo := max(pos[at].Offset, end.Offset-2048)
	if _, err := f.WriteAt(make([]byte, end.Offset-lo), lo); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l, got := readAll(t, dir, true)
	l.Close()
	if len(got) <= at || len(got) >= len(recs) {
		t.Fatalf("after half a cut: %d records, want between %d and %d", len(got), at, len(recs))
	}
	for i := range got {
		if !bytes.Equal(got[i], recs[i]) {
			t.Fatalf("after half a cut, record %d differs", i)
		}
	}
	// The cut again, from the log's end now.
	l, err = wal.Open(filepath.Join(dir, layout.WALDir), &wal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	end2 := l.End()
	l.Close()
	if reason, err := cutLog(dir, pos[at], end2, false, wal.Pos{}); err != nil || reason != "" {
		t.Fatalf("cut at %v: %q %v", pos[at], reason, err)
	}
	l, got = readAll(t, dir, false)
	if len(got) != at {
		t.Fatalf("after the cut at record %d: %d records", at, len(got))
	}
	if _, err := l.Append(ctx, []byte("after the cut")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, got = readAll(t, dir, true)
	l.Close()
	if len(got) != at+1 || string(got[at]) != "after the cut" || !bytes.Equal(got[at-1], recs[at-1]) {
		t.Fatalf("after the cut and an append: %d records", len(got))
	}
}

// TestCutLogRefused: a cut is refused, changing nothing, when the records
// to cut are not all in the newest segment or unsealed, or when
// CHECKPOINT replays from past the cut.
func TestCutLogRefused(t *testing.T) {
	dir, _, pos, end := cutFixture(t, 20)
	cp := layout.Checkpoint{Gen: 1, Replay: pos[15]}
	if err := os.WriteFile(filepath.Join(dir, layout.CheckpointName), cp.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at, end wal.Pos
		sealed  bool
		want    string
	}{
		{pos[10], end, false, "replays from"},
		{pos[16], wal.Pos{Segment: end.Segment + 1, Offset: 40}, false, "newest segment"},
		{pos[16], end, true, "newest segment"},
		{wal.Pos{Segment: pos[16].Segment, Offset: pos[16].Offset + 4}, end, false, "no record"},
	} {
		reason, err := cutLog(dir, c.at, c.end, c.sealed, wal.Pos{})
		if err != nil || !strings.Contains(reason, c.want) {
			t.Errorf("cut at %v (end %v, sealed %v): %q %v, want a refusal naming %q", c.at, c.end, c.sealed, reason, err, c.want)
		}
	}
	l, got := readAll(t, dir, true)
	l.Close()
	if len(got) != 20 {
		t.Errorf("a refused cut changed the log: %d records, want 20", len(got))
	}
}
