package frame

// Wire format of frames, deltas and compressed records.
//
// Every integer is an unsigned LEB128 varint (encoding/binary's Uvarint)
// in its shortest form (decoders reject a longer one) unless noted; "str"
// and "bytes" are a uvarint length followed by that many bytes. There are
// no field names on the wire: fields come in the fixed order below, so
// equal values always give equal bytes.
//
// Delta record (AppendDelta):
//
//	+------+--------+------+------+-----+
//	| 0xD1 | nops   | op 1 | op 2 | ... |
//	+------+--------+------+------+-----+
//	  tag    uvarint
//
//	op := kind:1 byte, then by kind:
//	  1 set_objective       str objective
//	  2 add_subgoal         str id, str text
//	  3 set_subgoal_status  str id, status:1 byte
//	  4 set                 str key, bytes value
//	  5 delete              str key
//	  6 append_scratch      bytes data
//	  7 clear_scratch       (nothing)
//	  8 append_message      message
//	  9 add_pending         pending
//	 10 tool_output         str call id, str tool, bytes output
//	 11 remove_pending      str call id
//	 12 drop_messages       uvarint n
//	 13 tool_output_ref     str call id, str tool, uvarint result  (version 2)
//	 14 replace_frame       bytes frame record (AppendFrame)       (version 3)
//	 15 set_sealed          str key, bytes sealed value            (version 4)
//
// Frame record (AppendFrame):
//
//	+------+-----------+------------------+--------------------------+
//	| 0xF1 | str obj.  | uvarint nsub     | nsub x (str id, str text,|
//	|      |           |                  |         status:1 byte)   |
//	+------+-----------+------------------+--------------------------+
//	| uvarint nmem | nmem x (str key, bytes value), keys strictly     |
//	|              | increasing (bytewise), so the encoding is unique |
//	+--------------+--------------------------------------------------+
//	| bytes scratchpad | uvarint nmsg | nmsg x message                |
//	+------------------+--------------+-------------------------------+
//	| uvarint npend | npend x pending                                 |
//	+---------------+-------------------------------------------------+
//
//	message := head:1 byte, str content, [str tool], [str call id]
//	  head bits 0-3: role (0 system, 1 user, 2 assistant, 3 tool)
//	  head bit 4:    a non-empty tool name follows the content
//	  head bit 5:    a non-empty call id follows
//	  head bits 6-7: zero
//	pending := str call id, str tool, bytes args, str key
//	status := 0 open, 1 active, 2 done, 3 failed, 4 abandoned
//
// Version 2 (tags 0xD2, 0xF2) has the same layout, ops and fields, with
// two additions: op 13, and a message that can hold tool calls, parts, an
// error flag, the developer role and (in deltas only) references to
// certified results:
//
//	message (v2) := head:1 byte, [flags:1 byte], content, [str tool],
//	                [str call id], [calls], [parts]
//	  head bits 0-3: role (0-3 as above, 4 developer)
//	  head bits 4-5: tool, call id follow (as above)
//	  head bit 6:    a flags byte follows; it is then non-zero
//	  head bit 7:    zero
//	  flags bit 0:   is_error
//	  flags bit 1:   calls follow: uvarint n >= 1, n x call
//	  flags bit 2:   parts follow: uvarint n >= 1, n x part
//	  flags bit 3:   content is a reference (deltas only)
//	  flags bits 4-7: zero
//	content := str, or when flagged a reference: uvarint result
//	call := str id, str name, bytes arguments (JSON, verbatim)
//	part := head:1 byte, then by kind:
//	  head bits 0-3: kind, then
//	    0 text         text
//	    1 tool_call    call
//	    2 tool_result  str call id, text, bytes json (blocks, verbatim)
//	    3 json         bytes json (the block, verbatim)
//	  head bit 4:    is_error (tool_result only)
//	  head bit 5:    text is a reference: uvarint result (text and
//	                 tool_result only; deltas only)
//	  head bits 6-7: zero
//	text := str, or when flagged a reference: uvarint result
//	result := the index, below 2^32, of a certified result among the
//	          actions of the atom that commits the delta (see ReferResults)
//
// Version 3 of a delta (tag 0xD3) is version 2 plus op 14: it replaces
// the whole frame with the frame record it holds (a rollback returns a
// run to an earlier state with it; no other op can remove a subgoal or the
// newest messages). A delta that holds op 14 holds nothing else (one op:
// Apply refuses it otherwise), and the frame record inside is itself
// version 1, 2 or 3 by the frame's rule.
//
// Version 4 (tag 0xD4, deltas only) holds every op of version 3 plus op
// 15: it stores a memory value sealed (encrypted by the engine with the
// data key of its memory key, so that erasing that data key erases every
// value of the key in the run). The sealed bytes are opaque here; only the
// op kind tells them from a plain value (op 4), since no byte of a value
// can. A version 4 delta holds at least one op 15 (a delta without one is
// written in a lower version); in practice it is version 2 plus op 15,
// since op 14 stays alone in its delta.
//
// Version 3 of a frame (tag 0xF3) is version 2's layout plus a trailing
// section of sealed memory values, after the pending actions:
//
//	+-----------------+---------------------------------------------+
//	| uvarint nsealed | nsealed x (str key, bytes sealed), keys     |
//	|     (>= 1)      | strictly increasing (bytewise)              |
//	+-----------------+---------------------------------------------+
//
// A key is in the memory section or in the sealed section, never both.
// The section is written only when the frame holds a sealed value, so a
// frame without one stays byte for byte what version 1 or 2 wrote; a
// version 3 frame with nsealed 0 is corrupt.
//
// A record is written in the lowest version that holds it: a delta in
// version 2 only if an op needs it (op 13, or a message with flags or the
// developer role), in version 3 only if it holds op 14, in version 4 only
// if it holds op 15; a frame in version 2 only if a message needs it, in
// version 3 only if it holds a sealed value; records that need nothing of
// version 2 stay byte for byte what version 1 wrote. A decoder accepts
// only that form, so that decode-then-encode stays identity: a version 2
// record that needs nothing of version 2 is corrupt, and so is a flags
// byte of zero, a count of zero flagged present, a flag a part's kind does
// not carry, or a reference in a frame (frames hold resolved content).
//
// Compressed record (Compressor.Compress):
//
//	+-------+-----------------+-------------------------------------+
//	| codec | dict id uvarint | payload                             |
//	+-------+-----------------+-------------------------------------+
//	  codec 0 none: payload is the record itself (dict id is 0)
//	  codec 1 s2:   an s2 block (its own uvarint decoded length first),
//	                compressed against dictionary dict id if non-zero; the
//	                s2 dictionary is the last 64 KiB of the dictionary's
//	                content with first repeat index 0
//	  dictionary:   a zstd-format dictionary (magic 37 a4 30 ec), whose id
//	                field is replaced by the registry id, or raw content
//	  codec 2 zstd: one zstd frame with its content size, compressed
//	                against dictionary dict id if non-zero
//
// These constants are frozen: records written with them must stay readable
// forever. A change of layout takes a new tag (0xD5, 0xF4) and keeps the
// decoders of the old ones.
const (
	// tagDelta is the first byte of a delta record: 'D' high nibble, version 1.
	tagDelta byte = 0xD1
	// tagFrame is the first byte of a frame record: 'F' high nibble, version 1.
	tagFrame byte = 0xF1
	// tagDelta2 and tagFrame2 are version 2.
	tagDelta2 byte = 0xD2
	tagFrame2 byte = 0xF2
	// tagDelta3 is version 3 of a delta (op 14).
	tagDelta3 byte = 0xD3
	// tagDelta4 is version 4 of a delta (op 15); tagFrame3 is version 3 of
	// a frame (sealed memory values).
	tagDelta4 byte = 0xD4
	tagFrame3 byte = 0xF3

	// DeltaVersion and FrameVersion are the newest versions this package
	// writes and reads; it reads every version from 1, and writes a record
	// in the lowest version that holds it.
	DeltaVersion = 4
	FrameVersion = 3
)

// maxResultIndex bounds a reference to a certified result. Frozen.
const maxResultIndex = 1<<32 - 1

// opKind identifies a delta operation on the wire. Frozen.
type opKind uint8

const (
	opSetObjective     opKind = 1
	opAddSubgoal       opKind = 2
	opSetSubgoalStatus opKind = 3
	opSet              opKind = 4
	opDelete           opKind = 5
	opAppendScratch    opKind = 6
	opClearScratch     opKind = 7
	opAppendMessage    opKind = 8
	opAddPending       opKind = 9
	opToolOutput       opKind = 10
	opRemovePending    opKind = 11
	opDropMessages     opKind = 12
	opToolOutputRef    opKind = 13
	opReplaceFrame     opKind = 14
	opSetSealed        opKind = 15
	opMaxV1            opKind = opDropMessages
	opMaxV2            opKind = opToolOutputRef
	opMaxV3            opKind = opReplaceFrame
	opMax              opKind = opSetSealed
)

var opNames = [...]string{
	opSetObjective:     "set_objective",
	opAddSubgoal:       "add_subgoal",
	opSetSubgoalStatus: "set_subgoal_status",
	opSet:              "set",
	opDelete:           "delete",
	opAppendScratch:    "append_scratch",
	opClearScratch:     "clear_scratch",
	opAppendMessage:    "append_message",
	opAddPending:       "add_pending",
	opToolOutput:       "tool_output",
	opRemovePending:    "remove_pending",
	opDropMessages:     "drop_messages",
	opToolOutputRef:    "tool_output_ref",
	opReplaceFrame:     "replace_frame",
	opSetSealed:        "set_sealed",
}

func (k opKind) String() string {
	if k == 0 || k > opMax {
		return "op(" + itoa(uint64(k)) + ")"
	}
	return opNames[k]
}

// Message head bits. Frozen.
const (
	msgRoleMask  = 0x0f
	msgHasTool   = 0x10
	msgHasCallID = 0x20
	msgReserved  = 0xc0 // version 1
	// Version 2.
	msgHasFlags   = 0x40
	msgReservedV2 = 0x80
)

// Message flags (version 2). Frozen.
const (
	msgFlagError      = 0x01
	msgFlagCalls      = 0x02
	msgFlagParts      = 0x04
	msgFlagContentRef = 0x08
	msgFlagReserved   = 0xf0
)

// Part head bits (version 2). Frozen.
const (
	partKindMask    = 0x0f
	partFlagError   = 0x10
	partFlagRef     = 0x20
	partReservedBit = 0xc0
)

// Codec identifies the compression of one record; it is the record's first
// byte. Frozen.
type Codec uint8

const (
	CodecNone Codec = 0 // stored raw
	CodecS2   Codec = 1 // s2 block
	CodecZstd Codec = 2 // zstd frame
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecS2:
		return "s2"
	case CodecZstd:
		return "zstd"
	}
	return "codec(" + itoa(uint64(c)) + ")"
}

// MaxDecompressedSize bounds the size of one decompressed record.
// Decompress checks it against the size a payload claims before allocating.
const MaxDecompressedSize = 64 << 20

func itoa(v uint64) string {
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(buf[i:])
}
