// Package layout is the directory of a store and its files besides the
// log: their names, the formats of STORE, CHECKPOINT, the frame files and
// the dictionary files, and the helpers that write them durably.
//
// A store is one directory:
//
//	DIR/
//	  LOCK                 advisory lock: one process per store
//	  CLEAN                the clean-close mark (empty): there between a
//	                       clean Close and the next writable Open
//	  STORE                identity: store id, creation time, chain mode
//	                       (written once, after the log's first segment is
//	                       durable)
//	  CHECKPOINT           engine checkpoint: where restart replays from, the
//	                       runs' heads (replaced atomically)
//	  RETENTION            the first log segment garbage collection kept
//	                       (retention.go; written before it removes any)
//	  ledger-<gen>.tbl     the ledger's persisted fingerprint index, named by
//	                       the checkpoint generation that wrote it
//	  frames/<h>.frame     the latest frame of each run as of some checkpoint,
//	                       h = hex of the first 16 bytes of BLAKE3(run id)
//	  dicts/<id>.dict      compression dictionaries, never removed
//	  wal/                 the write-ahead log (package wal; its records:
//	                       package record)
//	  snapshots/           Pebble: snapshot history and the atom index
//	                       (package snapshot)
//
// Only the log, STORE and RETENTION are the truth; CHECKPOINT, the ledger table, the
// frame files and the snapshot store are derived from the log: the engine
// checks each against it and rebuilds what disagrees (invariant I9).
// Dictionaries cannot be rebuilt: a store lacking one that its records
// name is refused.
//
// # Crash safety
//
// WriteFileAtomic writes a temporary file, fsyncs it, renames it over the
// old one and fsyncs the directory: after a crash a file holds its old
// content or its new one, never a mix. A temporary file (".tmp") left by a
// crash is never read, and the engine removes it at Open.
//
// # Caveats
//
// The formats of format.go are frozen. Parsing never panics and never
// reads past its input; a file that breaks its format is a
// *record.CorruptionError naming it.
package layout
