package ledger

import "testing"

// TestDecodeViewAllocations: decoding an intent or a certificate in place
// allocates the decoded value and its strings, and no field's name for an
// error message unless there is an error (13 and 5 allocations when every
// length field built its name).
func TestDecodeViewAllocations(t *testing.T) {
	in, err := NewIntent(Action{Tool: "lookup", Args: []byte(`{"q":"x"}`), Compensate: &Action{Tool: "undo", Args: []byte(`{}`)}}, "run-1", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	ib := AppendIntent(nil, in)
	cb := AppendCertificate(nil, &Certificate{Fingerprint: in.Fingerprint, RunID: "run-1", Seq: 3, Status: StatusDone, Result: []byte(`"ok"`)})
	for _, c := range []struct {
		name   string
		decode func() error
		max    float64
	}{
		{"intent", func() error { _, err := DecodeIntentView(ib); return err }, 6},
		{"certificate", func() error { _, err := DecodeCertificateView(cb); return err }, 2},
	} {
		var err error
		n := testing.AllocsPerRun(100, func() { err = c.decode() })
		if err != nil {
			t.Fatal(err)
		}
		if n > c.max {
			t.Errorf("%s: %.0f allocations per decode, want at most %.0f", c.name, n, c.max)
		}
	}
}
