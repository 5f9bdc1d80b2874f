package tamper

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/wal"
)

// Damage is what a scenario does to one file.
type Damage string

const (
	Flip      Damage = "flip"      // XOR one byte with a mask
	Truncate  Damage = "truncate"  // cut the file to a length
	Delete    Damage = "delete"    // remove the file
	Older     Damage = "older"     // replace it with its copy from an earlier Close
	Resurrect Damage = "resurrect" // bring back a file an earlier Close had and the store no longer has
)

// Scenario is one damage to one file of a copy of the store.
type Scenario struct {
	Name   string `json:"name"` // unique, stable for a seed: what -tamper.only matches
	File   string `json:"file"` // slash-separated, relative to the store
	Kind   string `json:"kind"` // the file's kind (fileKind)
	Damage Damage `json:"damage"`
	Offset int64  `json:"offset,omitempty"` // Flip
	Mask   byte   `json:"mask,omitempty"`   // Flip
	Length int64  `json:"length,omitempty"` // Truncate
	From   string `json:"from,omitempty"`   // Older, Resurrect: the tree the file comes from
	// Reach lists, for damage to the log, the runs whose records it
	// touches, each with the first seq touched: verify must name one.
	Reach []RunSeq `json:"reach,omitempty"`
}

// RunSeq is a run and a seq in it, and the kind of the record there that
// the damage reaches first.
type RunSeq struct {
	Run  string `json:"run"`
	Seq  uint64 `json:"seq"`
	Kind string `json:"kind"` // atom, intent, certificate, run, fail, checkpoint
}

// fileKind names the kind of a store file for the report.
func fileKind(rel string) string {
	base := filepath.Base(rel)
	switch {
	case strings.HasPrefix(rel, "wal/"):
		return "wal segment"
	case strings.HasPrefix(rel, "frames/"):
		return "frame file"
	case strings.HasPrefix(rel, "dicts/"):
		return "dictionary"
	case strings.HasPrefix(base, "ledger-") && strings.HasSuffix(base, ".tbl"):
		return "ledger table"
	case rel == "STORE", rel == "CHECKPOINT", rel == "LOCK":
		return rel
	case strings.HasPrefix(rel, "snapshots/"):
		switch {
		case strings.HasSuffix(base, ".sst"):
			return "pebble .sst"
		case strings.HasPrefix(base, "MANIFEST-"):
			return "pebble MANIFEST"
		case strings.HasPrefix(base, "OPTIONS-"):
			return "pebble OPTIONS"
		case strings.HasPrefix(base, "marker."):
			return "pebble marker"
		case strings.HasSuffix(base, ".log"):
			return "pebble WAL"
		case base == "LOCK":
			return "pebble LOCK"
		}
		return "pebble other"
	}
	return "other"
}

// PlanOptions size a plan.
type PlanOptions struct {
	Seed  int64
	Flips int // flipped bytes per file
	Cuts  int // truncation lengths per file
}

// Plan lists the scenarios for the store: per file, opts.Flips flipped
// bytes (half anywhere in the file, half in its written part, before the
// zeros a preallocated file ends with), opts.Cuts truncations (to 0, then
// to seeded lengths, one of them cutting the last written byte), its
// deletion, and its copy from the newest earlier Close that held a
// different one; then every file an earlier Close held and the store no
// longer does, brought back.
func Plan(ctx context.Context, st *Store, opts PlanOptions) ([]Scenario, error) {
	r := rand.New(rand.NewPCG(uint64(opts.Seed), 2))
	files, err := listFiles(st.Dir)
	if err != nil {
		return nil, err
	}
	recs, err := logRecords(ctx, st.Dir)
	if err != nil {
		return nil, err
	}
	var out []Scenario
	add := func(s Scenario) {
		s.Kind = fileKind(s.File)
		out = append(out, s)
	}
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(st.Dir, rel))
		if err != nil {
			return nil, err
		}
		size := int64(len(b))
		extent := int64(len(bytes.TrimRight(b, "\x00")))
		seen := map[int64]bool{}
		for i := range int(min(int64(opts.Flips), size)) {
			span := size
			if i%2 == 0 && extent > 0 {
				span = extent
			}
			off := r.Int64N(span)
			for try := 0; seen[off]; try++ {
				if try < 16 {
					off = r.Int64N(span)
				} else {
					off = (off + 1) % size // a small file: take the next free byte
				}
			}
			seen[off] = true
			mask := byte(1) << r.IntN(8)
			if i%4 == 3 {
				mask = byte(r.IntN(255) + 1) // a whole byte, not a bit
			}
			add(Scenario{Name: fmt.Sprintf("flip %s@%d^%#02x", rel, off, mask), File: rel, Damage: Flip,
				Offset: off, Mask: mask, Reach: reach(rel, recs, off, off+1)})
		}
		cuts := map[int64]bool{}
		for i := 0; i < opts.Cuts && size > 0; i++ {
			var n int64
			switch {
			case i == 0:
				n = 0
			case i == 2 && extent > 0:
				n = extent - 1
			default:
				n = r.Int64N(size)
			}
			if cuts[n] {
				continue
			}
			cuts[n] = true
			add(Scenario{Name: fmt.Sprintf("truncate %s to %d", rel, n), File: rel, Damage: Truncate,
				Length: n, Reach: reach(rel, recs, n, size)})
		}
		add(Scenario{Name: "delete " + rel, File: rel, Damage: Delete, Reach: reach(rel, recs, 0, size)})
		for i, older := range st.Older {
			ob, err := os.ReadFile(filepath.Join(older, rel))
			if err != nil || bytes.Equal(ob, b) {
				continue
			}
			first := int64(0)
			for first < int64(min(len(ob), len(b))) && ob[first] == b[first] {
				first++
			}
			add(Scenario{Name: fmt.Sprintf("older %s from close %d", rel, len(st.Older)-i), File: rel, Damage: Older,
				From: older, Reach: reach(rel, recs, first, max(size, int64(len(ob))))})
			break
		}
	}
	gone := map[string]bool{}
	for i, older := range st.Older {
		ofiles, err := listFiles(older)
		if err != nil {
			return nil, err
		}
		for _, rel := range ofiles {
			if _, err := os.Stat(filepath.Join(st.Dir, rel)); err == nil || gone[rel] {
				continue
			}
			gone[rel] = true
			add(Scenario{Name: fmt.Sprintf("resurrect %s from close %d", rel, len(st.Older)-i), File: rel,
				Damage: Resurrect, From: older})
		}
	}
	return out, nil
}

// Apply makes dst a copy of the store in src with the scenario's damage.
func (s *Scenario) Apply(src, dst string) error {
	if err := copyTree(src, dst); err != nil {
		return err
	}
	name := filepath.Join(dst, filepath.FromSlash(s.File))
	switch s.Damage {
	case Flip:
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		var b [1]byte
		if _, err := f.ReadAt(b[:], s.Offset); err != nil {
			return err
		}
		b[0] ^= s.Mask
		if _, err := f.WriteAt(b[:], s.Offset); err != nil {
			return err
		}
		return f.Close()
	case Truncate:
		return os.Truncate(name, s.Length)
	case Delete:
		return os.Remove(name)
	case Older, Resurrect:
		b, err := os.ReadFile(filepath.Join(s.From, filepath.FromSlash(s.File)))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
			return err
		}
		return os.WriteFile(name, b, 0o600)
	}
	return fmt.Errorf("tamper: unknown damage %q", s.Damage)
}

// listFiles lists the files under dir, slash-separated and sorted.
func listFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	slices.Sort(out)
	return out, err
}

// logRecord is where one record of the pristine log lies.
type logRecord struct {
	pos  wal.Pos
	end  int64 // offset past its header and payload
	run  string
	seq  uint64
	kind string
}

// logRecords reads the pristine log's record map.
func logRecords(ctx context.Context, dir string) ([]logRecord, error) {
	var out []logRecord
	err := engine.Scan(ctx, dir, nil, func(lr *engine.LogRecord) error {
		out = append(out, logRecord{pos: lr.Pos, end: lr.Pos.Offset + wal.RecordHeaderSize + int64(lr.Size),
			run: lr.Run, seq: lr.Seq, kind: lr.Kind})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tamper: record map of the pristine log: %w", err)
	}
	return out, nil
}

// reach lists the runs whose records of the log segment rel overlap the
// bytes [lo, hi), with the first seq of each; damage to the segment header
// reaches every record of the segment. Nil for files other than segments.
func reach(rel string, recs []logRecord, lo, hi int64) []RunSeq {
	seg, ok := segmentID(rel)
	if !ok {
		return nil
	}
	if lo < wal.SegmentHeaderSize {
		lo, hi = 0, 1<<62
	}
	first := map[string]int{} // index in out
	var out []RunSeq
	for _, rec := range recs {
		if rec.pos.Segment != seg || rec.run == "" || rec.end <= lo || rec.pos.Offset >= hi {
			continue
		}
		i, ok := first[rec.run]
		switch {
		case !ok:
			first[rec.run] = len(out)
			out = append(out, RunSeq{Run: rec.run, Seq: rec.seq, Kind: rec.kind})
		case rec.seq < out[i].Seq:
			out[i].Seq, out[i].Kind = rec.seq, rec.kind
		}
	}
	return out
}

// segmentID is the id of the log segment file rel ("wal/%016x.wal").
func segmentID(rel string) (uint64, bool) {
	name, ok := strings.CutPrefix(rel, "wal/")
	if !ok || !strings.HasSuffix(name, ".wal") {
		return 0, false
	}
	id, err := strconv.ParseUint(strings.TrimSuffix(name, ".wal"), 16, 64)
	return id, err == nil
}
