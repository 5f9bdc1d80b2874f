package engine

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/seal"
)

// Durability selects how many fsync waits an atom costs (docs/DESIGN.md,
// "Options" and "Fsyncs per atom").
type Durability uint8

const (
	// Strict (the default): an intent is durable before exec is called, a
	// certificate before Do returns, a delta before Commit returns.
	Strict Durability = iota
	// Relaxed: a certificate rides with the atom's commit fsync, and an
	// idempotent action's intent is not waited for. After a crash a result
	// Do returned in an atom that did not commit may come back in doubt
	// (or be re-executed, if idempotent): act on a result outside the
	// store only once the atom committed.
	Relaxed
)

func (d Durability) String() string {
	switch d {
	case Strict:
		return "strict"
	case Relaxed:
		return "relaxed"
	}
	return fmt.Sprintf("Durability(%d)", uint8(d))
}

// Options configure a DB. The zero value (or a nil *Options) means defaults,
// documented field by field; docs/DESIGN.md, "Options", has each in full.
type Options struct {
	// FS is the filesystem every file of the store goes through. Default:
	// the operating system's (vfs.Default). Tests pass vfs.NewCrashableMem
	// or an errorfs.
	FS vfs.FS
	// SnapshotEvery takes a background snapshot of a run's frame into Pebble
	// every this many atoms. Default 50; negative disables the count trigger.
	SnapshotEvery int
	// SnapshotInterval takes a snapshot of a run with new atoms at least this
	// often. Default 10 minutes; negative disables the time trigger.
	SnapshotInterval time.Duration
	// SegmentSize is the largest size of a log segment. Default 64 MiB.
	SegmentSize int64
	// NoSync skips every fsync. Unsafe: a machine crash loses acknowledged
	// atoms. For tests and benchmarks only.
	NoSync bool
	// SigningKey, when set, signs the chain checkpoints and store heads
	// (Ed25519) under DB.Origin(); verify takes the public key from the
	// user. Sign from the store's first run on. See ExampleOptions_signingKey.
	SigningKey ed25519.PrivateKey
	// Logger receives the engine's log. Default: slog.Default().
	Logger *slog.Logger

	// ChainKey, when set (32 bytes), keys the hash chain: without it nobody
	// can recompute a valid chain. Keep it outside the store; verify needs it.
	ChainKey []byte
	// Keyring, when set, encrypts the store at rest (package seal; the
	// package documentation, "Encryption at rest"). Open fails on a key
	// the store needs and the keyring lacks (seal.ErrUnknownKey) or holds
	// wrong (seal.ErrWrongKey). Nil: a plaintext store (an encrypted one
	// is refused, ErrKeyring).
	Keyring seal.Keyring
	// Durability is Strict (default) or Relaxed.
	Durability Durability
	// CheckpointEvery writes a chain checkpoint (signed if SigningKey is
	// set) every this many atoms of a run. Default 100.
	CheckpointEvery int
	// CheckpointInterval writes a chain checkpoint of every run with new
	// atoms at least this often. Default 1 minute.
	CheckpointInterval time.Duration
	// RestartTail bounds the log written since the last engine checkpoint,
	// so what the next Open replays. Default 16 MiB; negative disables
	// these checkpoints (Close still writes one).
	RestartTail int64
	// MinSyncInterval is passed to the log: a minimum time between fsyncs,
	// for throughput-bound users. Default 0 (sync at once).
	MinSyncInterval time.Duration
	// DictSamples is how many records the engine collects before it trains
	// a compression dictionary for the store. Default 256; negative disables
	// dictionaries.
	DictSamples int
	// DictSize is the size of a trained dictionary. Default 16 KiB.
	DictSize int
	// Nonces is where run nonces come from. Default: crypto/rand; tests
	// set a deterministic source.
	Nonces io.Reader
	// FrameCache bounds the heap the frames of idle runs hold in memory
	// (frame.HeapSize); an idle run's frame written by an engine checkpoint
	// may be dropped and read back on its next use. Default 64 MiB;
	// negative keeps every frame.
	FrameCache int64
	// BlobThreshold, when positive, moves every value of a delta and every
	// result of Do longer than it out of the log into a blob, read with
	// Run.OpenValue or Run.OpenBlob. Default 0: values stay inline.
	// Negative is invalid.
	BlobThreshold int
	// Observer, when set, is told what the engine does as it does it, for
	// metrics and traces (see Observer). Default nil: nothing is reported.
	Observer Observer
	// Replicator, when set, puts the store in replicated mode: a write
	// returns once its records are durable here and the Replicator
	// acknowledged them; its error fails the write and every later one
	// (see Replicator). Not with Keyring (ErrInvalidOptions).
	Replicator Replicator
	// CompactDead is the fraction of a sealed segment's bytes that must
	// be dead for DB.GC to compact it. Default 0.5; negative: only the
	// segments always reclaimed; at most 1.
	CompactDead float64
	// ErasableKeys names the memory keys whose values DB.EraseKey can
	// erase, in an encrypted store (Keyring set); a name ending in "*"
	// matches every key it prefixes. It applies to the values written
	// while it is set. Default none.
	ErasableKeys []string

	// Clock is the wall clock of waits and timers. Nil: time.Now. A clock
	// that moves back neither ends a wait twice nor un-ends one.
	Clock func() time.Time
}

const (
	defaultSnapshotEvery      = 50
	defaultSnapshotInterval   = 10 * time.Minute
	defaultSegmentSize        = 64 << 20
	defaultCheckpointEvery    = 100
	defaultCheckpointInterval = time.Minute
	defaultRestartTail        = 16 << 20
	defaultFrameCache         = 64 << 20
	defaultDictSamples        = 256
	defaultDictSize           = 16 << 10
	defaultCompactDead        = 0.5
)

// withDefaults returns a copy of o with every zero field set to its default,
// or an error naming the first invalid field.
func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
		r.ErasableKeys = slices.Clone(o.ErasableKeys)
	}
	if r.FS == nil {
		r.FS = vfs.Default
	}
	if r.Nonces == nil {
		r.Nonces = rand.Reader
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	orDefault(&r.SnapshotEvery, defaultSnapshotEvery)
	orDefault(&r.SnapshotInterval, defaultSnapshotInterval)
	orDefault(&r.SegmentSize, defaultSegmentSize)
	orDefault(&r.CheckpointEvery, defaultCheckpointEvery)
	orDefault(&r.CheckpointInterval, defaultCheckpointInterval)
	orDefault(&r.FrameCache, defaultFrameCache)
	orDefault(&r.RestartTail, defaultRestartTail)
	orDefault(&r.DictSamples, defaultDictSamples)
	orDefault(&r.DictSize, defaultDictSize)
	orDefault(&r.CompactDead, defaultCompactDead)
	bad := func(field string, format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("%w: %s: %s", ErrInvalidOptions, field, fmt.Sprintf(format, args...))
	}
	switch {
	case r.SegmentSize < 0:
		return bad("SegmentSize", "%d is negative", r.SegmentSize)
	case r.BlobThreshold < 0:
		return bad("BlobThreshold", "%d is negative", r.BlobThreshold)
	case r.SigningKey != nil && len(r.SigningKey) != ed25519.PrivateKeySize:
		return bad("SigningKey", "%d bytes, want %d", len(r.SigningKey), ed25519.PrivateKeySize)
	case r.ChainKey != nil && len(r.ChainKey) != 32:
		return bad("ChainKey", "%d bytes, want 32", len(r.ChainKey))
	case r.Durability > Relaxed:
		return bad("Durability", "unknown mode %d", r.Durability)
	case r.CheckpointEvery < 0:
		return bad("CheckpointEvery", "%d is negative", r.CheckpointEvery)
	case r.CheckpointInterval < 0:
		return bad("CheckpointInterval", "%v is negative", r.CheckpointInterval)
	case r.MinSyncInterval < 0:
		return bad("MinSyncInterval", "%v is negative", r.MinSyncInterval)
	case r.DictSize < 0 || (r.DictSize > 0 && r.DictSize < 1024) || r.DictSize > 1<<20:
		return bad("DictSize", "%d is outside 1 KiB..1 MiB", r.DictSize)
	case r.CompactDead > 1 || r.CompactDead != r.CompactDead:
		return bad("CompactDead", "%v is not a fraction at most 1", r.CompactDead)
	case len(r.ErasableKeys) > 0 && r.Keyring == nil:
		return bad("ErasableKeys", "needs Keyring: a memory key's values are erased by dropping the data key that sealed them")
	case slices.ContainsFunc(r.ErasableKeys, func(k string) bool { return k == "" || len(k) > MaxMemoryKeyLen+1 }):
		return bad("ErasableKeys", "holds an empty name, or one above %d bytes", MaxMemoryKeyLen)
	case r.Keyring != nil && r.Replicator != nil:
		// KEYS changes with every new run, and the Replicator is given
		// only files that never change: a replica could not open what
		// the runs created after its last copy of KEYS sealed.
		return bad("Replicator", "an encrypted store (Keyring set) cannot be replicated: its key table, KEYS, is not shipped")
	}
	return r, nil
}

// orDefault sets *p to def if it is the zero value.
func orDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}
