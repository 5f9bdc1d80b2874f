package offline

// The streams of a run as the log holds them (record/stream.go,
// internal/stream): what inspect lists and export writes. The index is
// built on first use by a second scan of the log.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/continuumdb/continuum/internal/stream"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// StreamSummary names a stream of a run and counts its chunks.
type StreamSummary struct {
	Name   string `json:"name"`
	Chunks uint64 `json:"chunks"`
}

// ExportedChunk is a stream chunk as ExportStream writes it: its offset,
// the atom (seq) and attempt that appended it, the attempt's status
// (open, committed, failed, abandoned) and its data (a JSON string when it
// is UTF-8 text, else {"base64": ...}; absent when its run's key was
// erased or no keyring opened it).
type ExportedChunk struct {
	Run     string        `json:"run"`
	Stream  string        `json:"stream"`
	Offset  uint64        `json:"offset"`
	Seq     uint64        `json:"seq"`
	Attempt uint64        `json:"attempt"`
	Status  string        `json:"status"`
	Data    *exportedData `json:"data,omitempty"`
}

type exportedData []byte

func (d exportedData) MarshalJSON() ([]byte, error) { return marshalText(d) }

// streamSource is the read-only store as the stream index's Source.
type streamSource struct{ st *readOnlyStore }

func (s streamSource) Scan(fn func(*record.Record) error) (wal.Pos, error) {
	if s.st.log == nil {
		return wal.Pos{}, nil
	}
	dec := &record.Decoder{Sealed: s.st.db.sealed}
	dec.Skip = func(k record.Kind, _ []byte) bool {
		switch k {
		case record.KindStreamChunk, record.KindStreamAbandon, record.KindAtom, record.KindFail, record.KindEnd, record.KindDelete, record.KindErase:
			return false
		}
		return true
	}
	c, err := record.NewCursor(s.st.log, s.st.db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		return wal.Pos{}, err
	}
	defer c.Close()
	for c.Next() {
		if err := fn(c.Record()); err != nil {
			return wal.Pos{}, err
		}
	}
	return c.NextPos(), c.Err()
}

func (s streamSource) Data(pos wal.Pos) ([]byte, error) {
	r, err := readAt(s.st.db.decoder(false), s.st.log, s.st.db.segmentFile(pos.Segment), pos, record.KindStreamChunk)
	if err != nil {
		return nil, err
	}
	if r.Chunk == nil {
		return nil, nil // sealed: erased, or no keyring
	}
	return append([]byte{}, r.Chunk...), nil
}

// streams returns the index of the log's streams, built on first use.
func (in *Inspector) streams() (*stream.Index, error) {
	if in.streamIdx == nil {
		in.streamIdx = stream.New(streamSource{in.st})
	}
	return in.streamIdx, in.streamIdx.Load()
}

// Streams lists the streams of run, by name.
func (in *Inspector) Streams(run string) ([]StreamSummary, error) {
	x, err := in.streams()
	if err != nil {
		return nil, err
	}
	infos, err := x.Streams(run)
	if err != nil {
		return nil, err
	}
	out := make([]StreamSummary, len(infos))
	for i, s := range infos {
		out[i] = StreamSummary{Name: s.Name, Chunks: s.Chunks}
	}
	return out, nil
}

// StreamChunks returns the chunks of stream name of run from offset from:
// up to max of them (max <= 0: 1024), with at most maxBytes of data in all
// (maxBytes <= 0: 8 MiB) but at least one chunk, and the offset to read
// from next (from, when there was none).
func (in *Inspector) StreamChunks(run, name string, from uint64, max, maxBytes int) ([]ExportedChunk, uint64, error) {
	return in.streamChunks("offline", run, name, from, max, maxBytes)
}

// streamChunks is StreamChunks, its errors prefixed with op.
func (in *Inspector) streamChunks(op, run, name string, from uint64, max, maxBytes int) ([]ExportedChunk, uint64, error) {
	if in.runs[run] == nil {
		return nil, from, fmt.Errorf("%s: store %s has no run %q", op, in.st.db.dir, run)
	}
	if err := record.CheckStreamName(name); err != nil {
		return nil, from, fmt.Errorf("%s: %w", op, err)
	}
	if max <= 0 {
		max = 1024
	}
	if maxBytes <= 0 {
		maxBytes = 8 << 20
	}
	x, err := in.streams()
	if err != nil {
		return nil, from, err
	}
	b, err := x.Read(run, name, from, max, maxBytes)
	if err != nil {
		return nil, from, err
	}
	out := make([]ExportedChunk, len(b.Chunks))
	for i, c := range b.Chunks {
		out[i] = ExportedChunk{Run: run, Stream: name, Offset: c.Offset, Seq: c.Seq, Attempt: c.Attempt, Status: c.Status.String()}
		if c.Data != nil {
			d := exportedData(c.Data)
			out[i].Data = &d
		}
	}
	return out, b.Next, nil
}

// Bytes returns the chunk's data, nil when it was not opened.
func (c ExportedChunk) Bytes() []byte {
	if c.Data == nil {
		return nil
	}
	return *c.Data
}

// ExportStream writes the chunks of stream name of run from offset from
// as JSON Lines (ExportedChunk), and returns how many it wrote.
func (in *Inspector) ExportStream(ctx context.Context, w io.Writer, run, name string, from uint64) (int, error) {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			bw.Flush()
			return n, err
		}
		chunks, next, err := in.streamChunks("offline: export", run, name, from, 1024, 8<<20)
		if err != nil {
			bw.Flush()
			return n, err
		}
		if len(chunks) == 0 {
			break
		}
		for _, c := range chunks {
			if err := enc.Encode(c); err != nil {
				return n, fmt.Errorf("offline: export: write run %q stream %q offset %d: %w", run, name, c.Offset, err)
			}
			n++
		}
		from = next
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("offline: export: write: %w", err)
	}
	return n, nil
}
