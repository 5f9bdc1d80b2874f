package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/engine"
)

const statsUsage = "stats DIR [--json] [--keyring FILE]"

const statsAbout = `Stats reports, read-only, the sizes and counts of the store in DIR: files,
records and atoms per kind, runs per status (active, completed, failed,
cancelled), bytes per atom, compression ratio and dictionaries, log
segments, and snapshot ages (atoms since each run's last snapshot, as of
the last engine checkpoint).
Exit 0 on success, 1 if a record cannot be decoded, 2 on a usage or I/O error.`

const statsExamples = `  continuumctl stats ./agent-store
  continuumctl stats --json ./agent-store`

type statsView struct {
	Store            string           `json:"store"`
	Dir              string           `json:"dir"`
	TotalBytes       int64            `json:"total_bytes"`
	Files            map[string]int64 `json:"files"`
	Runs             int              `json:"runs"`
	RunsByStatus     map[string]int   `json:"runs_by_status"` // active, completed, failed, cancelled: each, 0 included
	Atoms            int64            `json:"atoms"`
	Records          int64            `json:"records"`
	LogBytes         int64            `json:"log_bytes"`
	RawBytes         int64            `json:"raw_bytes"`
	CompressionRatio float64          `json:"compression_ratio"` // raw_bytes / log_bytes
	AtomBytes        int64            `json:"atom_bytes"`        // stored atom records
	BytesPerAtom     float64          `json:"bytes_per_atom"`    // log_bytes / atoms: everything an atom costs in the log
	Kinds            []kindView       `json:"kinds"`
	Dicts            []dictView       `json:"dictionaries"`
	Segments         []segmentView    `json:"segments"`
	SegmentBytes     int64            `json:"segment_bytes"`
	TornBytes        int64            `json:"torn_bytes"`
	SnapshotAges     []snapAgeView    `json:"snapshot_ages"`
}

type kindView struct {
	Kind     string `json:"kind"`
	Records  int64  `json:"records"`
	Bytes    int64  `json:"bytes"`
	RawBytes int64  `json:"raw_bytes"`
}

type dictView struct {
	ID      uint32 `json:"id"`
	Bytes   int    `json:"bytes"`
	Records int64  `json:"records"`
}

type segmentView struct {
	ID     uint64 `json:"id"`
	Bytes  int64  `json:"bytes"`
	Sealed bool   `json:"sealed"`
}

type snapAgeView struct {
	Run         string `json:"run"`
	LastSeq     uint64 `json:"last_seq"`
	SnapshotSeq uint64 `json:"snapshot_seq"`
	AtomsSince  uint64 `json:"atoms_since"`
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(int64(float64(a)/float64(b)*1000+0.5)) / 1000
}

func runStats(args []string, stdout, stderr io.Writer) int {
	fs := ctl.Flags("stats", statsUsage, statsAbout, statsExamples, stderr)
	keyring := keyringFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return cli.UsageErr(fs, stderr, "want one store directory, got %d arguments", len(pos))
	}
	dir := pos[0]
	in, code := openInspector("stats", dir, *keyring, stderr)
	if in == nil {
		return code
	}
	defer in.Close()
	st := in.Stats()
	v := statsView{Store: in.StoreID(), Dir: dir, TotalBytes: st.TotalBytes, Files: st.Files, Runs: st.Runs,
		Atoms: st.Atoms, Records: st.Records, LogBytes: st.LogBytes, RawBytes: st.RawBytes,
		CompressionRatio: ratio(st.RawBytes, st.LogBytes), BytesPerAtom: ratio(st.LogBytes, st.Atoms),
		Kinds: []kindView{}, Dicts: []dictView{}, Segments: []segmentView{}, SegmentBytes: st.SegmentBytes,
		TornBytes: st.TornBytes, SnapshotAges: []snapAgeView{}}
	for _, k := range st.Kinds {
		v.Kinds = append(v.Kinds, kindView(k))
		if k.Kind == "atom" {
			v.AtomBytes = k.Bytes
		}
	}
	for _, d := range st.Dicts {
		v.Dicts = append(v.Dicts, dictView{ID: d.ID, Bytes: d.Size, Records: d.Records})
	}
	for _, s := range st.Segments {
		v.Segments = append(v.Segments, segmentView{ID: s.ID, Bytes: s.Size, Sealed: s.Sealed})
	}
	v.RunsByStatus = map[string]int{}
	for _, st := range statuses {
		v.RunsByStatus[st] = 0
	}
	for _, r := range in.Runs() {
		v.RunsByStatus[r.Status]++
		v.SnapshotAges = append(v.SnapshotAges, snapAgeView{Run: r.ID, LastSeq: r.LastSeq, SnapshotSeq: r.SnapshotSeq,
			AtomsSince: r.LastSeq - min(r.SnapshotSeq, r.LastSeq)})
	}
	if *asJSON {
		return done(stderr, "stats", writeJSON(stdout, v))
	}
	printStats(stdout, v, st)
	return cli.ExitOK
}

func printStats(w io.Writer, v statsView, st engine.StoreStats) {
	fmt.Fprintf(w, "store %s at %s\n", v.Store, v.Dir)
	fmt.Fprintf(w, "files: %s in all (log segments are preallocated; see segments)\n", size(v.TotalBytes))
	for _, name := range sortedKeys(v.Files) {
		fmt.Fprintf(w, "  %-22s %12s\n", name, size(v.Files[name]))
	}
	fmt.Fprintf(w, "log: %d records, %s stored, %s decompressed: compression ratio %.2fx\n",
		v.Records, size(v.LogBytes), size(v.RawBytes), v.CompressionRatio)
	fmt.Fprintf(w, "  %-12s %9s %12s %12s\n", "KIND", "RECORDS", "STORED", "RAW")
	for _, k := range v.Kinds {
		fmt.Fprintf(w, "  %-12s %9d %12s %12s\n", k.Kind, k.Records, size(k.Bytes), size(k.RawBytes))
	}
	fmt.Fprintf(w, "runs: %d%s, atoms: %d\n", v.Runs, statusWords(v.RunsByStatus), v.Atoms)
	if v.Atoms > 0 {
		fmt.Fprintf(w, "bytes per atom: %.1f in the log (every record), %.1f in atom records\n",
			v.BytesPerAtom, ratio(v.AtomBytes, v.Atoms))
	}
	if len(v.Dicts) == 0 {
		fmt.Fprintf(w, "dictionaries: none (records compressed alone)\n")
	}
	for _, d := range v.Dicts {
		fmt.Fprintf(w, "dictionary %d: %s, used by %d records\n", d.ID, size(int64(d.Bytes)), d.Records)
	}
	fmt.Fprintf(w, "segments: %d, %s on disk\n", len(v.Segments), size(v.SegmentBytes))
	for _, s := range v.Segments {
		state := "active"
		if s.Sealed {
			state = "sealed"
		}
		fmt.Fprintf(w, "  %016x.wal %12s %s\n", s.ID, size(s.Bytes), state)
	}
	if v.TornBytes > 0 {
		fmt.Fprintf(w, "torn tail: %d bytes of an incomplete record (left in place; the next open trims it)\n", v.TornBytes)
	}
	fmt.Fprintf(w, "snapshot ages (atoms since the last snapshot):\n")
	for _, a := range v.SnapshotAges {
		snap := fmt.Sprintf("seq %d", a.SnapshotSeq)
		if a.SnapshotSeq == 0 {
			snap = "none"
		}
		fmt.Fprintf(w, "  %-24s last seq %6d, snapshot %-10s %6d atoms behind\n", clip(a.Run, 24), a.LastSeq, snap, a.AtomsSince)
	}
}

// statuses are the statuses of a run, in the order stats lists them.
var statuses = []string{"active", "completed", "failed", "cancelled"}

// statusWords counts runs by status for people: " (2 active, 1
// completed)", the statuses with no run left out; "" for no run.
func statusWords(by map[string]int) string {
	var parts []string
	for _, st := range statuses {
		if by[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", by[st], st))
		}
	}
	for _, st := range sortedKeys(by) { // a status this version does not name
		if !slices.Contains(statuses, st) && by[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", by[st], st))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
