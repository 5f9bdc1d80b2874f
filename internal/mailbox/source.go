package mailbox

// LogSource: the Source of a store, over the files, keys and decoder the
// engine hands out.

import (
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// LogSource is a store as the Box reads it: INBOX (Inbox, opened with
// Sealer when the store seals) and the log (Log, its segments' names File,
// its records decoded by Decoder without the ledger's records opened).
type LogSource struct {
	FS      vfs.FS
	Inbox   string // INBOX's path
	Sealer  *record.Sealer
	Log     *wal.Log
	File    func(seg uint64) string
	Decoder func() *record.Decoder
	Logger  *slog.Logger
}

var _ Source = LogSource{}

// InboxFile implements Source.
func (s LogSource) InboxFile(gen uint64) (string, []byte, error) {
	b, err := layout.ReadFile(s.FS, s.Inbox)
	if err == nil && s.Sealer != nil {
		b, err = s.Sealer.OpenStoreFile(b, record.PlaceInbox, gen)
	}
	return s.Inbox, b, err
}

// Messages implements Source.
func (s LogSource) Messages(a *record.Record) ([]record.SentMessage, []record.MessageID, error) {
	file := s.File(a.Pos.Segment)
	if a.Body == nil {
		raw, err := s.Log.ReadAt(a.Pos)
		if err != nil {
			return nil, nil, fmt.Errorf("engine: inbox: read atom %d of run %q at %v: %w", a.Seq, a.Run, a.Pos, err)
		}
		var r record.Record
		if err := s.Decoder().Decode(raw, a.Pos, file, &r); err != nil {
			return nil, nil, err
		}
		if r.Erased {
			return nil, nil, nil // its run was erased: what it sent is withdrawn
		}
		a = &record.Record{Kind: record.KindAtom, Run: a.Run, Seq: a.Seq, Pos: a.Pos, Body: r.Body}
	}
	_, body, err := s.Decoder().DecodeAtom(nil, a, file)
	if err != nil {
		return nil, nil, err
	}
	sent, consumed, err := body.Messages()
	if err != nil {
		return nil, nil, &record.CorruptionError{File: file, Offset: a.Pos.Offset, Run: a.Run, Seq: a.Seq, Reason: err.Error(), Err: err}
	}
	return sent, consumed, nil // the payloads alias the decompressed body, this call's
}

// Scan implements Source. Close does not interrupt it: the engine's final
// checkpoint needs the inbox.
func (s LogSource) Scan(to wal.Pos, fn func(*record.Record) error) error {
	dec := s.Decoder()
	dec.Skip = func(k record.Kind, _ []byte) bool {
		return k != record.KindAtom && k != record.KindEnd && !k.Deletes()
	}
	c, err := record.NewCursor(s.Log, s.File, wal.Pos{}, dec)
	if err != nil {
		return fmt.Errorf("engine: inbox: read the log: %w", err)
	}
	defer c.Close()
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

// Rebuilding implements Source.
func (s LogSource) Rebuilding(why string) {
	s.Logger.Warn("engine: INBOX is not usable; the inbox is rebuilt from the log", "file", s.Inbox, "reason", why)
}
