package retention

import (
	"fmt"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// TestPlanDecide: what a collection plans from the segments' summaries:
// the dead prefix goes whole, wholly dead segments after a live one are
// compacted, a mostly live segment only past CompactDead or where a
// deleted run that goes on into a wholly dead segment begins, and a
// deleted run whose records a kept segment holds keeps its later ones.
func TestPlanDecide(t *testing.T) {
	type seg struct {
		live int64
		dead map[string]int64 // run -> bytes ("" = store heads)
		ends []string
	}
	sum := func(segs []seg) []*segSummary {
		var out []*segSummary
		for i, s := range segs {
			ss := &segSummary{id: uint64(i + 1), size: s.live, live: s.live, runs: map[string]*runPart{}, ends: map[string]bool{}}
			for run, n := range s.dead {
				ss.size += n
				p := &runPart{n: 1, bytes: n, fps: []ledger.Fingerprint{{byte(i), byte(len(run))}}}
				if run == "" {
					ss.heads = *p
				} else {
					ss.runs[run] = p
				}
			}
			for _, r := range s.ends {
				ss.ends[r] = true
			}
			out = append(out, ss)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		ratio   float64
		segs    []seg
		keep    uint64
		compact []uint64
		fps     int
	}{
		{"prefix", 0.5, []seg{{dead: map[string]int64{"d": 100}}, {dead: map[string]int64{"d": 100, "": 10}, ends: []string{"d"}}, {live: 100}},
			3, nil, 3},
		{"dead after a live one", -1, []seg{{live: 100, dead: map[string]int64{"e": 10}, ends: []string{"e"}}, {dead: map[string]int64{"d": 100}, ends: []string{"d"}}, {live: 100}},
			1, []uint64{2}, 1},
		{"a live first segment where a deleted run begins", -1, []seg{{live: 100, dead: map[string]int64{"d": 10}}, {dead: map[string]int64{"d": 100}}, {dead: map[string]int64{"d": 100}, ends: []string{"d"}}},
			1, []uint64{1, 2, 3}, 3},
		{"past CompactDead", 0.5, []seg{{live: 100}, {live: 40, dead: map[string]int64{"d": 60}, ends: []string{"d"}}, {live: 70, dead: map[string]int64{"e": 30}, ends: []string{"e"}}},
			1, []uint64{2}, 1},
		{"a kept segment keeps the run's later records", 0.5, []seg{{live: 100, dead: map[string]int64{"d": 10}}, {live: 10, dead: map[string]int64{"d": 90}}, {live: 100, dead: map[string]int64{"d": 10}, ends: []string{"d"}}},
			1, nil, 0},
		{"nothing below the replay position", 0.5, nil, 1, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Plan{Keep: uint64(len(tc.segs) + 1)}
			if len(tc.segs) == 0 {
				p.Keep = 1
			}
			p.decide(sum(tc.segs), tc.ratio)
			var got []uint64
			for _, sp := range p.Compact {
				got = append(got, sp.ID)
			}
			if p.Keep != tc.keep || fmt.Sprint(got) != fmt.Sprint(tc.compact) || len(p.FPs) != tc.fps {
				t.Fatalf("keep %d, compact %v, %d fingerprints; want %d, %v, %d", p.Keep, got, len(p.FPs), tc.keep, tc.compact, tc.fps)
			}
		})
	}
}

// TestDead: which records a collection may remove, kind by kind.
func TestDead(t *testing.T) {
	deleted := map[string]bool{"gone": true}
	fp := func(b byte) ledger.Fingerprint { return ledger.Fingerprint{b} }
	explicit := map[ledger.Fingerprint]bool{fp(2): true}
	head := func(runs ...string) []byte {
		h := chain.StoreHead{StoreID: "s"}
		for _, r := range runs {
			h.Runs = append(h.Runs, chain.RunHead{RunID: r, Seq: 1})
		}
		return chain.MarshalStoreHead(h)
	}
	for _, tc := range []struct {
		name      string
		r         record.Record
		headAfter bool
		dead      bool
	}{
		{"atom of a deleted run", record.Record{Kind: record.KindAtom, Run: "gone"}, false, true},
		{"atom of a live run", record.Record{Kind: record.KindAtom, Run: "live"}, false, false},
		{"creation, end, fail, checkpoint, rollback, fork", record.Record{Kind: record.KindFork, Run: "gone"}, false, true},
		{"delete record", record.Record{Kind: record.KindDelete, Run: "gone"}, true, false},
		{"erase record", record.Record{Kind: record.KindErase, Run: "gone"}, true, false},
		{"erase-key of a deleted run", record.Record{Kind: record.KindEraseKey, Run: "gone"}, false, true},
		{"erase-key of a live run", record.Record{Kind: record.KindEraseKey, Run: "live"}, false, false},
		{"default-key intent", record.Record{Kind: record.KindIntent, Intent: &ledger.Intent{RunID: "gone", Fingerprint: fp(1)}}, false, true},
		{"explicit-key intent", record.Record{Kind: record.KindIntent, Intent: &ledger.Intent{RunID: "gone", Fingerprint: fp(2)}}, false, false},
		{"explicit-key certificate", record.Record{Kind: record.KindCert, Cert: &ledger.Certificate{RunID: "gone", Fingerprint: fp(2)}}, false, false},
		{"default-key certificate of a live run", record.Record{Kind: record.KindCert, Cert: &ledger.Certificate{RunID: "live", Fingerprint: fp(1)}}, false, false},
		{"erased intent (sealed, run in the record)", record.Record{Kind: record.KindIntent, Erased: true, Run: "gone"}, false, true},
		{"store head superseded", record.Record{Kind: record.KindStoreHead, Note: head("live")}, true, true},
		{"store head of deleted runs only", record.Record{Kind: record.KindStoreHead, Note: head("gone")}, false, true},
		{"store head with a live run", record.Record{Kind: record.KindStoreHead, Note: head("gone", "live")}, false, false},
		{"store head that does not parse", record.Record{Kind: record.KindStoreHead, Note: []byte("junk")}, false, false},
	} {
		if got := Dead(&tc.r, deleted, tc.headAfter, explicit); got != tc.dead {
			t.Errorf("%s: dead %v, want %v", tc.name, got, tc.dead)
		}
	}
	if got := RunOf(&record.Record{Kind: record.KindCert, Cert: &ledger.Certificate{RunID: "c"}}); got != "c" {
		t.Errorf("RunOf(certificate) = %q", got)
	}
	if got := RunOf(&record.Record{Kind: record.KindStoreHead, Run: "x"}); got != "" {
		t.Errorf("RunOf(store head) = %q", got)
	}
}

// TestFrameSpan: a record's bytes in a segment are wal's framing.
func TestFrameSpan(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 100, 4096} {
		got := FrameSpan(n)
		if got%wal.RecordAlign != 0 || got < int64(n)+wal.RecordHeaderSize || got >= int64(n)+wal.RecordHeaderSize+wal.RecordAlign {
			t.Errorf("FrameSpan(%d) = %d", n, got)
		}
	}
}
