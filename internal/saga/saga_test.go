package saga

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// history is a Store over a made-up run "r": its atoms' actions, and a
// ledger of intents and certificates at made-up log positions.
type history struct {
	atoms   map[uint64][]ledger.Fingerprint
	entries map[ledger.Fingerprint]ledger.Entry
	intents map[wal.Pos]*ledger.Intent
	certs   map[wal.Pos]*ledger.Certificate
	orphans []Certified // Certified's answer
	next    uint32
	reads   []uint64 // the atoms Actions read
}

func newHistory() *history {
	return &history{atoms: map[uint64][]ledger.Fingerprint{}, entries: map[ledger.Fingerprint]ledger.Entry{},
		intents: map[wal.Pos]*ledger.Intent{}, certs: map[wal.Pos]*ledger.Certificate{}}
}

func fp(name string) ledger.Fingerprint {
	var f ledger.Fingerprint
	copy(f[:], name)
	return f
}

// act records an action of run at seq (0: a branch's) with its intent
// (comp: its compensation, nil for none) and a certificate of status.
func (h *history) act(name, run string, seq uint64, status ledger.Status, comp *ledger.Compensation) ledger.Fingerprint {
	f := fp(name)
	h.next++
	in := wal.Pos{Segment: 1, Offset: int64(h.next) * 100}
	h.intents[in] = &ledger.Intent{Fingerprint: f, Tool: "tool-" + name, RunID: run, Seq: seq, Compensation: comp}
	e := ledger.Entry{Fingerprint: f, Status: status, IntentLoc: in}
	if status != ledger.StatusIntent {
		h.next++
		cert := wal.Pos{Segment: 1, Offset: int64(h.next) * 100}
		h.certs[cert] = &ledger.Certificate{Fingerprint: f, RunID: run, Seq: seq, Status: status}
		e.CertLoc = cert
	}
	h.entries[f] = e
	return f
}

func (h *history) Lookup(f ledger.Fingerprint) (ledger.Entry, bool) {
	e, ok := h.entries[f]
	return e, ok
}

func (h *history) Intent(loc ledger.Loc) (*ledger.Intent, error) {
	if in, ok := h.intents[loc]; ok {
		return in, nil
	}
	return nil, fmt.Errorf("no intent at %v", loc)
}

func (h *history) Certificate(loc ledger.Loc) (*ledger.Certificate, error) {
	if c, ok := h.certs[loc]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("no certificate at %v", loc)
}

func (h *history) Actions(_ context.Context, seq uint64) ([]ledger.Fingerprint, error) {
	h.reads = append(h.reads, seq)
	return h.atoms[seq], nil
}

func (h *history) Certified(context.Context, uint64) ([]Certified, error) { return h.orphans, nil }

func comp(tool string) *ledger.Compensation { return &ledger.Compensation{Tool: tool} }

func seqs(undo []record.Undo) string {
	var b strings.Builder
	for _, u := range undo {
		fmt.Fprintf(&b, "%d:%s ", u.Seq, strings.TrimRight(string(u.Action[:]), "\x00"))
	}
	return strings.TrimSpace(b.String())
}

func TestPlanOrderAndFilter(t *testing.T) {
	h := newHistory()
	before := h.act("before", "r", 2, ledger.StatusDone, comp("undo"))
	a := h.act("a", "r", 4, ledger.StatusDone, comp("undo-a"))
	b := h.act("b", "r", 4, ledger.StatusDone, nil)
	failed := h.act("failed", "r", 4, ledger.StatusFailed, comp("x"))
	other := h.act("other", "s", 5, ledger.StatusDone, comp("x"))
	c := h.act("c", "r", 5, ledger.StatusResolved, &ledger.Compensation{Tool: "undo-c", Key: "mine"})
	undoOfA := h.act("undoa", "r", 5, ledger.StatusDone, nil)
	h.intents[h.entries[undoOfA].IntentLoc].Undoes = a
	orphan := h.act("orphan", "r", 4, ledger.StatusDone, comp("undo-o"))
	branch := h.act("branch", "r", 0, ledger.StatusDone, comp("undo-br"))
	h.atoms[3] = []ledger.Fingerprint{before}
	h.atoms[4] = []ledger.Fingerprint{a, b, failed, a}
	h.atoms[5] = []ledger.Fingerprint{other, c, undoOfA, before}
	h.orphans = []Certified{{Seq: 4, FP: orphan}, {Seq: 0, FP: branch}, {Seq: 4, FP: a}}

	undo, err := Plan(context.Background(), h, "r", 3, 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Seq 5: the branch's (counted at the last seq, certified last), c.
	// Seq 4: the orphan (certified after b), b, a.
	if got, want := seqs(undo), "5:branch 5:c 4:orphan 4:b 4:a"; got != want {
		t.Fatalf("Plan = %s, want %s", got, want)
	}
	if fmt.Sprint(h.reads) != "[5 4]" {
		t.Errorf("atoms read %v, want [5 4]", h.reads)
	}
	for _, u := range undo {
		switch u.Action {
		case c:
			if u.Compensation.Key != "mine" || u.Tool != "tool-c" {
				t.Errorf("c: %+v", u.Compensation)
			}
		case a:
			if u.Compensation.Key != ledger.CompensationKey(a) {
				t.Errorf("a's default compensation key %q", u.Compensation.Key)
			}
		case b:
			if u.Compensation != nil {
				t.Errorf("b has no compensation, got %+v", u.Compensation)
			}
		}
	}
	if n := NotUndone(undo); len(n) != 1 || n[0].Action != b {
		t.Errorf("NotUndone = %v", n)
	}
	if h.intents[h.entries[a].IntentLoc].Compensation.Key != "" {
		t.Error("Plan changed the intent's compensation")
	}
}

func TestPlanInterrupted(t *testing.T) {
	h := newHistory()
	done := h.act("done", "r", 3, ledger.StatusDone, comp("u"))
	undo, err := Plan(context.Background(), h, "r", 1, 3, []ledger.Fingerprint{done})
	if err != nil || seqs(undo) != "3:done" {
		t.Fatalf("Plan = %s, %v", seqs(undo), err)
	}
	doubt := h.act("doubt", "r", 3, ledger.StatusIntent, comp("u"))
	_, err = Plan(context.Background(), h, "r", 1, 3, []ledger.Fingerprint{done, doubt})
	var ide *ledger.InDoubtError
	if !errors.Is(err, ledger.ErrInDoubt) || !errors.As(err, &ide) || ide.Fingerprint != doubt || ide.Tool != "tool-doubt" {
		t.Fatalf("an in-doubt action of the interrupted atom: %v", err)
	}
}

func TestPlanErrors(t *testing.T) {
	h := newHistory()
	x := h.act("x", "r", 3, ledger.StatusDone, comp("u"))
	h.atoms[3] = []ledger.Fingerprint{x}
	delete(h.certs, h.entries[x].CertLoc)
	_, err := Plan(context.Background(), h, "r", 2, 4, nil)
	if err == nil || !strings.Contains(err.Error(), `engine: rollback of run "r": the certificate of action`) {
		t.Fatalf("a certificate that cannot be read: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Plan(ctx, h, "r", 2, 4, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled plan: %v", err)
	}
	e := &TooManyError{Run: "r", To: 2, N: record.MaxRollbackUndo + 1}
	if !strings.Contains(e.Error(), "the limit is") {
		t.Fatal(e.Error())
	}
}

func TestCounts(t *testing.T) {
	for i, tt := range []struct {
		c    *ledger.Certificate
		want bool
	}{
		{nil, false},
		{&ledger.Certificate{RunID: "r", Seq: 5, Status: ledger.StatusDone}, true},
		{&ledger.Certificate{RunID: "r", Seq: 0, Status: ledger.StatusResolved}, true},
		{&ledger.Certificate{RunID: "r", Seq: 3, Status: ledger.StatusDone}, false},
		{&ledger.Certificate{RunID: "s", Seq: 5, Status: ledger.StatusDone}, false},
		{&ledger.Certificate{RunID: "r", Seq: 5, Status: ledger.StatusFailed}, false},
	} {
		if got := Counts(tt.c, "r", 3); got != tt.want {
			t.Errorf("%d: Counts = %v", i, got)
		}
	}
}

func TestRecordAndReplay(t *testing.T) {
	head := chain.Hash{7}
	undo := []record.Undo{{Seq: 5, Action: fp("a"), Tool: "t", Compensation: &ledger.Compensation{Tool: "u", Args: []byte(`{"x":1}`), Key: "k"}}}
	raw, err := Record(nil, "r", 6, 2, head, 99, undo)
	if err != nil {
		t.Fatal(err)
	}
	rec := &record.Record{Kind: record.KindRollback, Run: "r", Seq: 6, To: 2, Head: head, Undo: undo, Raw: raw}
	p := NewPending(raw, 6, 2, head, undo, 9)
	if p.Seal != record.RollbackSeal(raw) || p.Pin != 9 {
		t.Fatalf("NewPending: %+v", p)
	}

	got, why := Replay(rec, 5, head, nil)
	if why != "" || got == nil || got.Seq != 6 || got.To != 2 || got.Seal != p.Seal || got.Pin != 0 {
		t.Fatalf("Replay of the next seq: %+v %q", got, why)
	}
	undo[0].Compensation.Args[0] = 'X' // the read buffer is reused
	if string(got.Undo[0].Compensation.Args) != `{"x":1}` {
		t.Fatalf("the pending rollback aliases the record: %s", got.Undo[0].Compensation.Args)
	}
	if got, why := Replay(rec, 6, head, nil); got != nil || why != "" {
		t.Fatalf("a completed rollback: %+v %q", got, why)
	}
	for _, tt := range []struct {
		last    uint64
		head    chain.Hash
		pending *Pending
		want    string
	}{
		{4, head, nil, "the run's last atom is 4"},
		{5, chain.Hash{8}, nil, "rollback begun from head"},
		{5, head, p, "a second rollback record"},
	} {
		if got, why := Replay(rec, tt.last, tt.head, tt.pending); got != nil || !strings.Contains(why, tt.want) {
			t.Errorf("Replay(last %d): %+v %q, want %q", tt.last, got, why, tt.want)
		}
	}
}
