package runstate

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
)

// A plain snapshot is refused in an encrypted store, and one larger than
// any frame may decompress to is damage, before it is decoded.
func TestStoreSnapshotFramePlainRefused(t *testing.T) {
	var s Store
	s.Sealer = &record.Sealer{}
	var ce *record.CorruptionError
	if _, err := s.SnapshotFrame(&snapshot.Snapshot{Plain: true, Frame: []byte{1}}, "r", 1); !errors.As(err, &ce) ||
		!strings.Contains(err.Error(), "in the clear in an encrypted store") {
		t.Fatalf("plain snapshot in an encrypted store: %v", err)
	}
	s.Sealer = nil
	big := make([]byte, frame.MaxDecompressedSize+1)
	if _, err := s.SnapshotFrame(&snapshot.Snapshot{Plain: true, Frame: big}, "r", 1); !errors.As(err, &ce) ||
		!strings.Contains(err.Error(), "over the") {
		t.Fatalf("oversized plain snapshot: %v", err)
	}
}

// ReadFrameFile reads the run's frame file under the store's frames
// directory; FrameRebuilt counts and logs the file it did not use.
func TestStoreFrameFile(t *testing.T) {
	fs := vfs.NewMem()
	var logs bytes.Buffer
	var rebuilt atomic.Int64
	s := &Store{FS: fs, Dir: "/s", Logger: slog.New(slog.NewTextHandler(&logs, nil)), Rebuilt: &rebuilt}
	want := fs.PathJoin("/s", layout.FramesDir, layout.FrameFileBase("run-1"))
	if err := fs.MkdirAll(fs.PathJoin("/s", layout.FramesDir), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create(want, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("frame")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	name, b, err := s.ReadFrameFile("run-1")
	if err != nil || name != want || string(b) != "frame" {
		t.Fatalf("ReadFrameFile = %q, %q, %v; want %q, %q", name, b, err, want, "frame")
	}
	if _, _, err := s.ReadFrameFile("run-2"); !layout.NotExist(err) {
		t.Fatalf("ReadFrameFile of a run without a file: %v", err)
	}
	s.FrameRebuilt("run-1", "damaged")
	if rebuilt.Load() != 1 || !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), "damaged") {
		t.Fatalf("FrameRebuilt: count %d, log %q", rebuilt.Load(), logs.String())
	}
	if got := s.LogDir(); got != fs.PathJoin("/s", layout.WALDir) {
		t.Fatalf("LogDir = %q", got)
	}
}
