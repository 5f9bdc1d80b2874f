package ledger

import "testing"

// TestForget checks that a forgotten fingerprint is unknown whether it was
// in the map or in the loaded table, and that the next table leaves it out.
func TestForget(t *testing.T) {
	l := New()
	inTable, inMap, kept := Fingerprint{1}, Fingerprint{2}, Fingerprint{3}
	l.ApplyIntent(&Intent{Fingerprint: inTable, RunID: "a", Seq: 1}, Loc{Segment: 1, Offset: 40})
	l.ApplyCertificate(&Certificate{Fingerprint: kept, RunID: "b", Seq: 1, Status: StatusDone}, Loc{Segment: 1, Offset: 80}, false)
	l.Checkpoint(nil, nil) // inTable and kept now live in the table
	l.ApplyCertificate(&Certificate{Fingerprint: inMap, RunID: "a", Seq: 2, Status: StatusDone}, Loc{Segment: 2, Offset: 40}, false)

	if n := l.Forget([]Fingerprint{inTable, inMap, {9}}); n != 2 {
		t.Fatalf("Forget dropped %d, want 2 (the unknown one is not counted)", n)
	}
	for _, fp := range []Fingerprint{inTable, inMap} {
		if e, ok := l.Lookup(fp); ok {
			t.Fatalf("%x still known: %+v", fp[:1], e)
		}
	}
	if fps := l.InDoubt(); len(fps) != 0 {
		t.Fatalf("forgotten intent still in doubt: %x", fps)
	}
	if _, ok := l.Lookup(kept); !ok {
		t.Fatal("a fingerprint not forgotten is gone")
	}
	b := l.Checkpoint(nil, nil)
	l2 := New()
	if err := l2.LoadTable(b); err != nil {
		t.Fatal(err)
	}
	if l2.Len() != 1 {
		t.Fatalf("table after Forget holds %d entries, want 1", l2.Len())
	}
	if _, ok := l2.Lookup(inTable); ok {
		t.Fatal("the table still holds a forgotten fingerprint")
	}
}
