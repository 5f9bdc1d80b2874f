package frame

import (
	"bytes"
	"runtime"
	"testing"
)

// maxDecodeAmplification is doc.go's bound: a decoded record takes at most
// about 100 times its size in memory. The densest record is one of
// one-byte ops, each a 96-byte op.
const maxDecodeAmplification = 100

// TestDecodeMemoryBounded: whatever a record holds, decoding it allocates
// at most maxDecodeAmplification bytes per byte of record, checked before
// the allocation (each count against what the rest of the record can
// hold). The densest records are crafted for every list the decoders
// allocate: ops, tool calls, parts, messages, sealed values.
func TestDecodeMemoryBounded(t *testing.T) {
	const n = 1 << 16
	manyOps := append([]byte{0xD1, 0x80, 0x80, 0x04}, bytes.Repeat([]byte{byte(opClearScratch)}, n)...)
	calls := append([]byte{0xD2, 1, 8, 0x42, msgFlagCalls, 0, 0x80, 0x80, 0x04}, bytes.Repeat([]byte{0, 0, 0}, n)...)
	parts := append([]byte{0xD2, 1, 8, 0x41, msgFlagParts, 0, 0x80, 0x80, 0x04}, bytes.Repeat([]byte{0, 0}, n)...)
	msgOps := append([]byte{0xD2, 0x80, 0x80, 0x04}, bytes.Repeat([]byte{8, 0x41, msgFlagParts, 0, 1, 0, 0}, n)...)
	frameParts := append([]byte{0xF2, 0, 0, 0, 0, 1, 0x41, msgFlagParts, 0, 0x80, 0x80, 0x04}, bytes.Repeat([]byte{0, 0}, n)...)
	frameParts = append(frameParts, 0)
	frameMsgs := append([]byte{0xF2, 0, 0, 0, 0, 0x80, 0x80, 0x04}, bytes.Repeat([]byte{0x41, msgFlagParts, 0, 1, 0, 0}, n)...)
	frameMsgs = append(frameMsgs, 0)
	// The densest sealed section: n entries of the shortest distinct
	// sorted keys (two bytes) and empty values.
	frameSealed := []byte{0xF3, 0, 0, 0, 0, 0, 0, 0x80, 0x80, 0x04}
	for i := 0; i < n; i++ {
		frameSealed = append(frameSealed, 2, byte(i>>8), byte(i), 0)
	}
	for _, tc := range []struct {
		name string
		rec  []byte
	}{{"ops", manyOps}, {"tool calls", calls}, {"parts", parts}, {"message ops", msgOps}, {"frame parts", frameParts}, {"frame messages", frameMsgs},
		{"frame sealed values", frameSealed}} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var err error
		if tc.rec[0]&0xf0 == 0xF0 {
			_, err = DecodeFrame(tc.rec)
		} else {
			_, err = DecodeDelta(tc.rec)
		}
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		per := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(tc.rec))
		t.Logf("%s: %.1f bytes allocated per byte of record", tc.name, per)
		if per > maxDecodeAmplification {
			t.Errorf("%s: %.1f bytes allocated per byte of record, more than %d", tc.name, per, maxDecodeAmplification)
		}
	}
}
