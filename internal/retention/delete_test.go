package retention

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

var (
	errNotEnded = errors.New("not ended")
	errHasForks = errors.New("has forks")
	errDeleted  = errors.New("deleted")
	errInvalid  = errors.New("invalid")
	errErased   = errors.New("erased")
	testErrs    = Errors{NotEnded: errNotEnded, HasForks: errHasForks, Deleted: errDeleted, Invalid: errInvalid, Erased: errErased}
)

// TestErrorsGone: a handle kept of a run gone by a delete record matches
// Deleted, by an erase record Erased.
func TestErrorsGone(t *testing.T) {
	if err := testErrs.Gone(record.KindDelete); err != errDeleted {
		t.Errorf("a deletion: %v", err)
	}
	if err := testErrs.Gone(record.KindErase); err != errErased {
		t.Errorf("an erasure: %v", err)
	}
}

// TestSelectionCheck: a selection that selects nothing valid is refused,
// matching the Invalid sentinel, and names why.
func TestSelectionCheck(t *testing.T) {
	completed := Status{Name: "completed", Final: true}
	for _, tc := range []struct {
		s    Selection
		want string // "" = valid
	}{
		{Selection{IDs: []string{"a"}}, ""},
		{Selection{Status: []Status{completed}}, ""},
		{Selection{EndedBefore: time.Unix(1, 0)}, ""},
		{Selection{}, "name runs, or select them"},
		{Selection{IDs: []string{"a"}, Reason: strings.Repeat("x", record.MaxDeleteReason+1)}, "the limit is"},
		{Selection{IDs: []string{"a"}, Reason: strings.Repeat("x", record.MaxDeleteReason)}, ""},
		{Selection{Status: []Status{completed, {Name: "active"}}}, "status active is not a final status"},
	} {
		err := tc.s.Check(testErrs)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.s, err)
		case tc.want != "" && (!errors.Is(err, errInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want %q matching Invalid", tc.s, err, tc.want)
		}
	}
}

// TestChoose: named runs must exist and have ended, and take their forks
// with them; a policy keeps a run whose fork it does not select (and that
// run's parent, transitively); the result is sorted.
func TestChoose(t *testing.T) {
	t0 := time.Unix(1000, 0)
	runs := []Candidate{
		{ID: "c", Ended: true, Status: "completed", EndedAt: t0},
		{ID: "a", Ended: true, Status: "completed", EndedAt: t0.Add(time.Hour)},
		{ID: "f", Ended: true, Status: "failed", EndedAt: t0},
		{ID: "live"},
		{ID: "new", Creating: true},
		{ID: "p", Ended: true, Status: "completed", EndedAt: t0},
		{ID: "p-fork", Parent: "p", Ended: true, Status: "failed", EndedAt: t0},
		{ID: "p-fork-fork", Parent: "p-fork"},
	}
	deleted := func(id string) bool { return id == "old" }
	for _, tc := range []struct {
		name string
		s    Selection
		want string
		err  error
	}{
		{"by id, sorted", Selection{IDs: []string{"c", "a"}}, "a c", nil},
		{"by id, active", Selection{IDs: []string{"live"}}, "", errNotEnded},
		{"by id, being created", Selection{IDs: []string{"new"}}, "", errNotEnded},
		{"by id, deleted already", Selection{IDs: []string{"old"}}, "", errDeleted},
		{"by id, no such run", Selection{IDs: []string{"nope"}}, "", nil},
		{"by id, with a fork left", Selection{IDs: []string{"p"}}, "", errHasForks},
		{"by id, with a fork's fork left", Selection{IDs: []string{"p", "p-fork"}}, "", errHasForks},
		{"by status, a run with a fork not selected kept", Selection{Status: []Status{{Name: "completed", Final: true}}}, "a c", nil},
		{"by status, a fork kept keeps its parent", Selection{Status: []Status{{Name: "failed", Final: true}}}, "f", nil},
		{"by end time", Selection{EndedBefore: t0.Add(time.Minute)}, "c f", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, err := Choose(tc.s, runs, deleted, testErrs)
			if tc.name == "by id, no such run" {
				if err == nil || !strings.Contains(err.Error(), "no such run") {
					t.Fatalf("%v, %v", ids, err)
				}
				return
			}
			if tc.err != nil {
				if !errors.Is(err, tc.err) || ids != nil {
					t.Fatalf("%v, %v; want %v", ids, err, tc.err)
				}
				return
			}
			if err != nil || strings.Join(ids, " ") != tc.want {
				t.Fatalf("%v, %v; want %s", ids, err, tc.want)
			}
		})
	}
}

// TestReasonText: a delete record says what selected its run.
func TestReasonText(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, tc := range []struct {
		s    Selection
		want string
	}{
		{Selection{IDs: []string{"a"}, Reason: "asked"}, "asked"},
		{Selection{IDs: []string{"a"}}, "deleted by id"},
		{Selection{Status: []Status{{Name: "completed"}, {Name: "failed"}}}, "retention policy: status completed, failed"},
		{Selection{EndedBefore: at}, "retention policy: ended before 2026-01-02T03:04:05.000000006Z"},
	} {
		if got := tc.s.ReasonText(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.s, got, tc.want)
		}
	}
}

// TestDeletionRecord: the delete record decodes to what NewDeletion
// computed, its link extends the run's chain past its end, and its note
// is a final checkpoint of that link, signed when there is a signer (and
// the signature checks).
func TestDeletionRecord(t *testing.T) {
	h, err := chain.NewHasher(nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := chain.NewSigner("continuum-0011223344556677", priv)
	if err != nil {
		t.Fatal(err)
	}
	final := chain.Hash{1, 2, 3}
	at := time.Unix(0, 123456789)
	d := NewDeletion(h, "run", 7, final, at, "why")
	if d.Seq != 8 || d.Head != h.Link("run", 8, final, record.AppendDeletePayload(nil, at.UnixNano(), "why")) {
		t.Fatalf("deletion %+v", d)
	}
	for _, s := range []*chain.Signer{nil, signer} {
		raw, err := d.Record("00112233445566778899aabbccddeeff", s)
		if err != nil {
			t.Fatal(err)
		}
		var r record.Record
		if err := (&record.Decoder{}).Decode(raw, wal.Pos{Segment: 1}, "seg", &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind != record.KindDelete || r.Run != "run" || r.Seq != 8 || r.Final != final || r.Head != d.Head || r.Deleted != at.UnixNano() || r.Reason != "why" {
			t.Fatalf("decoded %+v", r)
		}
		c, err := chain.ParseCheckpoint(r.Note)
		if err != nil || c.RunID != "run" || c.Seq != 8 || c.Head != d.Head || !c.Final {
			t.Fatalf("note %+v, %v", c, err)
		}
		if s != nil {
			if _, err := chain.VerifyCheckpoint(r.Note, pub); err != nil {
				t.Fatalf("signed note: %v", err)
			}
		}
	}
}

// TestMisfit: a replayed delete record must follow its run's end.
func TestMisfit(t *testing.T) {
	head := chain.Hash{9}
	rec := &record.Record{Kind: record.KindDelete, Run: "r", Seq: 5, Final: head}
	if why := Misfit(rec, 4, head, true); why != "" {
		t.Fatalf("fits: %s", why)
	}
	if why := Misfit(rec, 4, head, false); !strings.Contains(why, "has not ended") {
		t.Fatalf("not ended: %q", why)
	}
	if why := Misfit(rec, 3, head, true); !strings.Contains(why, "the run ends at seq 3") {
		t.Fatalf("wrong seq: %q", why)
	}
	if why := Misfit(rec, 4, chain.Hash{8}, true); !strings.Contains(why, "after head") {
		t.Fatalf("wrong head: %q", why)
	}
}

// TestDeletable: a run being created or active is refused, naming the
// verb and the run.
func TestDeletable(t *testing.T) {
	if err := Deletable(Candidate{ID: "x", Ended: true}, "erase", testErrs); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Candidate{{ID: "x"}, {ID: "x", Creating: true}} {
		err := Deletable(c, "erase", testErrs)
		if !errors.Is(err, errNotEnded) || !strings.Contains(err.Error(), `erase run "x"`) {
			t.Fatalf("%+v: %v", c, err)
		}
	}
}
