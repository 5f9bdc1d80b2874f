package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/google/go-cmp/cmp"
)

// TestIOErrorsAreSticky injects EIO and ENOSPC into writes, syncs and
// segment creation: the failing append and every later one fail with an
// error that wraps the cause and names the segment (I8), and a reopen finds
// every acknowledged record.
func TestIOErrorsAreSticky(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kinds []errorfs.OpKind
		err   error
		// rotate makes the failure hit a segment rotation (spare creation and
		// on-demand creation) rather than the active segment.
		rotate bool
	}{
		{"write EIO", []errorfs.OpKind{errorfs.OpFileWriteAt}, syscall.EIO, false},
		{"sync EIO", []errorfs.OpKind{errorfs.OpFileSyncData}, syscall.EIO, false},
		{"write ENOSPC", []errorfs.OpKind{errorfs.OpFileWriteAt}, syscall.ENOSPC, false},
		{"rotation ENOSPC", []errorfs.OpKind{errorfs.OpCreate, errorfs.OpFileWrite}, syscall.ENOSPC, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			var armed atomic.Bool
			fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if !armed.Load() {
					return nil
				}
				for _, k := range tc.kinds {
					if op.Kind == k {
						return fmt.Errorf("injected on %s: %w", op.Path, tc.err)
					}
				}
				return nil
			}))
			ctx := context.Background()
			l := mustOpen(t, fs, Options{SegmentSize: 4 << 10})
			var acked [][]byte
			for i := range 5 {
				r := rec(i, 300)
				if _, err := l.Append(ctx, r); err != nil {
					t.Fatal(err)
				}
				acked = append(acked, r)
			}
			if tc.rotate {
				// Fill the segment past half, where the spare is prepared in
				// the background; wait for it, remove it, then fill the
				// segment so the next append must rotate while creation fails.
				for l.End().Offset < 2<<10 {
					r := rec(len(acked), 300)
					if _, err := l.Append(ctx, r); err != nil {
						t.Fatal(err)
					}
					acked = append(acked, r)
				}
				for !l.spareReady() {
					l.w.spare <- <-l.w.spare // let the preparation finish
				}
				mem.Remove("wal/" + spareName)
				for l.End().Offset+recordSpan(300) <= 4<<10-sealSpan {
					r := rec(len(acked), 300)
					if _, err := l.Append(ctx, r); err != nil {
						t.Fatal(err)
					}
					acked = append(acked, r)
				}
			}
			armed.Store(true)
			_, err := l.Append(ctx, rec(100, 300))
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), "segment") {
				t.Fatalf("append under %s: %v (want it to wrap %v and name the segment)", tc.name, err, tc.err)
			}
			armed.Store(false)
			if _, err2 := l.Append(ctx, rec(101, 10)); !errors.Is(err2, tc.err) {
				t.Fatalf("append after the failure: %v, want the sticky %v", err2, tc.err)
			}
			if _, err2 := l.AppendAsync(rec(102, 10)).Wait(ctx); !errors.Is(err2, tc.err) {
				t.Fatalf("async append after the failure: %v", err2)
			}
			if err := l.Close(); !errors.Is(err, tc.err) {
				t.Fatalf("Close = %v, want the sticky error", err)
			}
			l = mustOpen(t, mem, Options{SegmentSize: 4 << 10})
			got, _ := readAll(t, l)
			// The failed record may or may not have reached the disk; nothing
			// acknowledged may be missing and nothing else may appear.
			if len(got) > len(acked) && bytes.Equal(got[len(acked)], rec(100, 300)) {
				got = got[:len(acked)]
			}
			if d := cmp.Diff(acked, got); d != "" {
				t.Fatalf("after reopen (-acked +got):\n%s", d)
			}
			l.Close()
		})
	}
}

// smallLog builds a log of three 4 KiB segments (two sealed) written one
// append (one write, one fdatasync) at a time, and returns its files and
// the records with their positions and batch boundaries.
type smallLog struct {
	files   map[string][]byte
	recs    [][]byte
	pos     []Pos
	lastOfB []bool // record i closes its batch
	newest  uint64
}

func buildSmallLog(t *testing.T) smallLog {
	t.Helper()
	fs := vfs.NewMem()
	l := mustOpen(t, fs, Options{SegmentSize: 4 << 10})
	ctx := context.Background()
	var s smallLog
	for i := 0; l.End().Segment < 3 || l.End().Offset < 2500; i++ {
		if i%4 == 3 {
			b := [][]byte{rec(i, 100), rec(i+1000, 150)}
			ps, err := l.AppendBatch(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			s.recs, s.pos, s.lastOfB = append(s.recs, b...), append(s.pos, ps...), append(s.lastOfB, false, true)
			continue
		}
		r := rec(i, 40+i*37%500)
		p, err := l.Append(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		s.recs, s.pos, s.lastOfB = append(s.recs, r), append(s.pos, p), append(s.lastOfB, true)
	}
	s.newest = l.End().Segment
	l.Close()
	s.files = snapshotFS(t, fs)
	for n := range s.files {
		if _, ok := parseSegmentName(n); !ok {
			delete(s.files, n) // damage the segments only
		}
	}
	return s
}

// outcome opens files read-only and reads the whole log.
type outcome struct {
	openErr, readErr error
	recs             [][]byte
	info             RecoveryInfo
}

// memWith returns an in-memory filesystem whose directory wal holds files.
func memWith(t *testing.T, files map[string][]byte) vfs.FS {
	t.Helper()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("wal", 0o700); err != nil {
		t.Fatal(err)
	}
	for n, b := range files {
		f, err := fs.Create("wal/"+n, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(bytes.Clone(b)); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return fs
}

func openDamaged(t *testing.T, files map[string][]byte) outcome {
	t.Helper()
	fs := memWith(t, files)
	var o outcome
	l, err := Open("wal", &Options{FS: fs, ReadOnly: true})
	if err != nil {
		o.openErr = err
		return o
	}
	defer l.Close()
	o.info = l.Recovery()
	r, err := l.NewReader(Pos{})
	if err != nil {
		o.readErr = err
		return o
	}
	defer r.Close()
	for r.Next() {
		o.recs = append(o.recs, bytes.Clone(r.Record()))
	}
	o.readErr = r.Err()
	return o
}

// damageStride is 1 (every byte) except under the race detector, where a
// stride of 7 still lands in every field of every record.
func damageStride() int64 {
	if raceEnabled {
		return 7
	}
	return 1
}

// sameRecs compares record lists (nil and empty alike) and shows a diff.
func sameRecs(t *testing.T, what string, want, got [][]byte) {
	t.Helper()
	if len(want) == len(got) {
		eq := true
		for i := range want {
			if !bytes.Equal(want[i], got[i]) {
				eq = false
				break
			}
		}
		if eq {
			return
		}
	}
	t.Fatalf("%s: records differ (want %d, got %d):\n%s", what, len(want), len(got), cmp.Diff(want, got))
}

// wantCorrupt checks err is a *CorruptionError at segment seg, offset off.
func wantCorrupt(t *testing.T, what string, err error, seg uint64, off int64) {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: got %v, want a corruption error at %d:%d", what, err, seg, off)
	}
	if ce.Segment != seg || ce.Offset != off || ce.Reason == "" || !strings.Contains(ce.File, segmentName(seg)) {
		t.Fatalf("%s: corruption reported at %d:%d (%s, %q), want %d:%d", what, ce.Segment, ce.Offset, ce.File, ce.Reason, seg, off)
	}
}

// locate returns the index of the record whose header or payload holds
// byte b of segment seg, or -1.
func (s smallLog) locate(seg uint64, b int64) int {
	for i, p := range s.pos {
		if p.Segment == seg && b >= p.Offset && b < p.Offset+RecordHeaderSize+int64(len(s.recs[i])) {
			return i
		}
	}
	return -1
}

// sealOf returns the offset of segment seg's seal (it follows its last record).
func (s smallLog) sealOf(seg uint64) int64 {
	var end int64
	for i, p := range s.pos {
		if p.Segment == seg {
			end = p.Offset + recordSpan(len(s.recs[i]))
		}
	}
	return end
}

// firstOf is the index of segment seg's first record (len(recs) if none).
func (s smallLog) firstOf(seg uint64) int {
	for i, p := range s.pos {
		if p.Segment >= seg {
			return i
		}
	}
	return len(s.recs)
}

// lastBatchStart is the index of the first record of the last batch.
func (s smallLog) lastBatchStart() int {
	i := len(s.recs) - 1
	for i > 0 && !s.lastOfB[i-1] {
		i--
	}
	return i
}

// TestBitFlipEveryByte flips one bit in every byte of every segment of a
// small log: each case either reads back exactly (the flip hit padding or
// unused space), trims exactly the last batch as a torn tail, or reports a
// corruption error at the damaged record. Never silent, never a panic.
func TestBitFlipEveryByte(t *testing.T) {
	s := buildSmallLog(t)
	cases := 0
	for name, data := range s.files {
		seg, _ := parseSegmentName(name)
		for b := int64(0); b < int64(len(data)); b += damageStride() {
			damaged := map[string][]byte{}
			for n, d := range s.files {
				damaged[n] = d
			}
			c := bytes.Clone(data)
			c[b] ^= 1 << (b % 8)
			damaged[name] = c
			what := fmt.Sprintf("bit %d of byte %d of segment %d", b%8, b, seg)
			o := openDamaged(t, damaged)
			cases++
			i := s.locate(seg, b)
			switch {
			case b < SegmentHeaderSize && seg == s.newest:
				wantCorrupt(t, what, o.openErr, seg, 0)
			case b < SegmentHeaderSize:
				// A sealed segment's header is checked by its first read.
				if o.openErr != nil {
					t.Fatalf("%s: Open: %v", what, o.openErr)
				}
				wantCorrupt(t, what, o.readErr, seg, 0)
				sameRecs(t, what, s.recs[:s.firstOf(seg)], o.recs)
			case seg != s.newest && i >= 0:
				if o.openErr != nil {
					t.Fatalf("%s: Open: %v", what, o.openErr)
				}
				wantCorrupt(t, what, o.readErr, seg, s.pos[i].Offset)
				sameRecs(t, what, s.recs[:i], o.recs)
			case seg != s.newest && b >= s.sealOf(seg) && b < s.sealOf(seg)+sealSpan:
				wantCorrupt(t, what, o.readErr, seg, s.sealOf(seg))
			case seg == s.newest && i >= s.lastBatchStart():
				if o.openErr != nil || o.readErr != nil {
					t.Fatalf("%s: a flip in the last batch must read as a torn tail: %v %v", what, o.openErr, o.readErr)
				}
				sameRecs(t, what, s.recs[:s.lastBatchStart()], o.recs)
				if o.info.TornRecords == 0 {
					t.Fatalf("%s: torn tail not counted: %+v", what, o.info)
				}
			case seg == s.newest && i >= 0:
				wantCorrupt(t, what, o.openErr, seg, s.pos[i].Offset)
			default: // padding, or unused space
				if o.openErr != nil || o.readErr != nil {
					t.Fatalf("%s: %v %v", what, o.openErr, o.readErr)
				}
				sameRecs(t, what, s.recs, o.recs)
			}
		}
	}
	t.Logf("%d bit flips over %d records in %d segments", cases, len(s.recs), len(s.files))
}

// TestSealedHeaderCheckedOnRead: Open does not open sealed segments, so a
// damaged sealed header leaves a writable Open working; ReadAt and a
// Reader report the damage at the segment's offset 0 the first time they
// open it, and the other segments stay readable.
func TestSealedHeaderCheckedOnRead(t *testing.T) {
	s := buildSmallLog(t)
	files := map[string][]byte{}
	for n, d := range s.files {
		files[n] = bytes.Clone(d)
	}
	files[segmentName(1)][0] ^= 0xff // the magic
	l := mustOpen(t, memWith(t, files), Options{SegmentSize: 4 << 10})
	defer l.Close()
	for i := 0; i < 2; i++ { // the second call must not find a cached handle
		_, err := l.ReadAt(s.pos[0])
		wantCorrupt(t, "ReadAt in the damaged segment", err, 1, 0)
	}
	i := s.firstOf(2)
	got, err := l.ReadAt(s.pos[i])
	if err != nil || !bytes.Equal(got, s.recs[i]) {
		t.Fatalf("ReadAt(%v) in an intact segment: %v", s.pos[i], err)
	}
	r, err := l.NewReader(Pos{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Next() {
		t.Fatalf("Reader read a record of a segment whose header is damaged")
	}
	wantCorrupt(t, "Reader", r.Err(), 1, 0)
}

// TestTruncateEveryByte truncates each segment at every length: the newest
// segment loses exactly the records past the cut (its torn tail), while a
// cut into a sealed segment is reported where the data stops.
func TestTruncateEveryByte(t *testing.T) {
	s := buildSmallLog(t)
	cases := 0
	for name, data := range s.files {
		seg, _ := parseSegmentName(name)
		for n := int64(0); n < int64(len(data)); n += damageStride() {
			damaged := map[string][]byte{}
			for k, d := range s.files {
				damaged[k] = d
			}
			damaged[name] = data[:n]
			what := fmt.Sprintf("segment %d cut at %d", seg, n)
			o := openDamaged(t, damaged)
			cases++
			// Records wholly before the cut: every one (a reader of a sealed
			// segment stops at the damage), and whole batches only (recovery
			// trims a torn batch from the newest segment).
			keep, keepBatches := 0, 0
			for i, p := range s.pos {
				if p.Segment < seg || (p.Segment == seg && p.Offset+recordSpan(len(s.recs[i])) <= n) {
					keep = i + 1
					if s.lastOfB[i] {
						keepBatches = i + 1
					}
				}
			}
			switch {
			case n < SegmentHeaderSize:
				wantCorrupt(t, what, o.openErr, seg, 0)
			case seg == s.newest:
				if o.openErr != nil || o.readErr != nil {
					t.Fatalf("%s: %v %v", what, o.openErr, o.readErr)
				}
				sameRecs(t, what, s.recs[:keepBatches], o.recs)
			case n < s.sealOf(seg)+sealSpan:
				if o.openErr != nil {
					t.Fatalf("%s: Open: %v", what, o.openErr)
				}
				// The first record (or the seal) that the cut reaches.
				off := s.sealOf(seg)
				for i, p := range s.pos {
					if p.Segment == seg && p.Offset+recordSpan(len(s.recs[i])) > n {
						off = p.Offset
						break
					}
				}
				wantCorrupt(t, what, o.readErr, seg, off)
				sameRecs(t, what, s.recs[:keep], o.recs)
			default:
				if o.openErr != nil || o.readErr != nil || len(o.recs) != len(s.recs) {
					t.Fatalf("%s: %v %v, %d records", what, o.openErr, o.readErr, len(o.recs))
				}
			}
		}
	}
	t.Logf("%d truncations", cases)
}
