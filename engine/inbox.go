package engine

// The inbox's Source (package internal/mailbox): what the mailbox reads
// of the store, INBOX and the log's atoms, ends and deletions, through
// the DB's files, keys and decoder.

import (
	"fmt"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// inboxSource is the DB as the mailbox's Source.
type inboxSource struct{ db *DB }

func (s inboxSource) InboxFile(gen uint64) (string, []byte, error) {
	db := s.db
	name := db.path(layout.InboxName)
	b, err := layout.ReadFile(db.fs, name)
	if err == nil && db.sealer != nil {
		b, err = db.sealer.OpenStoreFile(b, record.PlaceInbox, gen)
	}
	return name, b, err
}

func (s inboxSource) Messages(a *record.Record) ([]record.SentMessage, []MessageID, error) {
	db := s.db
	file := db.segmentFile(a.Pos.Segment)
	if a.Body == nil {
		raw, err := db.log.ReadAt(a.Pos)
		if err != nil {
			return nil, nil, fmt.Errorf("engine: inbox: read atom %d of run %q at %v: %w", a.Seq, a.Run, a.Pos, err)
		}
		var r record.Record
		if err := db.decoder(false).Decode(raw, a.Pos, file, &r); err != nil {
			return nil, nil, err
		}
		if r.Erased {
			return nil, nil, nil // its run was erased: what it sent is withdrawn
		}
		a = &record.Record{Kind: record.KindAtom, Run: a.Run, Seq: a.Seq, Pos: a.Pos, Body: r.Body}
	}
	_, body, err := db.decoder(false).DecodeAtom(nil, a, file)
	if err != nil {
		return nil, nil, err
	}
	sent, consumed, err := body.Messages()
	if err != nil {
		return nil, nil, &CorruptionError{File: file, Offset: a.Pos.Offset, Run: a.Run, Seq: a.Seq, Reason: err.Error(), Err: err}
	}
	return sent, consumed, nil // the payloads alias the decompressed body, this call's
}

func (s inboxSource) Scan(to wal.Pos, fn func(*record.Record) error) error {
	db := s.db
	dec := db.decoder(false)
	dec.Skip = func(k record.Kind, _ []byte) bool {
		return k != record.KindAtom && k != record.KindEnd && !k.Deletes()
	}
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		return fmt.Errorf("engine: inbox: read the log: %w", err)
	}
	defer c.Close()
	// Not interrupted by Close: its final checkpoint needs the inbox.
	for c.Next() {
		r := c.Record()
		if !r.Pos.Less(to) {
			break
		}
		if r.Kind == record.KindAtom && r.Erased {
			continue // its run was erased: what it sent is withdrawn
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return c.Err()
}

func (s inboxSource) Rebuilding(why string) {
	s.db.logger.Warn("engine: INBOX is not usable; the inbox is rebuilt from the log", "file", s.db.path(layout.InboxName), "reason", why)
}
