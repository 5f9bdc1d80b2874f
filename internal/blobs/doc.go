// Package blobs is the engine's blob capability (docs/DESIGN.md, "Blobs:
// large values outside the log"): which values of a delta go to a blob,
// the writing of one from a stream, the blobs atoms in flight hold, and
// the live-set computation of a sweep. Package blob holds the format and
// the files; this package the bookkeeping; package engine conducts it
// (engine/blobs.go) and implements Core over its DB. It knows nothing of
// runs' locks or frames.
//
// # The interface
//
// What the engine implements (Core), over its table of runs and its log:
//
//	Sealers(run) (s []blob.Sealer, sealed bool) // run's data keys for blobs, the newest first (sealed false: plaintext)
//	Parent(run) (parent string, held bool)      // run's parent, if the store holds run
//	References(ctx, fn func(run, blob.Ref)) error // every reference the log's records of live runs hold
//
// and what it gives once (Config): the store's FS and blob directory
// (the mark's too), the threshold above which a value goes to a blob,
// and Ship, which gives a committed blob file to the replica (nil: the
// store ships no blobs). The Set decides the sealer a run's new blobs
// are written with (an error if the run has none left) and those a blob
// it references may be under (its keys, then its ancestors').
//
// What the engine calls, whole. An atom in flight is a Holder: the key it
// is held under (any comparable value), its run and seq.
//
//	New(Core, Config) *Set
//	(*Set).Write(ctx, Holder, media, src) (blob.Ref, error) // a blob from src, held for the atom
//	(*Set).Value(ctx, Holder, v) (string, bool, error)     // v as a record of the atom holds it
//	(*Set).Delta(Holder, d) (*frame.Delta, error)          // a delta's values, through Value (the prepare hook)
//	(*Set).Result(ctx, Holder, res) ([]byte, error)        // a Do result, through Value
//	(*Set).Release(key)                                    // the atom committed or failed
//	(*Set).Sweep(ctx) (files, bytes, error)                // remove what nothing references or holds
//	(*Set).Live(ctx, live) error                           // add the names the log references
//	(*Set).Open(run, ref) (io.ReadCloser, error)           // read a blob under run's readers, checked
//	(*Set).ShipAll() (int, error)                          // Open: Ship every committed blob file not marked
//	LogReferences(ctx, log, file, dec, dead, fn) error     // Core.References over the log's cursor
//	Dead(deleted, parents, parentOf) map[string]bool       // deleted runs that keep no blob alive
//
// # Guarantees
//
// A sweep never removes a blob that a record appended after its scan of
// the log references. Every such blob is pending (held by an atom in
// flight) from before its record is appended until the atom is released:
// so a sweep keeps every name pending when it begins, every name released
// while it runs, and every name pending when it removes. Writers hold
// commit (read) around the creation of their temporary file, and from the
// blob's Commit (its rename) to its registration; a sweep holds it
// (write) from its last look at pending to its last removal: no blob or
// temporary file appears between the two unseen. Streaming a blob in
// holds no lock: a slow upload never stalls a sweep, nor, through one
// waiting, other writers. With a write in progress a sweep leaves
// temporary files to a later sweep.
//
// # Shipping
//
// Write ships a new blob (Config.Ship) once it is committed and held, with
// no lock held, before it returns the Ref: a failed ship fails the Write,
// and the blob, referenced by nothing, stays held until its atom's release
// and then goes with a sweep. A name shipped since the Set was made (by
// Write or ShipAll) is not shipped again; a sweep forgets the names it
// removes.
//
// With a Config.Ship, each name the replica acknowledged is then appended to
// the mark of shipped blobs, blobs/SHIPPED (mark.go: fixed entries with a
// CRC each), and the mark fsynced, before Write returns: the mark only
// ever names blobs the replica holds. ShipAll, at Open, reads the mark,
// lists blobs/ and ships only the names the mark lacks: those a crash
// kept from the replica between their commit here and their mark (no
// record references one: its Ref was never handed out), and those of a
// store that was not replicated when they were written. Open's cost is
// then a listing of blobs/ and a read of the mark, plus a ship per blob
// that may not have been shipped; a store whose blobs are all marked
// calls no Replicator. A mark that is cut short or damaged loses the
// names from the damage on (they are shipped again); one that names blobs
// a sweep removed, or a name twice, is rewritten at Open (temporary file,
// fsync, rename, fsync of blobs/). A mark write that fails fails the
// Write and, being final, every later one, until the store is opened
// again.
//
// # Caveats
//
// The mark trusts the replica: a name it holds is never given to a
// Replicator again. A store handed to a Replicator of another replica (a
// new destination, or a replica that lost what it acknowledged) must lose
// its mark first (remove blobs/SHIPPED): its next Open then ships every
// blob. The nested module replicate refuses a store directory that is not
// its own stream's copy, so its Replicators share one replica.
package blobs
