package offline

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
)

// TestCompareLedgerTable: verify --deep's comparison of the ledger table
// with the ledger rebuilt from the log walks the two sorted tables side by
// side: the same actions pass; an action the log records that the table
// lacks, an entry naming a record that is not the action's, and an entry
// for an action the log does not record each fail, naming the action.
func TestCompareLedgerTable(t *testing.T) {
	const n = 40
	type act struct {
		fp           ledger.Fingerprint
		intent, cert ledger.Loc
	}
	var acts []act
	for i := range n {
		in, err := ledger.NewIntent(ledger.Action{Tool: "t", Args: []byte(fmt.Sprintf(`{"i":%d}`, i))}, "r", uint64(i+1), 0)
		if err != nil {
			t.Fatal(err)
		}
		acts = append(acts, act{fp: in.Fingerprint, intent: ledger.Loc{Segment: 1, Offset: int64(100 + 200*i)}, cert: ledger.Loc{Segment: 1, Offset: int64(200 + 200*i)}})
	}
	apply := func(l *ledger.Ledger, a act) {
		l.ApplyIntent(&ledger.Intent{Fingerprint: a.fp, RunID: "r", Seq: 1}, a.intent)
		l.ApplyCertificate(&ledger.Certificate{Fingerprint: a.fp, RunID: "r", Seq: 1, Status: ledger.StatusDone}, a.cert, false)
	}
	check := func(name string, stored func(l *ledger.Ledger), want string) {
		t.Helper()
		vr := &verifyRun{db: &store{fs: vfs.NewMem(), dir: "s"}, dc: newDerivedCheck()}
		dc := vr.dc
		dc.cp = &layout.Checkpoint{LedgerGen: 1}
		for _, a := range acts {
			apply(dc.ledger, a)
			dc.intents[a.fp] = intentAt{run: "r", seq: 1}
			dc.intentLocs[a.intent] = a.fp
			dc.certLocs[a.cert] = certAt{fp: a.fp, status: ledger.StatusDone}
			dc.fpRun[a.fp] = "r"
		}
		l := ledger.New()
		stored(l)
		dc.table = l.AppendTable(nil)
		vr.compareLedgerTable()
		var got []string
		for _, f := range vr.extra {
			got = append(got, f.Detail)
		}
		switch {
		case want == "" && len(got) > 0:
			t.Errorf("%s: failures %q, want none", name, got)
		case want != "" && (len(got) != 1 || !strings.Contains(got[0], want)):
			t.Errorf("%s: failures %q, want one saying %q", name, got, want)
		}
	}
	check("the same", func(l *ledger.Ledger) {
		for _, a := range acts {
			apply(l, a)
		}
	}, "")
	for _, drop := range []int{0, n / 2, n - 1} {
		check(fmt.Sprint("without action ", drop), func(l *ledger.Ledger) {
			for i, a := range acts {
				if i != drop {
					apply(l, a)
				}
			}
		}, fmt.Sprintf("has no entry for action %x", acts[drop].fp[:8]))
	}
	check("a certificate elsewhere", func(l *ledger.Ledger) {
		for i, a := range acts {
			if i == 7 {
				a.cert.Offset++
			}
			apply(l, a)
		}
	}, fmt.Sprintf("entry of action %x names a certificate at", acts[7].fp[:8]))
	extra, _ := ledger.NewIntent(ledger.Action{Tool: "forged"}, "r", 99, 0)
	check("an action the log lacks", func(l *ledger.Ledger) {
		for _, a := range acts {
			apply(l, a)
		}
		apply(l, act{fp: extra.Fingerprint, intent: ledger.Loc{Segment: 2, Offset: 40}, cert: ledger.Loc{Segment: 2, Offset: 80}})
	}, fmt.Sprintf("entry of action %x names an intent at 2:40", extra.Fingerprint[:8]))
}
