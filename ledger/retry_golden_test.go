package ledger

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/internal/goldenhex"
)

var goldenPolicy = &RetryPolicy{MaxAttempts: 5, Initial: 200 * time.Millisecond, Multiplier: 2, Max: 10 * time.Second, Deadline: time.Minute}

const hexGoldenPolicy = `
			05                         # max attempts 5
			8084af5f                   # initial 200ms (200,000,000 ns)
			0000000000000040           # multiplier 2.0 (float64 bits, little-endian)
			80c8afa025                 # max 10s (10,000,000,000 ns)
			80b09dc2df01               # deadline 1m (60,000,000,000 ns)`

// TestGoldenRetryIntent pins intent version 3 (an action with a retry
// policy) and checks it decodes back field by field; versions 1 and 2 are
// pinned by TestGoldenIntent, unchanged by retries.
func TestGoldenRetryIntent(t *testing.T) {
	for _, c := range []struct {
		name string
		in   Intent
		hex  string
	}{{
		name: "version 3: attempt 2, idempotent",
		in: Intent{Fingerprint: goldenFP, RunID: "r", Seq: 4, Index: 1, Tool: "http.post", Args: []byte(`{"n":1}`), Key: "k",
			Idempotent: true, Retry: goldenPolicy, Attempt: 2, First: 1_800_000_000_000_000_000, Started: 1_800_000_000_500_000_000},
		hex: `
			4c49 03                    # "LI", version 3
			11                         # flags: idempotent (bit 0), retry policy (bit 4)
			` + hexGoldenFP + `        # fingerprint
			04 01                      # seq 4, index 1
			01 72                      # run id "r"
			09 687474702e706f7374      # tool "http.post"
			07 7b226e223a317d          # args {"n":1}
			01 6b                      # key "k"` + hexGoldenPolicy + `
			02                         # attempt 2
			8080a0bbd29df1fa31         # first: 1.8e18 ns (zig-zag varint)
			80948b98d69df1fa31         # started: first + 0.5s`,
	}, {
		name: "version 3: with a compensation",
		in: Intent{Fingerprint: goldenFP, RunID: "r", Seq: 1, Tool: "pay", Key: "k",
			Compensation: &Compensation{Tool: "refund"},
			Retry:        &RetryPolicy{MaxAttempts: 1, Multiplier: 1}, Attempt: 1, First: 2, Started: 2},
		hex: `
			4c49 03                    # "LI", version 3
			12                         # flags: compensation (bit 1), retry policy (bit 4)
			` + hexGoldenFP + `        # fingerprint
			01 00 01 72 03 706179 00 01 6b # seq 1, index 0, run "r", tool "pay", no args, key "k"
			06 726566756e64 00 00      # compensation "refund", no args, default key
			01 00 000000000000f03f 00 00 # policy: 1 attempt, no waits, multiplier 1.0, no deadline
			01 04 04                   # attempt 1, first 2, started 2`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			want := goldenhex.Decode(t, c.hex)
			if got := AppendIntent(nil, &c.in); !bytes.Equal(got, want) {
				t.Fatalf("intent encoding changed:\n got %x\nwant %x", got, want)
			}
			got, err := DecodeIntent(want)
			if err != nil {
				t.Fatal(err)
			}
			if got.Fingerprint != c.in.Fingerprint || got.RunID != c.in.RunID || got.Seq != c.in.Seq || got.Tool != c.in.Tool ||
				!bytes.Equal(got.Args, c.in.Args) || got.Key != c.in.Key || got.Idempotent != c.in.Idempotent ||
				!got.Retry.Equal(c.in.Retry) || got.Attempt != c.in.Attempt || got.First != c.in.First || got.Started != c.in.Started ||
				(got.Compensation == nil) != (c.in.Compensation == nil) {
				t.Fatalf("read back as %+v, want %+v", got, c.in)
			}
		})
	}
}

// TestGoldenRetryCertificate pins certificate version 2 (a failed attempt
// of an action with a retry policy).
func TestGoldenRetryCertificate(t *testing.T) {
	for _, c := range []struct {
		name string
		c    Certificate
		hex  string
	}{{
		name: "attempt 1 failed, next scheduled",
		c: Certificate{Fingerprint: goldenFP, RunID: "r", Seq: 4, Index: 1, Status: StatusFailed, Result: []byte{}, Err: "503",
			Attempt: &Attempt{Number: 1, First: 10, At: 20, Next: 30}},
		hex: `
			4c43 02                    # "LC", version 2
			03                         # status failed
			` + hexGoldenFP + `        # fingerprint
			04 01 01 72                # seq 4, index 1, run id "r"
			00                         # no result
			03 353033                  # error "503"
			01                         # attempt 1
			14 28 3c                   # first 10, at 20, next 30 (zig-zag varints)
			00                         # not given up`,
	}, {
		name: "given up: deadline",
		c: Certificate{Fingerprint: goldenFP, RunID: "r", Seq: 4, Index: 1, Status: StatusFailed, Result: []byte{}, Err: "503",
			Attempt: &Attempt{Number: 3, First: 10, At: 90, GaveUp: GaveUpDeadline}},
		hex: `
			4c43 02 03                 # "LC", version 2, status failed
			` + hexGoldenFP + `        # fingerprint
			04 01 01 72 00 03 353033   # seq 4, index 1, run "r", no result, error "503"
			03                         # attempt 3
			14 b401 00                 # first 10, at 90, no next attempt
			02                         # given up: deadline`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			want := goldenhex.Decode(t, c.hex)
			if got := AppendCertificate(nil, &c.c); !bytes.Equal(got, want) {
				t.Fatalf("certificate encoding changed:\n got %x\nwant %x", got, want)
			}
			got, err := DecodeCertificate(want)
			if err != nil {
				t.Fatal(err)
			}
			if got.Fingerprint != c.c.Fingerprint || got.Status != c.c.Status || got.Err != c.c.Err || got.Attempt == nil || *got.Attempt != *c.c.Attempt {
				t.Fatalf("read back as %+v (%+v), want %+v", got, got.Attempt, c.c)
			}
		})
	}
}

// TestRetryFingerprint: a policy is part of the fingerprint, an action
// without one keeps the fingerprint it always had, the defaults are
// normalized, Retryable is not part of it.
func TestRetryFingerprint(t *testing.T) {
	a := Action{Tool: "t", Args: []byte(`{"a":1}`), Key: "k"}
	plain, err := a.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	if plain != fingerprintOf("t", []byte(`{"a":1}`), "k", nil) {
		t.Fatal("an action without a policy changed fingerprint")
	}
	b := a
	b.Retry = &RetryPolicy{MaxAttempts: 3}
	withPol, _ := b.Fingerprint()
	if withPol == plain {
		t.Fatal("the policy is not part of the fingerprint")
	}
	c := a
	c.Retry = &RetryPolicy{MaxAttempts: 3, Multiplier: 2, Retryable: func(error) bool { return false }}
	if fp, _ := c.Fingerprint(); fp != withPol {
		t.Fatal("a default multiplier or Retryable changed the fingerprint")
	}
	d := a
	d.Retry = &RetryPolicy{MaxAttempts: 4}
	if fp, _ := d.Fingerprint(); fp == withPol {
		t.Fatal("two policies share a fingerprint")
	}
	in, err := NewIntent(b, "r", 1, 0)
	if err != nil || in.Fingerprint != withPol {
		t.Fatalf("NewIntent: %v, %s vs %s", err, in.Fingerprint, withPol)
	}
	if err := in.CheckFingerprint(); err != nil {
		t.Fatal(err)
	}
	if w := in.WithDefaultKey(3); w.Fingerprint == fingerprintOf(w.Tool, w.Args, w.Key, nil) {
		t.Fatal("WithDefaultKey dropped the policy from the fingerprint")
	}
	for _, bad := range []*RetryPolicy{{}, {MaxAttempts: 1, Initial: -1}, {MaxAttempts: 1, Multiplier: 0.5}, {MaxAttempts: 1, Multiplier: math.Inf(1)}} {
		e := a
		e.Retry = bad
		if _, err := NewIntent(e, "r", 1, 0); !errors.Is(err, ErrBadRetryPolicy) {
			t.Errorf("policy %+v: %v, want ErrBadRetryPolicy", bad, err)
		}
	}
	e := a
	e.Compensate = &Action{Tool: "u", Retry: &RetryPolicy{MaxAttempts: 2}}
	if _, err := NewIntent(e, "r", 1, 0); !errors.Is(err, ErrBadCompensation) {
		t.Errorf("a compensation with a policy: %v", err)
	}
}

// TestRetryRecordsCorrupt: every malformed version 3 intent and version 2
// certificate is refused with ErrCorrupt and an offset, never a panic, and
// every truncation of a valid one too.
func TestRetryRecordsCorrupt(t *testing.T) {
	in := &Intent{Fingerprint: goldenFP, RunID: "r", Seq: 4, Tool: "t", Key: "k", Retry: goldenPolicy, Attempt: 2, First: 10, Started: 20}
	ib := AppendIntent(nil, in)
	c := &Certificate{Fingerprint: goldenFP, RunID: "r", Seq: 4, Status: StatusFailed, Err: "e", Attempt: &Attempt{Number: 2, First: 10, At: 20, Next: 30}}
	cb := AppendCertificate(nil, c)
	for n := range len(ib) {
		if _, err := DecodeIntent(ib[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("intent truncated at %d: %v", n, err)
		}
	}
	for n := range len(cb) {
		if _, err := DecodeCertificate(cb[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("certificate truncated at %d: %v", n, err)
		}
	}
	reenc := func(f func(*Intent)) []byte {
		x := *in
		p := *in.Retry
		x.Retry = &p
		f(&x)
		return AppendIntent(nil, &x)
	}
	recert := func(f func(*Certificate)) []byte {
		x := *c
		a := *c.Attempt
		x.Attempt = &a
		f(&x)
		return AppendCertificate(nil, &x)
	}
	for _, tc := range []struct {
		name, want string
		b          []byte
		cert       bool
	}{
		{"v3 without the retry flag", "without a retry policy", func() []byte { b := bytes.Clone(ib); b[3] &^= flagRetry; return b }(), false},
		{"v3 with undoes", "unknown flags", func() []byte { b := bytes.Clone(ib); b[3] |= flagUndoes; return b }(), false},
		{"attempt 0", "attempt 0", reenc(func(x *Intent) { x.Attempt = 0 }), false},
		{"attempt beyond max", "beyond the policy", reenc(func(x *Intent) { x.Attempt = 6 }), false},
		{"started before first", "before the first attempt", reenc(func(x *Intent) { x.Started = 5 }), false},
		{"unbounded policy", "neither MaxAttempts nor Deadline", reenc(func(x *Intent) { x.Retry.MaxAttempts, x.Retry.Deadline = 0, 0 }), false},
		{"multiplier not normalized", "not normalized", reenc(func(x *Intent) { x.Retry.Multiplier = 0 }), false},
		{"multiplier NaN", "multiplier NaN", reenc(func(x *Intent) { x.Retry.Multiplier = math.NaN() }), false},
		{"negative initial", "exceeds 63 bits", reenc(func(x *Intent) { x.Retry.Initial = -1 }), false},
		{"v2 certificate done", "only a failed attempt", func() []byte { b := bytes.Clone(cb); b[3] = byte(StatusDone); return b }(), true},
		{"unknown give-up", "unknown give-up reason", func() []byte { b := bytes.Clone(cb); b[len(b)-1] = 9; return b }(), true},
		{"given up with a next", "given up with a next", func() []byte { b := bytes.Clone(cb); b[len(b)-1] = 1; return b }(), true},
		{"next before at", "before the failure", recert(func(x *Certificate) { x.Attempt.Next = 15 }), true},
		{"at before first", "before the first attempt", recert(func(x *Certificate) { x.Attempt.At = 5; x.Attempt.Next = 5 }), true},
		{"trailing byte", "trailing", append(bytes.Clone(cb), 0), true},
	} {
		var err error
		if tc.cert {
			_, err = DecodeCertificate(tc.b)
		} else {
			_, err = DecodeIntent(tc.b)
		}
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrCorrupt with %q", tc.name, err, tc.want)
		}
	}
}

// FuzzRetryRecords: the decoders of intent version 3 and certificate
// version 2 never panic, and what they accept re-encodes to the same bytes
// (one encoding per record).
func FuzzRetryRecords(f *testing.F) {
	in := &Intent{Fingerprint: goldenFP, RunID: "r", Seq: 4, Tool: "t", Key: "k", Idempotent: true, Retry: goldenPolicy, Attempt: 2, First: 10, Started: 20,
		Compensation: &Compensation{Tool: "u"}}
	f.Add(AppendIntent(nil, in))
	f.Add(AppendCertificate(nil, &Certificate{Fingerprint: goldenFP, RunID: "r", Status: StatusFailed, Err: "e", Attempt: &Attempt{Number: 1, First: 1, At: 2, Next: 3}}))
	f.Add(AppendCertificate(nil, &Certificate{Fingerprint: goldenFP, RunID: "r", Status: StatusFailed, Attempt: &Attempt{Number: 9, First: -5, At: 2, GaveUp: GaveUpPermanent}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if in, err := DecodeIntent(b); err == nil {
			if got := AppendIntent(nil, in); !bytes.Equal(got, b) {
				t.Fatalf("intent %x re-encodes as %x", b, got)
			}
		}
		if c, err := DecodeCertificate(b); err == nil {
			if got := AppendCertificate(nil, c); !bytes.Equal(got, b) {
				t.Fatalf("certificate %x re-encodes as %x", b, got)
			}
		}
	})
}
