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

// Durability selects how many fsync waits an atom costs. See the
// repository's docs/DESIGN.md, "Fsyncs per atom".
type Durability uint8

const (
	// Strict (the default): an intent is durable before exec is called, a
	// certificate is durable before Do returns, a delta is durable before
	// Commit returns. Three fsync waits per atom with one action, each shared
	// with every concurrent run by group commit.
	Strict Durability = iota
	// Relaxed lets certificates ride with the atom's commit (Do returns once
	// the certificate is written to the log, before its fsync) and skips the
	// intent fsync for actions declared idempotent. Commit still waits for
	// one fsync, which makes everything written before it durable too,
	// because the log is one ordered file.
	//
	// What it changes after a crash: a result returned by Do in an atom that
	// then did not commit may be lost, so the action is in doubt (or, for an
	// idempotent action whose intent was lost as well, simply absent) and is
	// re-executed with the same idempotency key when the atom is retried.
	// Non-idempotent actions still get a durable intent before exec, so they
	// are never executed twice: they come back as ledger.ErrInDoubt. The
	// agent must therefore not act on a result outside the store (tell a
	// user, call another system) before the atom commits.
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
// documented field by field.
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
	// Segments are preallocated (zero-filled) as the log grows: a new
	// store's first one takes wal.MinPrealloc (64 KiB), and each next one
	// twice its predecessor, up to SegmentSize.
	SegmentSize int64
	// NoSync skips every fsync. Unsafe: a machine crash loses acknowledged
	// atoms. For tests and benchmarks only.
	NoSync bool
	// SigningKey, when set, signs the chain checkpoints and store heads
	// (Ed25519) under the store's origin, DB.Origin(): "continuum-" and the
	// first 16 hex digits of the store id. Verification takes the public
	// key from the user, never from the store, in a public key file that
	// names that origin (chain.MarshalPublicKey(db.Origin(), pub)); verify
	// fails a key file of another origin.
	//
	// `continuumctl keygen --store DIR --out FILE` writes a signing key
	// file for the store (read it with chain.ParseSigningKey) and FILE.pub.
	// Sign from the store's first run on: a checkpoint written without the
	// key is unsigned, and verify with the public key reports it as a bad
	// signature. Keep the key outside the store. See ExampleOptions_signingKey.
	SigningKey ed25519.PrivateKey
	// Logger receives the engine's log. Default: slog.Default().
	Logger *slog.Logger

	// ChainKey, when set (32 bytes), switches the hash chain to keyed mode:
	// without the key nobody can recompute a valid chain, so rewriting a run
	// and every later hash is detected. Keep it outside the store; verify
	// needs it too.
	ChainKey []byte
	// Keyring, when set, encrypts the store at rest (AES-256-GCM, package
	// seal): a new store is created encrypted, with its key table KEYS
	// (data keys wrapped by the keyring's keys); an existing one must have
	// been created with a keyring, and Open fails if this one lacks a key
	// the store needs (seal.ErrUnknownKey) or holds a wrong one
	// (seal.ErrWrongKey). See the package documentation, "Encryption at
	// rest". Nil: a plaintext store (and an encrypted one is refused,
	// ErrKeyring).
	Keyring seal.Keyring
	// Durability is Strict (default) or Relaxed.
	Durability Durability
	// CheckpointEvery writes a chain checkpoint (signed if SigningKey is
	// set) every this many atoms of a run. Default 100.
	CheckpointEvery int
	// CheckpointInterval writes a chain checkpoint of every run with new
	// atoms at least this often. Default 1 minute.
	CheckpointInterval time.Duration
	// RestartTail bounds the log written since the last engine checkpoint:
	// once this many bytes were appended, a background engine checkpoint
	// lets the next Open replay less. It bounds restart time after a crash
	// (replay reads about 1 GB/s) against write amplification: a checkpoint
	// rewrites the frame file of every run that changed since the last one.
	// Default 16 MiB; negative disables these checkpoints (Close still
	// writes one).
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
	// Nonces is where run nonces come from. Default: crypto/rand. Tests set
	// it to a deterministic source so that two stores given the same runs
	// compute the same chain heads; a predictable nonce does not weaken
	// tamper evidence (the chain still binds every record), but it lets
	// anyone who knows the run id compute h(0).
	Nonces io.Reader
	// FrameCache bounds the heap the frames of idle runs hold in memory
	// (estimated by frame.HeapSize: the frames' bytes and the arrays of
	// their messages, subgoals and calls at their capacity). A run's frame stays in memory while the
	// run is in use; once an engine checkpoint has written it to the run's
	// frame file (and its snapshot), an idle run's frame may be dropped,
	// least recently used first, until the resident frames fit, and is
	// read back from the frame file on the run's next use. So memory is
	// this budget plus the frames of the runs that changed since the last
	// engine checkpoint (RestartTail bounds their log, not their frames).
	// Default 64 MiB; negative keeps every frame.
	FrameCache int64
	// BlobThreshold, when positive, moves every value of a delta longer
	// than it (a memory value, a tool output, a message's content or part
	// text) and every result of Do longer than it out of the log into a
	// blob (package blob; engine/blobs.go), written durably before the
	// record, which holds its reference value (blob.Value) in its place:
	// the frame and the log stay small however large an agent's outputs.
	// Read such a value with Run.OpenValue or Run.OpenBlob; write one
	// from a stream with Atom.PutBlob. Default 0: values stay inline
	// (PutBlob and reference values still work). Negative is invalid.
	BlobThreshold int
	// Observer, when set, is told what the engine does as it does it
	// (atoms and their actions, group commits, Open, snapshots), for
	// metrics and traces: see Observer, and the nested module
	// github.com/continuumdb/continuum/otel for OpenTelemetry. Default
	// nil: nothing is reported.
	Observer Observer
	// Replicator, when set, puts the store in replicated mode: every group
	// commit of the log is shipped to it once durable here, and a Commit,
	// Do, Resolve (or any other write) returns only once its records are
	// durable here and the Replicator acknowledged them; its error fails
	// the write and every later one (see Replicator). The nested module
	// github.com/continuumdb/continuum/replicate implements it on NATS
	// JetStream. A Replicator that is also a BlobReplicator is given the
	// store's blobs too; with one that is not, a replica holds references
	// to blobs it lacks. Default nil: the store is local. Not with Keyring: an
	// encrypted store cannot be replicated yet (its key table is not
	// shipped), and Open refuses the two together (ErrInvalidOptions).
	Replicator Replicator
	// CompactDead is the fraction of a sealed segment's bytes that must
	// be dead for DB.GC to compact it: rewrite it with its live records
	// only, at their positions (internal/retention). A segment wholly dead
	// is always reclaimed, and so is one where what is left of a deleted
	// run begins, when that run goes on in later segments (so that they
	// can go). Default 0.5; negative: only those; at most 1.
	CompactDead float64
	// ErasableKeys names the memory keys whose values DB.EraseKey can
	// erase, in an encrypted store (Keyring set): each value written to
	// one is sealed with a data key of its own, one per run and memory
	// key, added to KEYS (durably) before the first atom that writes the
	// key, so that erasing the key drops those keys only (erasekey.go). A
	// name ending in "*" matches every key that starts with what comes
	// before it ("pii/*"; "*" alone: every key). It applies to the values written while it is
	// set: a value written while its key was not erasable is sealed with
	// its run's key alone, and erased only with the run (DB.Erase).
	// Default none. An erasable key costs a KEYS write (two fsyncs) the
	// first time a run writes it, and a seal per value written.
	ErasableKeys []string

	// Clock is the wall clock of waits and timers (waits.go): the time
	// recorded in their records and the reading a deadline is compared
	// with. Nil: time.Now. The engine never compares a deadline with a
	// reading earlier than the latest one its wait records hold, so a
	// clock that moves back neither ends a wait twice nor un-ends one.
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
	if r.SnapshotEvery == 0 {
		r.SnapshotEvery = defaultSnapshotEvery
	}
	if r.SnapshotInterval == 0 {
		r.SnapshotInterval = defaultSnapshotInterval
	}
	if r.SegmentSize == 0 {
		r.SegmentSize = defaultSegmentSize
	}
	if r.CheckpointEvery == 0 {
		r.CheckpointEvery = defaultCheckpointEvery
	}
	if r.CheckpointInterval == 0 {
		r.CheckpointInterval = defaultCheckpointInterval
	}
	if r.FrameCache == 0 {
		r.FrameCache = defaultFrameCache
	}
	if r.RestartTail == 0 {
		r.RestartTail = defaultRestartTail
	}
	if r.DictSamples == 0 {
		r.DictSamples = defaultDictSamples
	}
	if r.DictSize == 0 {
		r.DictSize = defaultDictSize
	}
	if r.CompactDead == 0 {
		r.CompactDead = defaultCompactDead
	}
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
