package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// memJournal is an in-memory Journal: a log of encoded records, with
// injectable failures. A "crash" is a new Ledger rebuilt by replay.
type memJournal struct {
	mu struct {
		sync.Mutex
		recs [][]byte // encoded intents and certificates, in log order
		// crashAfter, when >= 0, is the number of further writes that
		// succeed; then every write fails (the process "died").
		crashAfter int
		intentErr  error // returned by the next WriteIntent, once
		certErr    error // returned by the next WriteCertificate, once
		reads      int
	}
}

var errCrashed = errors.New("memJournal: crashed")

func newMemJournal() *memJournal {
	j := &memJournal{}
	j.mu.crashAfter = -1
	return j
}

func (j *memJournal) write(b []byte, injected *error) (Loc, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := *injected; err != nil {
		*injected = nil
		return Loc{}, err
	}
	if j.mu.crashAfter == 0 {
		return Loc{}, errCrashed
	}
	if j.mu.crashAfter > 0 {
		j.mu.crashAfter--
	}
	j.mu.recs = append(j.mu.recs, b)
	return Loc{Segment: 1, Offset: int64(len(j.mu.recs) - 1)}, nil
}

func (j *memJournal) WriteIntent(ctx context.Context, in *Intent) (Loc, error) {
	if err := ctx.Err(); err != nil {
		return Loc{}, err
	}
	return j.write(AppendIntent(nil, in), &j.mu.intentErr)
}

func (j *memJournal) WriteCertificate(ctx context.Context, c *Certificate) (Loc, error) {
	if err := ctx.Err(); err != nil {
		return Loc{}, err
	}
	return j.write(AppendCertificate(nil, c), &j.mu.certErr)
}

func (j *memJournal) ReadCertificate(loc Loc) (*Certificate, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.mu.reads++
	if loc.Segment != 1 || loc.Offset < 0 || loc.Offset >= int64(len(j.mu.recs)) {
		return nil, fmt.Errorf("memJournal: no record at %+v", loc)
	}
	return DecodeCertificate(j.mu.recs[loc.Offset])
}

func (j *memJournal) injectIntentErr(err error) { j.mu.Lock(); j.mu.intentErr = err; j.mu.Unlock() }
func (j *memJournal) injectCertErr(err error)   { j.mu.Lock(); j.mu.certErr = err; j.mu.Unlock() }
func (j *memJournal) crashAfter(n int)          { j.mu.Lock(); j.mu.crashAfter = n; j.mu.Unlock() }
func (j *memJournal) revive()                   { j.mu.Lock(); j.mu.crashAfter = -1; j.mu.Unlock() }

func (j *memJournal) len() int { j.mu.Lock(); defer j.mu.Unlock(); return len(j.mu.recs) }

func (j *memJournal) reads() int { j.mu.Lock(); defer j.mu.Unlock(); return j.mu.reads }

func (j *memJournal) records() [][]byte {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([][]byte(nil), j.mu.recs...)
}

// replay applies the records from index from on, as the engine does at open.
func (j *memJournal) replay(t testing.TB, l *Ledger, from int, keepResult bool) {
	t.Helper()
	for i, b := range j.records()[from:] {
		loc := Loc{Segment: 1, Offset: int64(from + i)}
		switch b[1] {
		case intentMagic1:
			in, err := DecodeIntent(b)
			if err != nil {
				t.Fatalf("record %d: %v", from+i, err)
			}
			l.ApplyIntent(in, loc)
		default:
			c, err := DecodeCertificate(b)
			if err != nil {
				t.Fatalf("record %d: %v", from+i, err)
			}
			l.ApplyCertificate(c, loc, keepResult)
		}
	}
}

// recover returns a ledger rebuilt from the whole journal.
func (j *memJournal) recover(t testing.TB, keepResult bool) *Ledger {
	l := New()
	j.replay(t, l, 0, keepResult)
	return l
}

// execCounter is an Exec that counts calls per key and returns "r:<key>".
type execCounter struct {
	mu    sync.Mutex
	calls map[string]int
	err   error // returned (once) instead of a result
}

func newExecCounter() *execCounter { return &execCounter{calls: map[string]int{}} }

func (e *execCounter) exec(ctx context.Context, key string) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls[key]++
	if err := e.err; err != nil {
		e.err = nil
		return nil, err
	}
	return []byte("r:" + key), nil
}

func (e *execCounter) count(key string) int { e.mu.Lock(); defer e.mu.Unlock(); return e.calls[key] }
