package wait

// LogSource: the Source of a store, over the files, keys and decoder the
// engine hands out.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
	"github.com/continuumdb/continuum/wal"
)

// LogSource is a store as the index reads it: WAITS (Waits: when the
// store seals it, read block by block and each opened with Sealer, or,
// sealed whole before 2026-12, opened whole; else mapped when Map) and the log (Log, its segments' names
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
	// Map says the store's files are the operating system's (FS is
	// vfs.Default), so that WAITS, when the store does not seal it, can
	// be mapped read only (MapWaitsFile) rather than read into the heap.
	Map bool
}

var (
	_ Source      = LogSource{}
	_ Mapper      = LogSource{}
	_ TableOpener = LogSource{}
)

// OpenWaitsTable implements TableOpener: in an encrypted store, WAITS
// sealed per block (version 3) is opened as a table read from the file
// with pread, block by block (layout.OpenSealedWaits), the file kept
// open until release; any other WAITS is ErrNotTable.
func (s LogSource) OpenWaitsTable(gen uint64) (*layout.WaitsTable, func(), error) {
	if s.Sealer == nil {
		return nil, nil, ErrNotTable
	}
	f, err := s.FS.Open(s.Waits)
	if err != nil {
		return nil, nil, err
	}
	var head [10]byte
	st, err := f.Stat()
	if err == nil {
		_, err = f.ReadAt(head[:], 0)
	}
	if err != nil || layout.WaitsVersion(head[:]) != 3 {
		f.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, fmt.Errorf("wait: read %s: %w", s.Waits, err)
		}
		return nil, nil, ErrNotTable // sealed whole: WaitsFile opens it
	}
	t, err := layout.OpenSealedWaits(s.Waits, f, st.Size(), s.Sealer, gen)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return t, func() { f.Close() }, nil
}

// MapWaitsFile implements Mapper: WAITS mapped read only, if Map and
// the store does not seal it (and the system maps files: unix); else
// read as WaitsFile reads it (release nil).
func (s LogSource) MapWaitsFile(gen uint64) (string, []byte, func(), error) {
	if s.Map && s.Sealer == nil {
		if b, release, err := mapFile(s.FS, s.Waits); err != errNoMap {
			return s.Waits, b, release, err
		}
	}
	name, b, err := s.WaitsFile(gen)
	return name, b, nil, err
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

// RecordSource is a Source over what is in memory: the log's records of
// waits (Records, in the log's order, each with its Pos; an event's
// Wait.Payload its plaintext, nil where it cannot be read) and WAITS's
// bytes (File, named Name; nil: missing). It is what verify holds of a
// store (offline/verify_waitsfile.go), and what tests build.
type RecordSource struct {
	Name string
	File []byte
	// Table, if not nil, is WAITS opened already (what OpenWaitsTable
	// returns, File unread): a sealed table holds no bytes to hand.
	Table   *layout.WaitsTable
	Records []*record.Record
	// Rebuilt, if not nil, is told why WAITS is not used (Rebuilding).
	Rebuilt func(why string)
}

var (
	_ Source      = RecordSource{}
	_ TableOpener = RecordSource{}
)

// OpenWaitsTable implements TableOpener: Table, if set (release nil);
// else ErrNotTable (File is read).
func (s RecordSource) OpenWaitsTable(uint64) (*layout.WaitsTable, func(), error) {
	if s.Table == nil {
		return nil, nil, ErrNotTable
	}
	return s.Table, nil, nil
}

// WaitsFile implements Source.
func (s RecordSource) WaitsFile(uint64) (string, []byte, error) {
	if s.File == nil {
		return s.Name, nil, fs.ErrNotExist
	}
	return s.Name, s.File, nil
}

// Scan implements Source: the records at or after from.
func (s RecordSource) Scan(from wal.Pos, fn func(*record.Record, []byte) error) error {
	for _, r := range s.Records {
		if r.Pos.Less(from) {
			continue
		}
		var p []byte
		if r.Kind == record.KindEvent && r.Wait != nil {
			p = r.Wait.Payload
		}
		if err := fn(r, p); err != nil {
			return err
		}
	}
	return nil
}

// Rebuilding implements Source.
func (s RecordSource) Rebuilding(why string) {
	if s.Rebuilt != nil {
		s.Rebuilt(why)
	}
}
