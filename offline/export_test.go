package offline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/offline"
	"github.com/continuumdb/continuum/wal"
)

// exportStore writes a store with one run, "deploy-42", of four atoms:
//
//	1  an action whose result is JSON; sets the objective
//	2  an action whose result is text that is not JSON
//	3  an action whose result is not UTF-8
//	4  no action, an empty delta
func exportStore(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	ctx := context.Background()
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	run, err := db.Run(ctx, "deploy-42")
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		tool   string
		result []byte
		delta  *frame.Delta
	}{
		{"billing.charge", []byte(`{"charge":"ch_1","status":"paid"}`), new(frame.Delta).SetObjective("deploy <checkout> & bill")},
		{"email.send", []byte("queued, id 7"), new(frame.Delta).Set("email", []byte("sent"))},
		{"blob.get", []byte{0xff, 0x00, 0xfe}, new(frame.Delta).AppendScratch([]byte("fetched"))},
		{"", nil, new(frame.Delta)},
	} {
		atom, err := run.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if step.tool != "" {
			act := ledger.Action{Tool: step.tool, Args: []byte(fmt.Sprintf(`{"seq":%d}`, atom.Seq()))}
			if _, err := atom.Do(ctx, act, func(context.Context, string) ([]byte, error) { return step.result, nil }); err != nil {
				t.Fatal(err)
			}
		}
		if err := atom.Commit(ctx, step.delta); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func inspect(t *testing.T, dir string) *offline.Inspector {
	t.Helper()
	in, err := offline.Inspect(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return in
}

// lines splits JSON Lines output, checking that it ends with a newline.
func lines(t *testing.T, out string) []string {
	t.Helper()
	if out == "" {
		return nil
	}
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("output does not end with a newline: %q", out)
	}
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

// TestExportRange: from and to select seqs inclusively, 0 meaning the
// first and the last; each line is the ExportedAtom of in.Atom for its
// seq; a reversed range and an unknown run are errors that write nothing.
func TestExportRange(t *testing.T) {
	ctx := context.Background()
	in := inspect(t, exportStore(t))
	for _, tc := range []struct {
		from, to uint64
		want     []uint64
	}{
		{0, 0, []uint64{1, 2, 3, 4}},
		{1, 4, []uint64{1, 2, 3, 4}},
		{2, 3, []uint64{2, 3}},
		{3, 3, []uint64{3}},
		{3, 0, []uint64{3, 4}},
		{2, 99, []uint64{2, 3, 4}},
		{5, 0, nil},
		{5, 9, nil},
	} {
		t.Run(fmt.Sprintf("%d-%d", tc.from, tc.to), func(t *testing.T) {
			var buf bytes.Buffer
			n, err := in.Export(ctx, &buf, "deploy-42", tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			ls := lines(t, buf.String())
			if n != len(tc.want) || len(ls) != len(tc.want) {
				t.Fatalf("wrote %d atoms in %d lines, want %d:\n%s", n, len(ls), len(tc.want), buf.String())
			}
			for i, seq := range tc.want {
				a, err := in.Atom(ctx, "deploy-42", seq)
				if err != nil {
					t.Fatal(err)
				}
				want, err := json.Marshal(offline.NewExportedAtom(a))
				if err != nil {
					t.Fatal(err)
				}
				if ls[i] != string(want) {
					t.Errorf("line %d:\n got %s\nwant %s", i, ls[i], want)
				}
			}
		})
	}
	for _, tc := range []struct {
		run      string
		from, to uint64
		msg      string
	}{
		{"deploy-42", 3, 2, "from seq 3 is after to seq 2"},
		{"nope", 0, 0, `no run "nope"`},
	} {
		var buf bytes.Buffer
		n, err := in.Export(ctx, &buf, tc.run, tc.from, tc.to)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || n != 0 || buf.Len() != 0 {
			t.Errorf("Export(%q, %d, %d): %d atoms, %q written, error %v; want none and an error saying %q",
				tc.run, tc.from, tc.to, n, buf.String(), err, tc.msg)
		}
	}
}

// TestExportValues pins the encoding of each kind of value: JSON is
// embedded as JSON, other UTF-8 text is a string, other bytes are base64,
// an empty delta or action list is [] (never null), an absent value is
// left out; HTML characters are escaped as encoding/json does.
func TestExportValues(t *testing.T) {
	in := inspect(t, exportStore(t))
	var buf bytes.Buffer
	if _, err := in.Export(context.Background(), &buf, "deploy-42", 0, 0); err != nil {
		t.Fatal(err)
	}
	ls := lines(t, buf.String())
	if len(ls) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(ls), buf.String())
	}
	for _, tc := range []struct {
		line int
		want []string // substrings of the line
		not  []string
	}{
		{0, []string{`"delta":[{"op":"set_objective","text":"deploy \u003ccheckout\u003e \u0026 bill"}]`,
			`"args":{"seq":1}`, `"result":{"charge":"ch_1","status":"paid"}`, `"status":"done"`,
			`"tool":"billing.charge"`, `"idempotent":false`, `"intent_pos":"`, `"certificate_pos":"`}, []string{`"error"`, `_bytes"`}},
		{1, []string{`"result":"queued, id 7"`, `"args":{"seq":2}`}, nil},
		{2, []string{`"result":{"base64":"/wD+"}`}, nil},
		{3, []string{`"delta":[]`, `"actions":[]`}, []string{"null"}},
	} {
		for _, w := range tc.want {
			if !strings.Contains(ls[tc.line], w) {
				t.Errorf("line %d lacks %s:\n%s", tc.line, w, ls[tc.line])
			}
		}
		for _, w := range tc.not {
			if strings.Contains(ls[tc.line], w) {
				t.Errorf("line %d holds %s:\n%s", tc.line, w, ls[tc.line])
			}
		}
	}
	// Every line is one object with the documented fields, in order.
	for i, l := range ls {
		dec := json.NewDecoder(strings.NewReader(l))
		var keys []string
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Fatalf("line %d is not an object: %s", i, l)
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, tok.(string))
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				t.Fatal(err)
			}
		}
		if want := []string{"run", "seq", "head", "pos", "size", "raw_size", "delta", "actions"}; !slices.Equal(keys, want) {
			t.Errorf("line %d has fields %v, want %v", i, keys, want)
		}
	}
}

// TestExportedValue: the value encoding on its own, including a cut
// value (not JSON any more: text).
func TestExportedValue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{`{"a": [1, 2]}`, `{"a":[1,2]}`},
		{`"quoted"`, `"quoted"`},
		{`{"a": [1,`, `"{\"a\": [1,"`},
		{"plain <text>", `"plain \u003ctext\u003e"`},
		{"\xff\x00", `{"base64":"/wA="}`},
	} {
		b, err := json.Marshal(struct {
			V offline.ExportedValue `json:"v,omitempty"`
		}{offline.ExportedValue(tc.in)})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"v":` + tc.want + `}`; string(b) != want {
			t.Errorf("%q: %s, want %s", tc.in, b, want)
		}
	}
	b, _ := json.Marshal(offline.NewExportedAction(offline.ActionInfo{Status: ledger.StatusDone}))
	if strings.Contains(string(b), `"args"`) || strings.Contains(string(b), `"result"`) {
		t.Errorf("empty args and result are not left out: %s", b)
	}
	cut := offline.NewExportedAction(offline.ActionInfo{Args: []byte(`{"a":`), ArgsSize: 9, Result: []byte("ok"), ResultSize: 2})
	if cut.ArgsBytes != 9 || cut.ResultBytes != 0 {
		t.Errorf("a cut args of 9 bytes and a whole result: args_bytes %d, result_bytes %d", cut.ArgsBytes, cut.ResultBytes)
	}
}

func TestStatusName(t *testing.T) {
	for _, tc := range []struct {
		a    offline.ActionInfo
		want string
	}{
		{offline.ActionInfo{Status: ledger.StatusDone}, "done"},
		{offline.ActionInfo{Status: ledger.StatusFailed}, "failed"},
		{offline.ActionInfo{Status: ledger.StatusResolved}, "resolved"},
		{offline.ActionInfo{Status: ledger.StatusIntent}, "in-doubt"},
		{offline.ActionInfo{Status: ledger.StatusIntent, Running: true}, "running"},
		{offline.ActionInfo{Status: ledger.StatusDone, Running: true}, "done"},
	} {
		if got := tc.a.StatusName(); got != tc.want {
			t.Errorf("status %v running %v: %q, want %q", tc.a.Status, tc.a.Running, got, tc.want)
		}
	}
}

// TestExportDamage: an atom record damaged after Inspect's pass stops
// Export with an error matching engine.ErrCorrupt (not only the log's own
// error) that names the segment file, and the atoms before it are written
// whole.
func TestExportDamage(t *testing.T) {
	dir := exportStore(t)
	ctx := context.Background()
	in := inspect(t, dir)
	a, err := in.Atom(ctx, "deploy-42", 3)
	if err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "wal", wal.SegmentName(a.Pos.Segment))
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := a.Pos.Offset + wal.RecordHeaderSize + int64(a.Size)/2
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x20
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var buf bytes.Buffer
	n, err := in.Export(ctx, &buf, "deploy-42", 0, 0)
	if !errors.Is(err, engine.ErrCorrupt) || !strings.Contains(err.Error(), seg) {
		t.Fatalf("error %v; want one matching engine.ErrCorrupt that names %s", err, seg)
	}
	if ls := lines(t, buf.String()); n != 2 || len(ls) != 2 || !strings.Contains(ls[1], `"seq":2,`) {
		t.Errorf("wrote %d atoms, output:\n%s\nwant atoms 1 and 2", n, buf.String())
	}
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

// TestExportErrors: an error of w is returned (wrapped), and a done
// context stops Export before it writes.
func TestExportErrors(t *testing.T) {
	in := inspect(t, exportStore(t))
	full := errors.New("disk full")
	if _, err := in.Export(context.Background(), failWriter{full}, "deploy-42", 0, 0); !errors.Is(err, full) {
		t.Errorf("write error: %v, want one wrapping %v", err, full)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var buf bytes.Buffer
	if n, err := in.Export(ctx, &buf, "deploy-42", 0, 0); !errors.Is(err, context.Canceled) || n != 0 || buf.Len() != 0 {
		t.Errorf("cancelled: %d atoms, %q, error %v; want none and context.Canceled", n, buf.String(), err)
	}
}

// BenchmarkExport measures Export of a run of 500 atoms, per atom.
func BenchmarkExport(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "store")
	ctx := context.Background()
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	run, err := db.Run(ctx, "r")
	if err != nil {
		b.Fatal(err)
	}
	const atoms = 500
	for i := range atoms {
		atom, err := run.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		act := ledger.Action{Tool: "search", Args: []byte(fmt.Sprintf(`{"q":%d}`, i))}
		out, err := atom.Do(ctx, act, func(context.Context, string) ([]byte, error) {
			return []byte(`{"hits":["a","b","c"]}`), nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := atom.Commit(ctx, new(frame.Delta).Set("last", out).
			AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: strings.Repeat("thinking ", 30)})); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	in, err := offline.Inspect(ctx, dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	var one bytes.Buffer
	if _, err := in.Export(ctx, &one, "r", 0, 0); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(one.Len()))
	for b.Loop() {
		if _, err := in.Export(ctx, io.Discard, "r", 0, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(atoms)*float64(b.N)/b.Elapsed().Seconds(), "atoms/s")
}

// TestExportEnd: the line of an ended run's last atom carries its end
// (status, time, result, the end's seq and head, as Inspect summarizes
// them); no other line does, nor any line of an active run, nor an export
// that stops before the last atom.
func TestExportEnd(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	for _, id := range []string{"done", "open"} {
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			atom, err := run.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := atom.Commit(ctx, new(frame.Delta).Set("step", []byte(fmt.Sprint(atom.Seq())))); err != nil {
				t.Fatal(err)
			}
		}
		if id == "done" {
			if err := run.End(ctx, engine.StatusCompleted, []byte(`{"deployed":"v2"}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	in := inspect(t, dir)
	sum, _ := in.Run("done")
	if sum.Status != "completed" || sum.Ended.Before(before) {
		t.Fatalf("summary of the ended run: status %q, ended %v", sum.Status, sum.Ended)
	}
	type line struct {
		Seq uint64
		End *struct {
			Seq    uint64
			Head   string
			Status string
			Ended  string
			Result json.RawMessage
		}
	}
	export := func(run string, from, to uint64) []line {
		var buf bytes.Buffer
		if _, err := in.Export(ctx, &buf, run, from, to); err != nil {
			t.Fatal(err)
		}
		var out []line
		for _, l := range lines(t, buf.String()) {
			var v line
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return out
	}
	ls := export("done", 0, 0)
	if len(ls) != 3 {
		t.Fatalf("%d lines, want 3", len(ls))
	}
	for _, l := range ls[:2] {
		if l.End != nil {
			t.Errorf("seq %d carries the end", l.Seq)
		}
	}
	e := ls[2].End
	if e == nil {
		t.Fatal("the last atom's line has no end")
	}
	ended, err := time.Parse(time.RFC3339Nano, e.Ended)
	if e.Seq != 4 || e.Head != sum.EndHead.String() || e.Status != "completed" || string(e.Result) != `{"deployed":"v2"}` ||
		err != nil || !ended.Equal(sum.Ended) {
		t.Errorf("end %+v (result %s), want seq 4, head %s, completed, ended %v", e, e.Result, sum.EndHead, sum.Ended)
	}
	if ls := export("done", 1, 2); len(ls) != 2 || ls[1].End != nil {
		t.Errorf("an export to seq 2 of 3: %+v", ls)
	}
	for _, l := range export("open", 0, 0) {
		if l.End != nil {
			t.Errorf("an active run's seq %d carries an end", l.Seq)
		}
	}
}
