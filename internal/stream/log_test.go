package stream

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

type countLog struct {
	l *wal.Log
	n int
}

func (l *countLog) AppendAsync(rec []byte) *wal.Waiter { return l.l.AppendAsync(rec) }
func (l *countLog) Appended(n int)                     { l.n += n }

func TestCheckChunk(t *testing.T) {
	big := errors.New("big")
	for _, tc := range []struct {
		name string
		n    int
		want error
	}{
		{"s", record.MaxChunkSize, nil},
		{"s", record.MaxChunkSize + 1, big},
		{"", 1, record.ErrInvalidStreamName},
		{strings.Repeat("x", record.MaxStreamNameLen+1), 1, record.ErrInvalidStreamName},
	} {
		if err := CheckChunk("r", 1, tc.name, tc.n, big); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("CheckChunk(%q, %d) = %v, want %v", tc.name, tc.n, err, tc.want)
		}
	}
}

// TestWriteLogSource: Write enqueues a chunk's record at the stream's next
// offset, the atom's attempt, counted; LogSource scans it and reads its
// data back; a closed log refuses the next one and the offset stays free.
func TestWriteLogSource(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	l, err := wal.Open("/wal", &wal.Options{FS: fs, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	src := LogSource{Log: l, File: wal.SegmentName, Decoder: func() *record.Decoder { return &record.Decoder{} }, ErrDeleted: errors.New("deleted")}
	s := NewStreams(func() Source { return src }, fs, "/STREAMS", true)
	if err := s.Mark(); err != nil {
		t.Fatal(err)
	}
	log := &countLog{l: l}
	key := new(int)
	for i, data := range []string{"a", "bc"} {
		off, attempt, err := s.Write(ctx, key, "r", 1, "out", []byte(data), nil, log)
		if err != nil || off != uint64(i) || attempt != 1 {
			t.Fatalf("Write %d = %d, %d, %v; want offset %d, attempt 1", i, off, attempt, err, i)
		}
	}
	if log.n == 0 {
		t.Fatal("the appended bytes were not counted")
	}
	if _, err := s.Last(key).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := s.Index().Read("r", "out", 0, 10, 1<<20)
	if err != nil || len(b.Chunks) != 2 || string(b.Chunks[1].Data) != "bc" {
		t.Fatalf("Read = %+v, %v", b, err)
	}
	var chunks int
	if _, err := src.Scan(func(r *record.Record) error {
		if r.Kind == record.KindStreamChunk {
			chunks++
			if d, err := src.Data(r.Pos); err != nil || len(d) == 0 {
				t.Fatalf("Data at %v = %q, %v", r.Pos, d, err)
			}
		}
		return nil
	}); err != nil || chunks != 2 {
		t.Fatalf("Scan: %d chunks, %v", chunks, err)
	}
	// LogSource is itself a Log: it appends and counts through Counted.
	counted := 0
	src.Counted = func(n int) { counted += n }
	if off, _, err := s.Write(ctx, key, "r", 1, "out", []byte("e"), nil, src); err != nil || off != 2 || counted == 0 {
		t.Fatalf("Write through LogSource = %d, %v, %d bytes counted; want offset 2, counted", off, err, counted)
	}
	l.Close()
	if _, _, err := s.Write(ctx, key, "r", 1, "out", []byte("d"), nil, log); err == nil || !strings.Contains(err.Error(), `append to stream "out"`) {
		t.Fatalf("Write to a closed log = %v, want its error", err)
	}
}
