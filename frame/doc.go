// Package frame holds the semantic frame of an agent (its typed state), the
// deltas that atoms apply to it, their deterministic binary encoding, and
// the per-record compression used to store them.
//
// A Frame is what an agent knows at one point of a run: its intent
// (Objective, Subgoals with a status), working memory (Memory, a key to
// bytes map, and a Scratchpad), the conversation (Messages) and in-flight
// actions (Pending). Each atom changes it by a Delta, a short list of ops:
//
//	var d frame.Delta
//	d.SetSubgoalStatus("s1", frame.SubgoalDone).
//		Set("bucket", []byte("logs-prod-7")).
//		ToolOutput("call_1", "create_bucket", []byte(`{"status":"ok"}`))
//	if err := f.Apply(&d); err != nil { ... } // f unchanged on error
//
//	rec := frame.AppendDelta(nil, &d)          // deterministic bytes
//	stored := comp.Compress(nil, rec, dictID)  // [codec][dict id][payload]
//
//	raw, err := comp.Decompress(nil, stored)
//	d2, err := frame.DecodeDelta(raw)
//
// frame(n) = Apply(frame(n-1), delta(n)): storing deltas instead of whole
// frames keeps a store O(steps), and a snapshot (AppendFrame of the frame
// at some seq) bounds how many deltas a restart replays.
//
// # Wire format
//
// All integers are uvarints, strings and byte strings are length-prefixed,
// fields come in a fixed order with no names on the wire. The first byte of
// a record is a tag holding its kind and version (0xD1 delta v1, 0xF1 frame
// v1).
//
//	delta:  0xD1 | nops | op...            op = kind byte, then its fields
//	frame:  0xF1 | objective | nsub {id text status} | nmem {key value}
//	        (keys sorted) | scratchpad | nmsg {head content [tool] [callid]}
//	        | npend {callid tool args key}
//	stored: codec byte (0 none, 1 s2, 2 zstd) | dict id uvarint | payload
//
// format.go has the byte-level layout of every op; those constants are
// frozen.
//
// # Guarantees
//
//   - Deterministic: equal frames (or deltas) encode to equal bytes; memory
//     keys are sorted, a nil and an empty slice or map encode alike, and a
//     decoder accepts only the canonical form (sorted unique keys, presence
//     flags only for non-empty fields), so decode-then-encode is identity.
//   - Safe decoding: every length and count is checked against the input
//     before anything is allocated; unknown versions, ops, statuses, roles,
//     codecs and dictionaries give errors that say what and at which
//     offset. No input makes a decoder panic.
//   - Atomic Apply: all ops are checked against the state the earlier ops
//     leave before any is applied; on error the frame is unchanged.
//   - Incremental: Apply updates the frame in place; its cost is that of the
//     delta, not of the frame (a 500 KB conversation is not copied per atom).
//   - Dictionaries are forever: a record names its dictionary id, and Dicts
//     refuses to rebind an id to different bytes.
//
// # Compression
//
// Small records barely compress on their own (a 600-byte delta gains a few
// percent from s2 and about 1.3x from zstd without a dictionary); a
// dictionary trained on earlier records (TrainDict) makes a typical delta
// two to three times smaller. Compress chooses per record: raw under 48
// bytes; s2 under 8 KiB, because the commit path compresses every delta and
// s2 with a dictionary costs a few microseconds where zstd costs tens; zstd
// from 8 KiB (snapshots), for its better ratio; s2 again from 1 MiB when it
// halves the record; and raw whenever the codec saves less than 1/32.
//
// # Caveats
//
//   - A decoded Frame or Delta keeps one private copy of the record that its
//     strings and byte slices share, so a single retained memory key keeps
//     the whole record's copy alive. Clone a value to detach it.
//   - Apply keeps references to the delta's byte slices (memory values,
//     pending args). Neither the delta nor the frame mutates them, but a
//     caller who mutates a frame's Memory value in place also changes the
//     delta's. Clone before mutating in place.
//   - Subgoals and Pending are looked up by linear scan: fine for the tens
//     of entries agents keep, not meant for thousands.
//   - Compress with an unknown dictionary id silently compresses without a
//     dictionary (the record says id 0), by design: writing never fails.
//     Decompress of a record naming an unregistered id fails with
//     ErrUnknownDict: register every dictionary ever used before reading.
//   - The zstd frames carry no checksum: records are expected to be
//     checksummed by the log that stores them (wal uses CRC32C).
//   - One record decompresses to at most MaxDecompressedSize (64 MiB); a
//     reader of records it does not trust bounds the total with a Budget
//     (Compressor.WithBudget, NewBudget: 256 MiB plus 256 times the
//     compressed bytes read), which refuses a record past it (ErrBudget)
//     before allocating, so a store of decompression bombs costs time and
//     memory in proportion to its bytes. Records more compressible than
//     that, beyond the first 256 MiB, need a larger budget.
package frame
