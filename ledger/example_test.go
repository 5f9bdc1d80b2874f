package ledger_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/ledger"
)

// sliceJournal keeps records in a slice; the engine's journal is its WAL.
type sliceJournal struct{ certs []*ledger.Certificate }

func (j *sliceJournal) WriteIntent(ctx context.Context, in *ledger.Intent) (ledger.Loc, error) {
	return ledger.Loc{}, nil
}

func (j *sliceJournal) WriteCertificate(ctx context.Context, c *ledger.Certificate) (ledger.Loc, error) {
	j.certs = append(j.certs, c)
	return ledger.Loc{Segment: 1, Offset: int64(len(j.certs) - 1)}, nil
}

func (j *sliceJournal) ReadCertificate(loc ledger.Loc) (*ledger.Certificate, error) {
	return j.certs[loc.Offset], nil
}

func ExampleLedger_Do() {
	ctx := context.Background()
	l, j := ledger.New(), &sliceJournal{}
	in, err := ledger.NewIntent(ledger.Action{
		Tool:   "email.send",
		Args:   []byte(`{"to": "ops@example.com", "smtp_password": "hunter2"}`),
		Redact: []string{"/smtp_password"},
	}, "run-1", 7, 0)
	if err != nil {
		panic(err)
	}
	send := func(ctx context.Context, key string) ([]byte, error) {
		fmt.Println("sending with idempotency key", key)
		return []byte("msg-1"), nil
	}
	for range 2 { // the second call is answered by the certificate
		res, err := l.Do(ctx, j, in, send)
		fmt.Println(string(res), err)
	}
	fmt.Println(string(in.Args))
	// Output:
	// sending with idempotency key ck1-5:run-1:7:0
	// msg-1 <nil>
	// msg-1 <nil>
	// {"to":"ops@example.com"}
}

func ExampleInDoubtError() {
	ctx := context.Background()
	j := &sliceJournal{}
	in, _ := ledger.NewIntent(ledger.Action{Tool: "payments.charge", Args: []byte(`{"cents":500}`)}, "run-1", 9, 0)
	// After a crash, replay found the intent and no certificate.
	l := ledger.New()
	l.ApplyIntent(in, ledger.Loc{Segment: 1, Offset: 0})
	charge := func(context.Context, string) ([]byte, error) { panic("never charged twice") }
	_, err := l.Do(ctx, j, in, charge)
	var doubt *ledger.InDoubtError
	fmt.Println(errors.Is(err, ledger.ErrInDoubt), errors.As(err, &doubt) && doubt.Key == in.Key)
	// The agent asked the payment provider with doubt.Key: the charge exists.
	fmt.Println(l.Resolve(ctx, j, in, []byte(`{"charge":"ch_1"}`)))
	res, err := l.Do(ctx, j, in, charge)
	fmt.Println(string(res), err)
	// Output:
	// true true
	// <nil>
	// {"charge":"ch_1"} <nil>
}

// A fingerprint is of the tool, the canonical, redacted arguments and the
// key: the same call written differently is the same action, and a secret
// listed in Redact changes nothing.
func ExampleAction_Fingerprint() {
	a := ledger.Action{Tool: "billing.charge", Args: []byte(`{"customer":"c_42","cents":1200,"token":"sk_live_1"}`),
		Key: ledger.DefaultKey("deploy-42", 3, 0), Redact: []string{"/token"}}
	b := ledger.Action{Tool: "billing.charge", Args: []byte(`{ "cents": 1200, "customer": "c_42", "token": "sk_live_2" }`),
		Key: ledger.DefaultKey("deploy-42", 3, 0), Redact: []string{"/token"}}
	fa, _ := a.Fingerprint()
	fb, _ := b.Fingerprint()
	c := a
	c.Key = ledger.DefaultKey("deploy-42", 4, 0) // the same call in the next atom
	fc, _ := c.Fingerprint()
	fmt.Println(a.Key, fa == fb, fa == fc)
	// Output:
	// ck1-9:deploy-42:3:0 true false
}
