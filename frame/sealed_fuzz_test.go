package frame

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fuzzSeeds are records of every version, sealed ones among them, for the
// fuzz targets to mutate.
func fuzzSeeds() [][]byte {
	g := newGen(1)
	f := g.frame(6)
	var d Delta
	d.Set("a", []byte("1")).SetSealed("k", []byte{0, 0xff}).Delete("a").
		AppendMessage(Message{Role: RoleDeveloper, Content: "d"})
	sealed := &Frame{Memory: map[string][]byte{"p": []byte("v")}, Sealed: map[string][]byte{"s": {0xaa}, "b": nil},
		Messages: []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c", Name: "ls", Arguments: []byte(`{}`)}}}}}
	return [][]byte{
		AppendDelta(nil, new(Delta).SetObjective("go").Set("k", []byte("v")).ClearScratch()),
		AppendDelta(nil, new(Delta).ToolOutputResult("c", "ls", 0)),
		AppendDelta(nil, new(Delta).ReplaceFrame(f)),
		AppendDelta(nil, new(Delta).ReplaceFrame(sealed)),
		AppendDelta(nil, &d),
		AppendDelta(nil, new(Delta).SetSealed("", nil)),
		AppendFrame(nil, &Frame{}),
		AppendFrame(nil, f),
		AppendFrame(nil, sealed),
		AppendFrame(nil, &Frame{Sealed: map[string][]byte{"": nil}}),
	}
}

// FuzzDecodeRecord decodes arbitrary bytes as a delta and as a frame: the
// decoders never panic, and whatever they accept re-encodes to the same
// bytes (decode-then-encode is identity: one encoding per value, sealed
// values and version 4 deltas and version 3 frames included), at the
// size the size functions give. An accepted frame is valid, and an
// accepted delta seals and unseals back to itself.
func FuzzDecodeRecord(f *testing.F) {
	for _, b := range fuzzSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := DecodeDelta(b); err == nil {
			enc := AppendDelta(nil, d)
			if !bytes.Equal(enc, b) {
				t.Fatalf("delta re-encodes differently:\n in %x\nout %x", b, enc)
			}
			if n := EncodedDeltaSize(d); n != len(b) {
				t.Fatalf("EncodedDeltaSize %d of a %d-byte delta", n, len(b))
			}
			_ = d.String()
			_ = d.Ops()
			// Sealing every set op gives a delta that holds set_sealed
			// and round-trips too.
			s, err := d.SealSets(func(_ string, v []byte) ([]byte, bool, error) { return append([]byte("S"), v...), true, nil })
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(AppendDelta(nil, d), b) {
				t.Fatal("SealSets changed its delta")
			}
			se := AppendDelta(nil, s)
			back, err := DecodeDelta(se)
			if err != nil {
				t.Fatalf("sealed delta %x does not decode: %v", se, err)
			}
			if !bytes.Equal(AppendDelta(nil, back), se) {
				t.Fatal("sealed delta re-encodes differently")
			}
		} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
			t.Fatalf("delta error %v matches no sentinel", err)
		}
		if fr, err := DecodeFrame(b); err == nil {
			enc := AppendFrame(nil, fr)
			if !bytes.Equal(enc, b) {
				t.Fatalf("frame re-encodes differently:\n in %x\nout %x", b, enc)
			}
			if n := EncodedFrameSize(fr); n != len(b) {
				t.Fatalf("EncodedFrameSize %d of a %d-byte frame", n, len(b))
			}
			if err := fr.Validate(); err != nil {
				t.Fatalf("decoded frame is invalid: %v", err)
			}
			u, err := fr.Unseal(func(_ string, v []byte) ([]byte, bool, error) { return v, len(v)%2 == 0, nil })
			if err != nil {
				t.Fatal(err)
			}
			if len(u.Sealed) != 0 || u.Validate() != nil {
				t.Fatalf("unsealed frame holds %d sealed values, Validate %v", len(u.Sealed), u.Validate())
			}
			if !bytes.Equal(AppendFrame(nil, fr), b) {
				t.Fatal("Unseal changed its frame")
			}
		} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
			t.Fatalf("frame error %v matches no sentinel", err)
		}
	})
}

// FuzzSealedOps runs a script of set, set_sealed and delete ops on four
// keys, one delta per byte pair, against a model of where each key is:
// after every delta the frame holds each key in Memory, in Sealed or in
// neither as the model says, never in both; and the frame and the deltas
// survive the codecs unchanged.
func FuzzSealedOps(f *testing.F) {
	f.Add([]byte{0x00, 0x11, 0x21, 0x30})
	f.Add([]byte{0x01, 0x01, 0x10, 0x22, 0x03})
	f.Add([]byte{0x11, 0x12, 0x13, 0x10, 0x20, 0x21})
	keys := [...]string{"a", "b", "secret", ""}
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > 64 {
			script = script[:64]
		}
		type where struct {
			sealed bool
			value  string
		}
		model := map[string]where{}
		fr := &Frame{}
		var d Delta
		for i, c := range script {
			k := keys[c&3]
			v := string([]byte{byte(i), c})
			switch c >> 4 % 3 {
			case 0:
				d.Set(k, []byte(v))
				model[k] = where{false, v}
			case 1:
				d.SetSealed(k, []byte(v))
				model[k] = where{true, v}
			case 2:
				d.Delete(k)
				delete(model, k)
			}
			if c&0x8 == 0 && i != len(script)-1 {
				continue // more ops in this delta
			}
			enc := AppendDelta(nil, &d)
			back, err := DecodeDelta(enc)
			if err != nil {
				t.Fatalf("delta %s: %v", &d, err)
			}
			if diff := cmp.Diff(&d, back, deltaCmp); diff != "" {
				t.Fatalf("delta round trip (-want +got):\n%s", diff)
			}
			if err := fr.Apply(back); err != nil {
				t.Fatalf("Apply %s: %v", back, err)
			}
			d.Reset()
			if err := fr.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := len(fr.Memory) + len(fr.Sealed); got != len(model) {
				t.Fatalf("frame holds %d keys, model %d", got, len(model))
			}
			for k, w := range model {
				m := fr.Memory
				if w.sealed {
					m = fr.Sealed
				}
				if got, ok := m[k]; !ok || string(got) != w.value {
					t.Fatalf("key %q: frame has %q (%v), model %+v", k, got, ok, w)
				}
			}
			fb := AppendFrame(nil, fr)
			f2, err := DecodeFrame(fb)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(fr, f2, frameCmp); diff != "" {
				t.Fatalf("frame round trip (-want +got):\n%s", diff)
			}
		}
	})
}
