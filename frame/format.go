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
// forever. A change of layout takes a new tag (0xD2, 0xF2) and keeps the
// decoder of the old one.
const (
	// tagDelta is the first byte of a delta record: 'D' high nibble, version 1.
	tagDelta byte = 0xD1
	// tagFrame is the first byte of a frame record: 'F' high nibble, version 1.
	tagFrame byte = 0xF1

	// DeltaVersion and FrameVersion are the versions written by this package.
	DeltaVersion = 1
	FrameVersion = 1
)

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
	opMax              opKind = opDropMessages
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
	msgReserved  = 0xc0
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
