package wal_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/wal"
)

// Append records (each durable when Append returns), close, reopen and
// read them back in order from the start of the log.
func Example() {
	ctx := context.Background()
	fs := vfs.NewMem() // a real log passes nil: the operating system's filesystem
	// Small segments keep the example fast; the default is 64 MiB, each
	// zero-filled before it is written.
	opts := &wal.Options{FS: fs, SegmentSize: 1 << 20}
	l, err := wal.Open("log", opts)
	if err != nil {
		log.Fatal(err)
	}
	first, err := l.Append(ctx, []byte("intent: charge c_42"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := l.AppendBatch(ctx, [][]byte{[]byte("certificate: ch_1"), []byte("atom 1")}); err != nil {
		log.Fatal(err) // a batch is kept whole or dropped whole by a crash
	}
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}

	l, err = wal.Open("log", opts)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	r, err := l.NewReader(first)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		fmt.Printf("%s\n", r.Record()) // valid until the next Next
	}
	if err := r.Err(); err != nil {
		log.Fatal(err) // a *wal.CorruptionError says segment, file, offset and why
	}
	// Output:
	// intent: charge c_42
	// certificate: ch_1
	// atom 1
}

// AppendAsync enqueues records at once and waits for their fsync later, so
// that a caller can overlap its own work with the group commit.
func ExampleLog_AppendAsync() {
	ctx := context.Background()
	l, err := wal.Open("log", &wal.Options{FS: vfs.NewMem(), SegmentSize: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	w := l.AppendAsync([]byte("a"), []byte("b"))
	// ... other work while the owner goroutine writes and syncs ...
	pos, err := w.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	b, err := l.ReadAt(pos[1])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d records durable, the second is %q\n", len(pos), b)
	// Output:
	// 2 records durable, the second is "b"
}

// Corruption in the middle of the log is an error that says where, never
// skipped: errors.As finds the *CorruptionError, errors.Is matches
// ErrCorrupt.
func ExampleCorruptionError() {
	err := error(&wal.CorruptionError{Segment: 3, File: "wal/000003.log", Offset: 4096, Reason: "record checksum mismatch"})
	var ce *wal.CorruptionError
	fmt.Println(errors.As(err, &ce), errors.Is(err, wal.ErrCorrupt), ce.Offset)
	fmt.Println(err)
	// Output:
	// true true 4096
	// wal: corrupt log: segment 3 (wal/000003.log) offset 4096: record checksum mismatch
}
