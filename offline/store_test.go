package offline

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// memorySealer returns a sealer of store {7..} whose memory keys email
// and ssn of run r have data keys, the sealed values it sealed for them,
// and a sealer of the same store after ssn's key was erased.
func memorySealer(t *testing.T) (live, erased *record.Sealer, email, ssn []byte) {
	t.Helper()
	ring, err := seal.NewKeyring(map[string][]byte{"k": bytes.Repeat([]byte{5}, seal.KeySize)}, "k")
	if err != nil {
		t.Fatal(err)
	}
	var tbl seal.Table
	ks := seal.NewKeys()
	for _, key := range []string{"email", "ssn"} {
		scope := seal.MemoryScope("r", key)
		k, err := tbl.Add(ring, scope)
		if err != nil {
			t.Fatal(err)
		}
		ks.Put(scope, k)
	}
	store := [16]byte{7, 15: 7}
	live = &record.Sealer{Store: store, Keys: ks}
	if email, err = live.SealValue(nil, []byte("alice@example.com"), "r", "email"); err != nil {
		t.Fatal(err)
	}
	if ssn, err = live.SealValue(nil, []byte("078-05-1120"), "r", "ssn"); err != nil {
		t.Fatal(err)
	}
	if nos := tbl.Erase(seal.MemoryScope("r", "ssn")); len(nos) != 1 {
		t.Fatalf("erase ssn's key: erased %v", nos)
	}
	after, err := tbl.Open(ring)
	if err != nil {
		t.Fatal(err)
	}
	return live, &record.Sealer{Store: store, Keys: after}, email, ssn
}

// TestOpenFrame: a frame's sealed values are opened into Memory, a value
// whose data key was erased is left out and named, the frame given is not
// changed, and a value that does not authenticate (moved to another key)
// or a sealed value without a sealer is damage reported through the
// caller's damage function.
func TestOpenFrame(t *testing.T) {
	live, erased, email, ssn := memorySealer(t)
	f := &frame.Frame{Objective: "o", Memory: map[string][]byte{"plan": []byte("gold")},
		Sealed: map[string][]byte{"email": email, "ssn": ssn}}
	noDamage := func(key string, err error) error {
		t.Fatalf("damage of key %q: %v", key, err)
		return nil
	}

	got, gone, err := OpenFrame(live, f, noDamage)
	if err != nil || gone != nil || len(got.Sealed) != 0 ||
		!maps.EqualFunc(got.Memory, map[string][]byte{"plan": []byte("gold"), "email": []byte("alice@example.com"), "ssn": []byte("078-05-1120")}, bytes.Equal) {
		t.Fatalf("with every key live: %v, erased %v, memory %q, sealed %d", err, gone, got.Memory, len(got.Sealed))
	}

	got, gone, err = OpenFrame(erased, f, noDamage)
	if err != nil || !slices.Equal(gone, []string{"ssn"}) ||
		!maps.EqualFunc(got.Memory, map[string][]byte{"plan": []byte("gold"), "email": []byte("alice@example.com")}, bytes.Equal) {
		t.Fatalf("with ssn erased: %v, erased %v, memory %q", err, gone, got.Memory)
	}
	if len(f.Sealed) != 2 || len(f.Memory) != 1 {
		t.Fatalf("the frame given was changed: memory %q, %d sealed", f.Memory, len(f.Sealed))
	}
	if same, gone, err := OpenFrame(erased, got, noDamage); same != got || gone != nil || err != nil {
		t.Fatalf("a frame without sealed values: %p (want %p), %v, %v", same, got, gone, err)
	}

	moved := &frame.Frame{Memory: map[string][]byte{}, Sealed: map[string][]byte{"plan": email}}
	var damaged string
	want := errors.New("the damage, where it is")
	_, _, err = OpenFrame(live, moved, func(key string, err error) error {
		if !errors.Is(err, seal.ErrAuth) {
			t.Errorf("key %q: %v, want seal.ErrAuth", key, err)
		}
		damaged = key
		return want
	})
	if err != want || damaged != "plan" {
		t.Fatalf("a value moved to another key: %v, damage of %q", err, damaged)
	}
	if _, _, err := OpenFrame(nil, f, func(key string, err error) error { return err }); err == nil {
		t.Fatal("sealed values without a sealer (a plaintext store): no error")
	}
}

// TestExportedOpsSealed: an atom's set_sealed ops and a replace_frame
// op's sealed values are opened (AtomInfo.Opened) and exported with their
// values, an erased one as "erased" without a value, and the JSON holds
// neither an erased value nor sealed bytes.
func TestExportedOpsSealed(t *testing.T) {
	_, erased, email, ssn := memorySealer(t)
	target := &frame.Frame{Memory: map[string][]byte{"plan": []byte("gold")}, Sealed: map[string][]byte{"email": email, "ssn": ssn}}
	d := new(frame.Delta).Set("plan", []byte("gold")).SetSealed("email", email).SetSealed("ssn", ssn).ReplaceFrame(target)
	opened, err := openOps(erased, d, func(key string, err error) error {
		t.Fatalf("damage of key %q: %v", key, err)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(opened) != 3 || opened[0].Op != 1 || string(opened[0].Value) != "alice@example.com" || opened[0].Erased != nil ||
		opened[1].Op != 2 || opened[1].Value != nil || !slices.Equal(opened[1].Erased, []string{"ssn"}) ||
		opened[2].Op != 3 || opened[2].Frame == nil || !slices.Equal(opened[2].Erased, []string{"ssn"}) {
		t.Fatalf("opened: %+v", opened)
	}

	ops := NewExportedOps(&AtomInfo{Delta: d, Opened: opened})
	var lines []string
	for _, op := range ops {
		b, err := json.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	want := []string{
		`{"op":"set","key":"plan","value":"gold"}`,
		`{"op":"set_sealed","key":"email","value":"alice@example.com"}`,
		`{"op":"set_sealed","key":"ssn","erased":true}`,
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("op %d:\n got %s\nwant %s", i, lines[i], w)
		}
	}
	rf := lines[3]
	if !strings.HasPrefix(rf, `{"op":"replace_frame",`) || !strings.Contains(rf, `{"op":"set","key":"email","value":"alice@example.com"}`) ||
		!strings.HasSuffix(rf, `,"erased_keys":["ssn"]}`) {
		t.Errorf("replace_frame: %s", rf)
	}
	all := strings.Join(lines, "\n")
	if strings.Contains(all, "078-05-1120") || strings.Contains(all, "sealed_base64") {
		t.Errorf("the export holds the erased value or sealed bytes:\n%s", all)
	}

	if _, err := openOps(nil, d, func(key string, err error) error { return err }); err == nil {
		t.Fatal("a set_sealed op without a sealer (a plaintext store): no error")
	}
}
