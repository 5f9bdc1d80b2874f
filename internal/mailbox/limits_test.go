package mailbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/record"
)

// TestDraftLimits: an atom sends, and receives, at most
// record.MaxMessagesPerAtom messages; the one past them is refused with
// the caller's error, naming the atom, and adds nothing.
func TestDraftLimits(t *testing.T) {
	big := errors.New("too large")
	var d Draft
	for i := range record.MaxMessagesPerAtom {
		if err := d.Add("r", 3, "to", []byte{byte(i)}, big); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	err := d.Add("r", 3, "to", []byte("x"), big)
	if !errors.Is(err, big) || !strings.Contains(err.Error(), `run "r" seq 3: an atom sends at most`) {
		t.Fatalf("a message past the limit: %v", err)
	}
	if s, _ := d.Counts(); s != record.MaxMessagesPerAtom {
		t.Fatalf("%d messages sent, want %d", s, record.MaxMessagesPerAtom)
	}
	if err := d.Receivable("r", 3, big); err != nil {
		t.Fatalf("Receivable with nothing received: %v", err)
	}
	d.received = make([]*pending, record.MaxMessagesPerAtom-1)
	if err := d.Receivable("r", 3, big); err != nil {
		t.Fatalf("Receivable below the limit: %v", err)
	}
	d.received = append(d.received, nil)
	if err := d.Receivable("r", 3, big); !errors.Is(err, big) || !strings.Contains(err.Error(), "an atom receives at most") {
		t.Fatalf("Receivable at the limit: %v", err)
	}
}
