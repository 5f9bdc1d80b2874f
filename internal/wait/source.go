package wait

// LogSource: the Source of a store, over the files, keys and decoder the
// engine hands out.

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

// LogSource is a store as the index reads it: WAITS (Waits, opened with
// Sealer when the store seals) and the log (Log, its segments' names
// File, its records decoded by Decoder without the ledger's records
// opened; an event's payload opened with Sealer).
type LogSource struct {
	FS      vfs.FS
	Waits   string // WAITS's path
	Sealer  *record.Sealer
	Log     *wal.Log
	File    func(seg uint64) string
	Decoder func() *record.Decoder
	Logger  *slog.Logger
	// IDs, if not nil, returns the store's string of a run id (nil: none
	// it holds), for RunID.
	IDs func(id []byte) (string, bool)
}

var (
	_ Source = LogSource{}
	_ RunIDs = LogSource{}
)

// RunID implements RunIDs: the store's string of the id, else a copy.
func (s LogSource) RunID(id []byte) string {
	if s.IDs != nil {
		if v, ok := s.IDs(id); ok {
			return v
		}
	}
	return string(id)
}

// SortedIDs returns an IDs for LogSource over a checkpoint's rows (sorted
// by id), for the load of WAITS, whose runs come sorted too: a cursor
// that moves forward, each id found in a step or a few (an id missing
// from rows, or out of order, answers false and is copied). It is for one
// load: the cursor keeps its place.
func SortedIDs(rows []layout.CheckpointRun) func(id []byte) (string, bool) {
	if len(rows) == 0 {
		return nil
	}
	i := 0
	return func(id []byte) (string, bool) {
		for i < len(rows) && rows[i].ID < string(id) {
			i++
		}
		if i < len(rows) && rows[i].ID == string(id) {
			return rows[i].ID, true
		}
		return "", false
	}
}

// WaitsFile implements Source.
func (s LogSource) WaitsFile(gen uint64) (string, []byte, error) {
	b, err := layout.ReadFile(s.FS, s.Waits)
	if err == nil && s.Sealer != nil {
		b, err = s.Sealer.OpenStoreFile(b, record.PlaceWaits, gen)
	}
	return s.Waits, b, err
}

// Rebuilding implements Source.
func (s LogSource) Rebuilding(why string) {
	s.Logger.Warn("engine: WAITS is not usable; the index of waits is rebuilt from the log", "file", s.Waits, "reason", why)
}

// Scan implements Source: it reads the log from from, decoding only the
// records of waits.
func (s LogSource) Scan(from wal.Pos, fn func(*record.Record, []byte) error) error {
	dec := s.Decoder()
	dec.Skip = func(k record.Kind, _ []byte) bool {
		return k != record.KindWait && k != record.KindEvent && k != record.KindWake
	}
	c, err := record.NewCursor(s.Log, s.File, from, dec)
	if err != nil {
		return fmt.Errorf("engine: waits: read the log from %v: %w", from, err)
	}
	defer c.Close()
	for c.Next() {
		r := c.Record()
		payload, err := s.EventPayload(r)
		if err != nil {
			return err
		}
		if err := fn(r, payload); err != nil {
			return err
		}
	}
	return c.Err()
}

// EventPayload returns the plaintext payload of an event record (nil for
// the other kinds, and for an event whose run's data key was erased).
func (s LogSource) EventPayload(r *record.Record) ([]byte, error) {
	if r.Kind != record.KindEvent || r.Wait == nil {
		return nil, nil
	}
	if s.Sealer == nil {
		return r.Wait.Payload, nil
	}
	plain, err := s.Sealer.Open(nil, r.Wait.Payload, record.KindEvent, r.Run, r.Seq)
	switch {
	case errors.Is(err, seal.ErrErased):
		return nil, nil // the run was erased: nothing of it waits
	case err != nil:
		return nil, &record.CorruptionError{File: s.File(r.Pos.Segment), Offset: r.Pos.Offset, Run: r.Run, Seq: r.Seq,
			Reason: fmt.Sprintf("event %q of sender %q: its payload does not open: %v", r.Wait.Name, r.Wait.Sender, err), Err: err}
	}
	return plain, nil
}
