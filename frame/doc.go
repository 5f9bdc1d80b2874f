// Package frame holds the semantic frame of an agent (its typed state), the
// deltas that atoms apply to it, their deterministic binary encoding, and
// the per-record compression used to store them.
//
// A Frame is what an agent knows at one point of a run: its intent
// (Objective, Subgoals with a status), working memory (Memory, a key to
// bytes map, Sealed, the sealed values of erasable keys, and a
// Scratchpad), the conversation (Messages) and in-flight actions
// (Pending). Each atom changes it by a Delta, a short list of ops:
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
// # Conversations
//
// A Message holds what a message of OpenAI's chat completions or of
// Anthropic's messages API carries, so that a conversation maps in field
// by field and back out unchanged (llm_test.go does it with both APIs'
// JSON). Role.String is the APIs' name of each role.
//
// OpenAI chat completions:
//
//	role                         Role (system, developer, user, assistant, tool)
//	content: a string            Content
//	content: a list of parts     Parts: {"type":"text"} as PartText, any other
//	                             part (image_url, input_audio, file, refusal)
//	                             as PartJSON, its object verbatim
//	content: null                Content "" (an assistant turn of tool calls)
//	tool_calls[i]                ToolCalls[i]: id ID, function.name Name,
//	                             function.arguments Arguments
//	tool_call_id                 CallID
//
// Anthropic messages:
//
//	system (of the request)      a RoleSystem message, first
//	role                         Role (user, assistant)
//	content: a string            Content
//	content: a list of blocks    Parts, in order:
//	  text {text}                  PartText, Text
//	  tool_use {id, name, input}   PartToolCall, Call{ID, Name, Arguments: input}
//	  tool_result {tool_use_id,    PartToolResult, CallID, IsError, and Text if
//	    content, is_error}           content is a string, JSON if it is a list
//	  any other block              PartJSON, its object verbatim: thinking with
//	                               its signature, redacted_thinking, image,
//	                               document, server tools' blocks, and a block
//	                               with fields beyond these (cache_control,
//	                               citations)
//
// A provider-neutral agent records a tool's answer as a RoleTool message
// with CallID, Tool, Content and IsError.
//
// Apply and Validate check a message: ToolCalls only on assistant
// messages, tool_call parts too, tool_result parts in user or tool
// messages, IsError on tool messages; ids non-empty (a call's id and name,
// a tool_result's CallID) and a message's call ids unique; Content or
// Parts, not both; tool calls in ToolCalls or in parts, not both; each
// part with only the fields of its kind. Arguments are empty or valid
// JSON (encoding/json.Valid), a PartJSON a JSON object, a tool_result's
// JSON an array. JSON is kept byte for byte, not canonicalized: the model
// gets back exactly what it wrote (a resent conversation keeps the
// provider's prompt cache), and determinism does not need it, since equal
// bytes encode equally. Where equality of arguments matters (an action's
// fingerprint), the ledger canonicalizes its own copy.
//
// # Certified results
//
// A tool's result is certified (the ledger's certificate) before the atom
// that records it as a message commits. The delta need not store it again:
// ReferResults(results) turns every message text and tool output of a
// delta that equals results[i], the i-th certified result of the atom's
// actions, into a reference of a few bytes (ToolOutputResult builds one
// directly). Such a delta applies with ApplyWith(d, resolver), which
// resolves each reference and gives the frame the inline delta gives:
// frames, snapshots and State hold the full text, never a reference.
//
//	stored := d.ReferResults(results)         // at commit: results of the atom
//	rec := frame.AppendDelta(nil, stored)     // the result is not in rec
//	err := f.Apply(d)                         // the live frame, as before
//
//	d2, err := frame.DecodeDelta(rec)         // at replay
//	err = f.ApplyWith(d2, func(i int) ([]byte, error) { ... certificate i ... })
//
// Which results a delta may refer to is the engine's rule (record.ApplyAtom):
// result i is the certified result of action i of the atom that commits
// the delta, the i-th action its atom record lists, in call order. A
// delta may therefore refer to the result of any action its atom performed
// or was given as certified (a repeated action, an action a fork repeats
// from its parent), and to nothing else: not to an earlier atom's result,
// nor to another run's. The chain covers both sides: the reference is in
// the atom's body, and BLAKE3 of the result in its chained payload, so a
// changed reference or a changed certificate breaks the atom's link; and
// verify reports a reference to an action the atom does not list or that
// has no certificate before the atom.
//
// # Sealed memory
//
// A memory key can be made erasable: the engine seals each of its values
// (AES-GCM, with a data key of that memory key's own) before the value
// enters a delta, so that destroying the data key erases the key's values
// from every delta, snapshot and rollback of the run without rewriting
// them (crypto-shredding). This package never sees a key: it carries the
// sealed bytes as opaque values, in a set_sealed op (SetSealed) and in a
// frame's Sealed map, beside Memory. Apply keeps a key in one of the two:
// Set puts it in Memory and out of Sealed, SetSealed the reverse, Delete
// removes it from both; Validate rejects a key in both.
//
//	stored, err := d.SealSets(seal)     // at commit: set ops of erasable keys sealed
//	rec := frame.AppendDelta(nil, stored)
//	open, err := f.Unseal(unseal)       // the frame with its sealed values opened
//
// SealSets returns the delta itself when it seals nothing, without
// allocating; Unseal returns the frame itself when it holds nothing
// sealed, and leaves out a value whose data key is gone. Nothing in a
// value tells sealed from plain: only the op kind and the frame's section
// do, so a sealed value never reaches an agent as if it were its value.
//
// # Wire format
//
// All integers are uvarints, strings and byte strings are length-prefixed,
// fields come in a fixed order with no names on the wire. The first byte of
// a record is a tag holding its kind and version (0xD1 delta v1, 0xF1 frame
// v1; 0xD2, 0xF2 version 2, whose messages may hold tool calls, parts and
// an error flag, and whose deltas may refer to certified results; 0xD3, a
// delta of one replace_frame op; 0xD4, a delta that holds a set_sealed op;
// 0xF3, a frame that holds a sealed value). A record is written in the
// lowest version that holds it, so a record without anything of version 2
// is byte for byte what version 1 wrote, and one without a sealed value
// what the versions before sealed values wrote.
//
//	delta:  0xD1 | nops | op...            op = kind byte, then its fields
//	frame:  0xF1 | objective | nsub {id text status} | nmem {key value}
//	        (keys sorted) | scratchpad | nmsg {head content [tool] [callid]}
//	        | npend {callid tool args key}
//	v2:     message = head [flags] content [tool] [callid] [calls] [parts]
//	0xF3:   the frame of version 2, then nsealed {key sealed} (keys sorted)
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
// An s2 record with a dictionary, up to 64 KiB, is encoded by the
// package's own encoder (s2dict.go): s2's block format, which every
// reader decodes as before, without the 64 KiB table s2's encoder clears
// for every record, and with the dictionary indexed at every position:
// 5-7% fewer bytes on deltas than s2's own, for up to 1.5x its CPU.
//
// # Caveats
//
//   - A decoded Frame or Delta keeps one private copy of the record that its
//     strings and byte slices share, so a single retained memory key keeps
//     the whole record's copy alive. Clone a value to detach it.
//   - Apply keeps references to the delta's byte slices (memory values,
//     pending args, tool calls and parts). Neither the delta nor the frame mutates them, but a
//     caller who mutates a frame's Memory value in place also changes the
//     delta's. Clone before mutating in place.
//   - Subgoals and Pending are looked up by linear scan: fine for the tens
//     of entries agents keep, not meant for thousands.
//   - Arguments that are not JSON are refused, and a model can write them
//     (a tool call cut by the token limit). Record such a turn another way
//     (its text in Content, or the arguments as a JSON string) and answer
//     the model with an error; nothing here guesses a repair.
//   - A tool message's CallID is not checked against an earlier call: a
//     compacted conversation (DropMessages) may have dropped the call.
//   - Not carried: OpenAI's message-level name, refusal and audio, and its
//     custom tool calls (free text, not JSON arguments); Anthropic's
//     request-level fields besides system. Keep them in Memory if needed.
//   - A reference names a result by its index among the atom's actions:
//     ApplyWith must be given the resolver of the atom the delta was
//     committed by. Resolve copies each result it inlines.
//   - Compress with an unknown dictionary id silently compresses without a
//     dictionary (the record says id 0), by design: writing never fails.
//     Decompress of a record naming an unregistered id fails with
//     ErrUnknownDict: register every dictionary ever used before reading.
//   - The zstd frames carry no checksum: records are expected to be
//     checksummed by the log that stores them (wal uses CRC32C).
//   - A decoded record takes at most about 100 times its size in memory
//     (a record of one-byte ops; tool calls and parts take less), checked
//     before allocating: the decompression bounds below bound that too.
//   - One record decompresses to at most MaxDecompressedSize (64 MiB); a
//     reader of records it does not trust bounds the total with a Budget
//     (Compressor.WithBudget, NewBudget: 256 MiB plus 256 times the
//     compressed bytes read), which refuses a record past it (ErrBudget)
//     before allocating, so a store of decompression bombs costs time and
//     memory in proportion to its bytes. The writer keeps the same rule,
//     MaxRatio: Compress and CompressWith never write a record that
//     decompresses to more than 256 times its size (one that would keeps a
//     tail of len/256 bytes uncompressed in its s2 block), so no budget
//     of that ratio refuses what they wrote. Only a store written by
//     another writer (or by one older than the rule, beyond its first
//     256 MiB decompressed) needs a larger budget.
package frame
