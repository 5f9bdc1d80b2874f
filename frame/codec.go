package frame

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
	"unsafe"
)

func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

func strLen(n int) int { return uvarintLen(uint64(n)) + n }

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendQuoted(b []byte, s string) []byte {
	b = append(b, ' ')
	return strconv.AppendQuote(b, s)
}

func (o *op) size() int {
	n := 1
	switch o.kind {
	case opSetObjective, opDelete, opRemovePending:
		n += strLen(len(o.s1))
	case opAddSubgoal:
		n += strLen(len(o.s1)) + strLen(len(o.s2))
	case opSetSubgoalStatus:
		n += strLen(len(o.s1)) + 1
	case opSet, opSetSealed:
		n += strLen(len(o.s1)) + strLen(len(o.b))
	case opAppendScratch:
		n += strLen(len(o.b))
	case opAppendMessage:
		n += messageSize(o.s2, o.s3, o.s1, o.ext)
	case opAddPending:
		n += strLen(len(o.s1)) + strLen(len(o.s2)) + strLen(len(o.b)) + strLen(len(o.s3))
	case opToolOutput:
		n += strLen(len(o.s1)) + strLen(len(o.s2)) + strLen(len(o.s3))
	case opToolOutputRef:
		n += strLen(len(o.s1)) + strLen(len(o.s2)) + uvarintLen(o.n)
	case opDropMessages:
		n += uvarintLen(o.n)
	case opReplaceFrame:
		n += strLen(len(o.b))
	}
	return n
}

// EncodedDeltaSize returns the exact length of AppendDelta's output for d.
func EncodedDeltaSize(d *Delta) int {
	n := 1 + uvarintLen(uint64(d.Len()))
	if d != nil {
		for i := range d.ops {
			n += d.ops[i].size()
		}
	}
	return n
}

// deltaTag is the tag of the lowest version that holds d.
func deltaTag(d *Delta) byte {
	tag := tagDelta
	if d != nil {
		for i := range d.ops {
			switch {
			case d.ops[i].kind == opSetSealed:
				return tagDelta4 // holds everything of versions 2 and 3
			case d.ops[i].kind == opReplaceFrame:
				tag = tagDelta3
			case d.ops[i].needsV2() && tag == tagDelta:
				tag = tagDelta2
			}
		}
	}
	return tag
}

// AppendDelta appends the encoding of d to dst and returns the extended
// slice. The encoding is deterministic: equal deltas (same ops, same order)
// give equal bytes, in the lowest format version that holds them (a delta
// without the ops and message fields of version 2 is written as version 1
// always wrote it). A nil delta encodes as an empty one. Values that Apply
// would reject (an undefined status, say) are encoded as they are, and
// DecodeDelta rejects an undefined status, role or part kind.
func AppendDelta(dst []byte, d *Delta) []byte {
	dst = slices.Grow(dst, EncodedDeltaSize(d))
	dst = append(dst, deltaTag(d))
	dst = binary.AppendUvarint(dst, uint64(d.Len()))
	if d == nil {
		return dst
	}
	for i := range d.ops {
		o := &d.ops[i]
		dst = append(dst, byte(o.kind))
		switch o.kind {
		case opSetObjective, opDelete, opRemovePending:
			dst = appendStr(dst, o.s1)
		case opAddSubgoal:
			dst = appendStr(appendStr(dst, o.s1), o.s2)
		case opSetSubgoalStatus:
			dst = append(appendStr(dst, o.s1), o.aux)
		case opSet, opSetSealed:
			dst = appendBytes(appendStr(dst, o.s1), o.b)
		case opAppendScratch:
			dst = appendBytes(dst, o.b)
		case opAppendMessage:
			dst = appendMessage(dst, o.aux, o.s2, o.s3, o.s1, o.ext)
		case opAddPending:
			dst = appendStr(appendBytes(appendStr(appendStr(dst, o.s1), o.s2), o.b), o.s3)
		case opToolOutput:
			dst = appendStr(appendStr(appendStr(dst, o.s1), o.s2), o.s3)
		case opToolOutputRef:
			dst = binary.AppendUvarint(appendStr(appendStr(dst, o.s1), o.s2), o.n)
		case opDropMessages:
			dst = binary.AppendUvarint(dst, o.n)
		case opReplaceFrame:
			dst = appendBytes(dst, o.b)
		}
	}
	return dst
}

// EncodedFrameSize returns the exact length of AppendFrame's output for f.
func EncodedFrameSize(f *Frame) int {
	if f == nil {
		f = &Frame{}
	}
	n := 1 + strLen(len(f.Objective)) + uvarintLen(uint64(len(f.Subgoals)))
	for i := range f.Subgoals {
		n += strLen(len(f.Subgoals[i].ID)) + strLen(len(f.Subgoals[i].Text)) + 1
	}
	n += uvarintLen(uint64(len(f.Memory)))
	for k, v := range f.Memory {
		n += strLen(len(k)) + strLen(len(v))
	}
	n += strLen(len(f.Scratchpad)) + uvarintLen(uint64(len(f.Messages)))
	var e msgExt
	for i := range f.Messages {
		m := &f.Messages[i]
		n += messageSize(m.Content, m.Tool, m.CallID, frameExt(m, &e))
	}
	n += uvarintLen(uint64(len(f.Pending)))
	for i := range f.Pending {
		p := &f.Pending[i]
		n += strLen(len(p.CallID)) + strLen(len(p.Tool)) + strLen(len(p.Args)) + strLen(len(p.Key))
	}
	if len(f.Sealed) > 0 {
		n += uvarintLen(uint64(len(f.Sealed)))
		for k, v := range f.Sealed {
			n += strLen(len(k)) + strLen(len(v))
		}
	}
	return n
}

// frameTag is the tag of the lowest version that holds f.
func frameTag(f *Frame) byte {
	if len(f.Sealed) > 0 {
		return tagFrame3 // holds everything of version 2
	}
	for i := range f.Messages {
		if f.Messages[i].needsV2() {
			return tagFrame2
		}
	}
	return tagFrame
}

// AppendFrame appends the encoding of f to dst and returns the extended
// slice. The encoding is deterministic: memory keys are written in sorted
// order, so equal frames give equal bytes (a nil and an empty slice or map
// encode alike), in the lowest format version that holds them. A frame
// that fails Validate still encodes, but DecodeFrame rejects the result or
// (for a part's field that its kind does not carry) returns a frame
// without it. A nil frame encodes as an empty one.
func AppendFrame(dst []byte, f *Frame) []byte {
	dst, _, _ = AppendFrameMessages(dst, f)
	return dst
}

// AppendFrameMessages is AppendFrame, and also says where the messages
// lie in what it returns: out[start:end] are their encodings, one after
// the other (start == end without messages). An agent's frame grows at
// its messages while the parts before them change in place: a snapshot
// store that cuts its chunks at start and end keeps the messages' chunks
// from one snapshot to the next (snapshot.Snapshot.Cuts).
func AppendFrameMessages(dst []byte, f *Frame) (out []byte, start, end int) {
	if f == nil {
		f = &Frame{}
	}
	dst = slices.Grow(dst, EncodedFrameSize(f))
	dst = append(dst, frameTag(f))
	dst = appendStr(dst, f.Objective)
	dst = binary.AppendUvarint(dst, uint64(len(f.Subgoals)))
	for i := range f.Subgoals {
		s := &f.Subgoals[i]
		dst = append(appendStr(appendStr(dst, s.ID), s.Text), byte(s.Status))
	}
	dst = appendMemory(dst, f.Memory)
	dst = appendBytes(dst, f.Scratchpad)
	dst = binary.AppendUvarint(dst, uint64(len(f.Messages)))
	start = len(dst)
	var e msgExt
	for i := range f.Messages {
		m := &f.Messages[i]
		dst = appendMessage(dst, uint8(m.Role), m.Content, m.Tool, m.CallID, frameExt(m, &e))
	}
	end = len(dst)
	dst = binary.AppendUvarint(dst, uint64(len(f.Pending)))
	for i := range f.Pending {
		p := &f.Pending[i]
		dst = appendStr(appendBytes(appendStr(appendStr(dst, p.CallID), p.Tool), p.Args), p.Key)
	}
	if len(f.Sealed) > 0 {
		dst = appendMemory(dst, f.Sealed)
	}
	return dst, start, end
}

// appendMemory appends the count of m and its entries in key order.
func appendMemory(dst []byte, m map[string][]byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(m)))
	if len(m) > 0 {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			dst = appendBytes(appendStr(dst, k), m[k])
		}
	}
	return dst
}

// decoder reads a record held in a private buffer. Errors are sticky: after
// the first one every read returns zero values, and err says what and where.
// Every length is checked against what remains of the input before anything
// is allocated or sliced.
type decoder struct {
	buf    []byte // private copy of the record; strings and slices point into it
	off    int
	record string
	err    error
	// scan (DeltaRefs) decodes a delta without building it: each op, tool
	// call and part is decoded into one reused value in turn, through the
	// same checks, and the result references go to refs.
	scan bool
	refs []int
}

func (d *decoder) fail(off int, detail string) {
	if d.err == nil {
		d.err = &CorruptError{Record: d.record, Offset: off, Detail: detail, kind: ErrCorrupt}
	}
}

func (d *decoder) remaining() int { return len(d.buf) - d.off }

func (d *decoder) byte1(what string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.buf) {
		d.fail(d.off, "truncated: want "+what)
		return 0
	}
	c := d.buf[d.off]
	d.off++
	return c
}

func (d *decoder) uvarint(what string) uint64 { return d.uvarintOf(what, "") }

// uvarintOf is uvarint of the field named what+suffix; the name is built
// only for an error, never on the decoding path.
func (d *decoder) uvarintOf(what, suffix string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf[d.off:])
	if n <= 0 {
		if n == 0 {
			d.fail(d.off, "truncated: want "+what+suffix)
		} else {
			d.fail(d.off, "varint overflows 64 bits in "+what+suffix)
		}
		return 0
	}
	if n > 1 && d.buf[d.off+n-1] == 0 {
		// Encoders write the shortest form; a longer one (a trailing zero
		// group) is a second encoding of the same value.
		d.fail(d.off, "non-minimal varint in "+what+suffix)
		return 0
	}
	d.off += n
	return v
}

// count reads a number of elements each at least minSize bytes long and
// checks that the rest of the input can hold them.
func (d *decoder) count(what string, minSize int) int {
	start := d.off
	v := d.uvarint(what)
	if d.err != nil {
		return 0
	}
	if v > uint64(d.remaining()/minSize) {
		d.fail(start, what+" "+strconv.FormatUint(v, 10)+" exceeds what the remaining "+strconv.Itoa(d.remaining())+" bytes can hold")
		return 0
	}
	return int(v)
}

// span reads a uvarint length and returns that many bytes, checked.
func (d *decoder) span(what string) []byte {
	start := d.off
	v := d.uvarintOf(what, " length")
	if d.err != nil {
		return nil
	}
	if v > uint64(d.remaining()) {
		d.fail(start, what+" length "+strconv.FormatUint(v, 10)+" exceeds the remaining "+strconv.Itoa(d.remaining())+" bytes")
		return nil
	}
	if v == 0 {
		return nil
	}
	b := d.buf[d.off : d.off+int(v) : d.off+int(v)]
	d.off += int(v)
	return b
}

func (d *decoder) str(what string) string {
	b := d.span(what)
	if len(b) == 0 {
		return ""
	}
	// The buffer is private to this decode and the string's bytes are never
	// handed out as a slice, so they are never written again.
	return unsafe.String(&b[0], len(b))
}

func (d *decoder) nonEmptyStr(what string) string {
	start := d.off
	s := d.str(what)
	if d.err == nil && s == "" {
		d.fail(start, what+" flagged present but empty")
	}
	return s
}

// tag reads the first byte of a record, which must be v1 or v2 (the tags
// of versions 1 and 2 of one kind), and reports whether it is v2. newest
// is the newest version of the kind this build reads, for the error.
func (d *decoder) tag(v1, v2 byte, newest int) bool {
	if len(d.buf) == 0 {
		d.fail(0, "empty input")
		return false
	}
	got := d.buf[0]
	if got != v1 && got != v2 {
		if got&0xf0 == v1&0xf0 {
			d.err = &CorruptError{Record: d.record, Offset: 0, kind: ErrVersion,
				Detail: "version " + strconv.Itoa(int(got&0x0f)) + " (this build reads versions " +
					strconv.Itoa(int(v1&0x0f)) + " to " + strconv.Itoa(newest) + ")"}
			return false
		}
		d.fail(0, "first byte 0x"+strconv.FormatUint(uint64(got), 16)+" is not a "+d.record+" tag (0x"+strconv.FormatUint(uint64(v1), 16)+
			" or 0x"+strconv.FormatUint(uint64(v2), 16)+")")
		return false
	}
	d.off = 1
	return got == v2
}

// needV2 fails a version 2 record that holds nothing of version 2: it must
// be written as version 1, and accepting both would make two encodings of
// one value.
func (d *decoder) needV2(v2, used bool) {
	if d.err == nil && v2 && !used {
		d.fail(0, "version 2 "+d.record+" holds nothing of version 2 (it is written as version 1)")
	}
}

func (d *decoder) end() {
	if d.err == nil && d.off != len(d.buf) {
		d.fail(d.off, strconv.Itoa(len(d.buf)-d.off)+" trailing bytes")
	}
}

// DecodeDelta decodes a delta encoded by AppendDelta. It never panics: a
// damaged input gives an error matching ErrCorrupt (or ErrVersion for an
// unknown version) that says what is wrong and at which offset.
//
// The delta does not alias b: it keeps one private copy of the record,
// which its strings and byte slices share (so a small piece of it keeps the
// whole copy alive).
func DecodeDelta(b []byte) (*Delta, error) {
	return decodeDelta(b, false)
}

// DecodeDeltaOwned is DecodeDelta for a caller that hands b over: the
// delta aliases b instead of copying it, so b must not be changed or
// reused afterwards.
func DecodeDeltaOwned(b []byte) (*Delta, error) {
	return decodeDelta(b, true)
}

// DeltaRefs checks b, a delta as AppendDelta encodes it, exactly as
// DecodeDelta does (the same errors), and appends to dst what Refs of the
// decoded delta returns, without building the delta: a reader that needs
// only a delta's references (verify) allocates nothing for it beyond dst's
// growth. b is not retained.
func DeltaRefs(dst []int, b []byte) ([]int, error) {
	d := decoder{record: "delta", buf: b, scan: true, refs: dst}
	if _, err := d.delta(b, true); err != nil {
		return dst, err
	}
	return d.refs, nil
}

func decodeDelta(b []byte, owned bool) (*Delta, error) {
	d := decoder{record: "delta", buf: b}
	return d.delta(b, owned)
}

// delta decodes the delta b (d.buf), or with d.scan only checks it and
// collects its references; it returns nil then.
func (d *decoder) delta(b []byte, owned bool) (*Delta, error) {
	v3 := len(b) > 0 && b[0] == tagDelta3
	v4 := len(b) > 0 && b[0] == tagDelta4
	var v2 bool
	switch {
	case v3, v4:
		d.off = 1
	case len(b) > 0 && b[0]&0xf0 == tagDelta&0xf0 && b[0] != tagDelta && b[0] != tagDelta2:
		return nil, &CorruptError{Record: d.record, Offset: 0, kind: ErrVersion,
			Detail: "version " + strconv.Itoa(int(b[0]&0x0f)) + " (this build reads versions 1 to " + strconv.Itoa(DeltaVersion) + ")"}
	default:
		v2 = d.tag(tagDelta, tagDelta2, DeltaVersion)
	}
	maxOp, used, replaced, sealed := opMaxV1, false, false, false
	switch {
	case v4:
		maxOp, v2 = opMax, true // version 4 holds everything of versions 2 and 3
	case v3:
		maxOp, v2 = opMaxV3, true // version 3 holds everything of version 2
	case v2:
		maxOp = opMaxV2
	}
	// The smallest op (clear_scratch) takes one byte.
	n := d.count("op count", 1)
	if d.err != nil {
		return nil, d.err
	}
	if !owned {
		d.buf = append(make([]byte, 0, len(b)), b...)
	}
	var delta *Delta
	var one op // scan: each op in turn
	if !d.scan {
		delta = &Delta{ops: make([]op, n)}
	}
	for i := 0; i < n && d.err == nil; i++ {
		o := &one
		if d.scan {
			one = op{}
		} else {
			o = &delta.ops[i]
		}
		start := d.off
		o.kind = opKind(d.byte1("op kind"))
		if o.kind > maxOp {
			if d.err == nil {
				d.fail(start, "unknown op kind "+strconv.Itoa(int(o.kind))+" (op "+strconv.Itoa(i)+")")
			}
			break
		}
		switch o.kind {
		case opSetObjective:
			o.s1 = d.str("objective")
		case opAddSubgoal:
			o.s1 = d.str("subgoal id")
			o.s2 = d.str("subgoal text")
		case opSetSubgoalStatus:
			o.s1 = d.str("subgoal id")
			st := d.off
			o.aux = d.byte1("subgoal status")
			if d.err == nil && !SubgoalStatus(o.aux).Valid() {
				d.fail(st, "unknown subgoal status "+strconv.Itoa(int(o.aux)))
			}
		case opSet:
			o.s1 = d.str("memory key")
			o.b = d.span("memory value")
		case opSetSealed:
			o.s1 = d.str("sealed memory key")
			o.b = d.span("sealed memory value")
			sealed = true
		case opDelete:
			o.s1 = d.str("memory key")
		case opAppendScratch:
			o.b = d.span("scratch data")
		case opClearScratch:
		case opAppendMessage:
			var m Message
			var refs msgRefs
			flags, v2msg := d.message(v2, &m, &refs)
			used = used || v2msg
			if d.scan {
				break // its references are in d.refs
			}
			o.aux, o.s2, o.s3, o.s1 = uint8(m.Role), m.Content, m.Tool, m.CallID
			if flags != 0 {
				o.ext = &msgExt{calls: m.ToolCalls, parts: m.Parts, isError: m.IsError, contentRef: refs.content, partRefs: refs.parts}
			}
		case opAddPending:
			o.s1 = d.str("pending call id")
			o.s2 = d.str("pending tool")
			o.b = d.span("pending args")
			o.s3 = d.str("pending key")
		case opToolOutput:
			o.s1 = d.str("tool output call id")
			o.s2 = d.str("tool output tool")
			o.s3 = d.str("tool output")
		case opRemovePending:
			o.s1 = d.str("pending call id")
		case opDropMessages:
			o.n = d.uvarint("drop count")
		case opToolOutputRef:
			o.s1 = d.str("tool output call id")
			o.s2 = d.str("tool output tool")
			o.n = d.result("tool output")
			used = true
			if d.scan && d.err == nil {
				d.refs = addRef(d.refs, o.n)
			}
		case opReplaceFrame:
			st := d.off
			o.b = d.span("frame")
			if d.err == nil {
				if _, err := DecodeFrame(o.b); err != nil {
					d.fail(st, "replace_frame: "+err.Error())
				}
			}
			replaced = true
		default:
			if d.err == nil {
				d.fail(start, "unknown op kind "+strconv.Itoa(int(o.kind))+" (op "+strconv.Itoa(i)+")")
			}
		}
	}
	d.end()
	switch {
	case v4:
		if d.err == nil && !sealed {
			d.fail(0, "version 4 delta holds no set_sealed op (it is written in a lower version)")
		}
	case v3:
		if d.err == nil && !replaced {
			d.fail(0, "version 3 delta holds no replace_frame op (it is written in a lower version)")
		}
	default:
		d.needV2(v2, used)
	}
	if d.err != nil {
		return nil, d.err
	}
	return delta, nil
}

// memory reads n entries of a memory section (keyWhat and valueWhat name
// its fields in errors):
// keys strictly increasing, none of them a key of other (the other
// section of the frame).
func (d *decoder) memory(n int, keyWhat, valueWhat string, other map[string][]byte) map[string][]byte {
	m := make(map[string][]byte, n)
	prev := ""
	for i := 0; i < n && d.err == nil; i++ {
		st := d.off
		k := d.str(keyWhat)
		v := d.span(valueWhat)
		if d.err != nil {
			break
		}
		if i > 0 && k <= prev {
			d.fail(st, keyWhat+" "+strconv.Quote(k)+" not after "+strconv.Quote(prev)+" (keys must be sorted and unique)")
			break
		}
		if _, ok := other[k]; ok {
			d.fail(st, keyWhat+" "+strconv.Quote(k)+" is also a plain memory key (a key is plain or sealed, never both)")
			break
		}
		m[k] = v
		prev = k
	}
	return m
}

// DecodeFrame decodes a frame encoded by AppendFrame and checks it with
// Validate. It never panics: a damaged input gives an error matching
// ErrCorrupt (or ErrVersion) that says what is wrong and at which offset.
//
// The frame does not alias b: it keeps one private copy of the record,
// which its strings and byte slices share (Scratchpad gets its own copy,
// since Apply appends to it).
func DecodeFrame(b []byte) (*Frame, error) {
	return decodeFrame(b, false)
}

// DecodeFrameOwned is DecodeFrame for a buffer the caller hands over: the
// frame's strings and byte slices alias b instead of a copy of it, so the
// caller must never modify b again (a freshly decompressed record it
// drops, say). It saves a copy of the whole record on the restart path.
func DecodeFrameOwned(b []byte) (*Frame, error) {
	return decodeFrame(b, true)
}

func decodeFrame(b []byte, owned bool) (*Frame, error) {
	d := decoder{record: "frame", buf: b}
	v3 := len(b) > 0 && b[0] == tagFrame3
	var v2 bool
	if v3 {
		d.off = 1
		v2 = true // version 3 holds everything of version 2
	} else {
		v2 = d.tag(tagFrame, tagFrame2, FrameVersion)
	}
	used := false
	if d.err != nil {
		return nil, d.err
	}
	if !owned {
		d.buf = bytes.Clone(b)
	}
	f := &Frame{}
	f.Objective = d.str("objective")
	// A subgoal takes at least 3 bytes: two empty strings and a status.
	if n := d.count("subgoal count", 3); n > 0 {
		f.Subgoals = make([]Subgoal, n)
		for i := range f.Subgoals {
			s := &f.Subgoals[i]
			s.ID = d.str("subgoal id")
			s.Text = d.str("subgoal text")
			st := d.off
			s.Status = SubgoalStatus(d.byte1("subgoal status"))
			if d.err == nil && !s.Status.Valid() {
				d.fail(st, "unknown subgoal status "+strconv.Itoa(int(s.Status))+" (subgoal "+strconv.Itoa(i)+")")
			}
		}
	}
	if n := d.count("memory entry count", 2); n > 0 {
		f.Memory = d.memory(n, "memory key", "memory value", nil)
	}
	if sp := d.span("scratchpad"); len(sp) > 0 {
		f.Scratchpad = append([]byte(nil), sp...)
	}
	// A message takes at least 2 bytes: head and empty content.
	if n := d.count("message count", 2); n > 0 {
		f.Messages = make([]Message, n)
		for i := 0; i < n && d.err == nil; i++ {
			_, v2msg := d.message(v2, &f.Messages[i], nil)
			used = used || v2msg
		}
	}
	// A pending action takes at least 4 bytes: four empty fields.
	if n := d.count("pending count", 4); n > 0 {
		f.Pending = make([]Pending, n)
		for i := range f.Pending {
			p := &f.Pending[i]
			p.CallID = d.str("pending call id")
			p.Tool = d.str("pending tool")
			p.Args = d.span("pending args")
			p.Key = d.str("pending key")
		}
	}
	if v3 {
		st := d.off
		// A sealed entry takes at least 2 bytes: an empty key and value.
		n := d.count("sealed entry count", 2)
		if d.err == nil && n == 0 {
			d.fail(st, "version 3 frame holds no sealed value (it is written in a lower version)")
		}
		if n > 0 {
			f.Sealed = d.memory(n, "sealed memory key", "sealed memory value", f.Memory)
		}
	}
	d.end()
	if !v3 {
		d.needV2(v2, used)
	}
	if d.err != nil {
		return nil, d.err
	}
	if err := f.Validate(); err != nil {
		return nil, &CorruptError{Record: "frame", Offset: len(b), Detail: err.Error(), kind: ErrCorrupt}
	}
	return f, nil
}

// HeapSize estimates the bytes of heap f holds: its encoded size (what its
// strings and byte slices hold, whether they alias one decoded buffer or
// are their own), plus the backing arrays of its slices at their capacity
// (Apply grows them as append does, so a frame just changed can hold
// twice what its length needs) and its map's entries. It is what a cache
// of frames should count; it walks the messages, not their bytes.
func HeapSize(f *Frame) int {
	if f == nil {
		return 0
	}
	const mapEntry = 16 + 24 + 16 // key and value headers, and the map's own share
	n := EncodedFrameSize(f) + int(unsafe.Sizeof(Frame{})) +
		cap(f.Subgoals)*int(unsafe.Sizeof(Subgoal{})) +
		cap(f.Messages)*int(unsafe.Sizeof(Message{})) +
		cap(f.Pending)*int(unsafe.Sizeof(Pending{})) +
		(len(f.Memory)+len(f.Sealed))*mapEntry
	for i := range f.Messages {
		m := &f.Messages[i]
		n += cap(m.ToolCalls)*int(unsafe.Sizeof(ToolCall{})) + cap(m.Parts)*int(unsafe.Sizeof(Part{}))
	}
	return n
}
