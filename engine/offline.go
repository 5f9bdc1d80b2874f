package engine

// The read-only tools live in package offline; the engine's names for them
// are the same values, so that a program that links the engine finds them
// here too.

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/offline"
)

type (
	// VerifyOptions is offline.VerifyOptions.
	VerifyOptions = offline.VerifyOptions
	// InspectOptions is offline.InspectOptions.
	InspectOptions = offline.InspectOptions
	// Inspector is offline.Inspector.
	Inspector = offline.Inspector
	// LogRecord is offline.LogRecord.
	LogRecord = offline.LogRecord
	// RunSummary is offline.RunSummary.
	RunSummary = offline.RunSummary
	// StoreStats is offline.StoreStats.
	StoreStats = offline.StoreStats
	// KindStats is offline.KindStats.
	KindStats = offline.KindStats
	// DictInfo is offline.DictInfo.
	DictInfo = offline.DictInfo
	// AtomInfo is offline.AtomInfo: what Run.Atom and Inspector.Atom return.
	AtomInfo = offline.AtomInfo
	// ActionInfo is offline.ActionInfo.
	ActionInfo = offline.ActionInfo
	// Holder is layout.Holder: which live process, if any, has a store open.
	Holder = layout.Holder
)

// Verify is offline.Verify: it checks the store in dir without opening it
// for writing.
func Verify(ctx context.Context, dir string, opts *VerifyOptions) (*chain.Report, error) {
	return offline.Verify(ctx, dir, opts)
}

// Inspect is offline.Inspect: it reads the store in dir without a lock.
func Inspect(ctx context.Context, dir string, opts *InspectOptions) (*Inspector, error) {
	return offline.Inspect(ctx, dir, opts)
}

// Scan is offline.Scan: it reads the log of the store in dir record by
// record.
func Scan(ctx context.Context, dir string, fs vfs.FS, fn func(*LogRecord) error) error {
	return offline.Scan(ctx, dir, fs, fn)
}
