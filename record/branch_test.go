package record

import (
	"bytes"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/goldenhex"
	"github.com/continuumdb/continuum/ledger"
)

// TestGoldenBranchBase pins the data of the ExtTagBase extension byte for
// byte (branch.go says it is frozen), inside a whole atom body, and reads
// it back.
func TestGoldenBranchBase(t *testing.T) {
	b := &BranchBase{Base: 300, Branch: "fetch", Reads: []StateKey{
		{Kind: KeyObjective},
		{Kind: KeyMemory, Name: "plan"},
		{Kind: KeyMemory, Name: "url"},
		{Kind: KeyFrame},
	}}
	data := AppendBranchBase(nil, b)
	body := append(AppendAtomBodyHeaderExt(nil, []ledger.Fingerprint{fp1}, []AtomExt{{Tag: ExtTagBase, Data: data}}), 0xde, 0xad)
	want := goldenhex.Decode(t, `
		02                 # atom body version 2
		01                 # 1 action
		`+hexFP+`          # its fingerprint
		01                 # 1 extension
		01                 # tag 1 (base)
		18                 # 24 bytes of data:
		  ac02             #   base seq 300
		  05 6665746368    #   branch name "fetch"
		  04               #   4 declared reads, ascending:
		  01 00            #     objective
		  03 04 706c616e   #     memory "plan"
		  03 03 75726c     #     memory "url"
		  07 00            #     frame (everything)
		dead               # the delta (frame.AppendDelta)`)
	if !bytes.Equal(body, want) {
		t.Fatalf("encoding changed:\n got %x\nwant %x", body, want)
	}
	a, err := DecodeAtomBody(body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.AtomBranch()
	if err != nil {
		t.Fatal(err)
	}
	if got.Base != b.Base || got.Branch != b.Branch || len(got.Reads) != len(b.Reads) {
		t.Fatalf("read back %+v, want %+v", got, b)
	}
	for i := range b.Reads {
		if got.Reads[i] != b.Reads[i] {
			t.Fatalf("read %d back as %v, want %v", i, got.Reads[i], b.Reads[i])
		}
	}
	if !bytes.Equal(AppendBranchBase(nil, got), data) {
		t.Fatal("the decoded base re-encodes to other bytes")
	}
	// An atom without the extension is no branch.
	a, err = DecodeAtomBody(AppendAtomBody(nil, nil, []byte{0xde}))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.AtomBranch(); got != nil || err != nil {
		t.Fatalf("AtomBranch of a version 1 body = %v, %v; want none", got, err)
	}
}

// TestBranchBaseRules: one set of reads has one encoding, and anything
// else is damage named by what is wrong.
func TestBranchBaseRules(t *testing.T) {
	enc := func(base uint64, name string, keys ...StateKey) []byte {
		return AppendBranchBase(nil, &BranchBase{Base: base, Branch: name, Reads: keys})
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "branch base: bad or truncated varint"},
		{"non-minimal base", []byte{0x80, 0x00, 1, 'a', 0}, "not minimal"},
		{"empty name", enc(1, ""), "invalid branch name"},
		{"control character in the name", enc(1, "a\nb"), "invalid branch name"},
		{"name too long", enc(1, strings.Repeat("x", 257)), "exceeds the bound 256"},
		{"unknown kind", enc(1, "b", StateKey{Kind: 8}), "unknown state key kind 8"},
		{"kind zero", enc(1, "b", StateKey{Kind: 0}), "unknown state key kind 0"},
		{"a name on an unnamed kind", enc(1, "b", StateKey{Kind: KeyObjective, Name: "x"}), "has no name"},
		{"keys out of order", enc(1, "b", StateKey{Kind: KeyMemory, Name: "b"}, StateKey{Kind: KeyMemory, Name: "a"}), "does not follow"},
		{"a key twice", enc(1, "b", StateKey{Kind: KeyScratchpad}, StateKey{Kind: KeyScratchpad}), "does not follow"},
		{"kinds out of order", enc(1, "b", StateKey{Kind: KeyFrame}, StateKey{Kind: KeyObjective}), "does not follow"},
		{"count beyond the data", []byte{1, 1, 'b', 9, 1, 0}, "read count 9 out of range"},
		{"trailing bytes", append(enc(1, "b"), 0), "1 trailing bytes"},
		{"truncated key", []byte{1, 1, 'b', 1, 3, 5, 'a'}, "key name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeBranchBase(c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("DecodeBranchBase(%x) = %v, want an error with %q", c.data, err, c.want)
			}
		})
	}
	b := &BranchBase{Base: 4, Branch: "b"}
	for _, c := range []struct {
		seq, from uint64
		want      string
	}{{5, 0, ""}, {5, 4, ""}, {4, 0, "a base is before its atom"}, {9, 5, "before the run's fork point 5"}} {
		err := b.CheckBase(c.seq, c.from)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckBase(%d, %d) of base 4 = %v, want %q", c.seq, c.from, err, c.want)
		}
	}
	if err := b.CheckBase(4+MaxBranchLag+2, 0); err == nil || !strings.Contains(err.Error(), "more than 4096 atoms before it") {
		t.Errorf("CheckBase of a base %d atoms behind = %v", MaxBranchLag+1, err)
	}
	if err := b.CheckBase(4+MaxBranchLag+1, 0); err != nil {
		t.Errorf("CheckBase of a base %d atoms behind = %v", MaxBranchLag, err)
	}
	keys := SortStateKeys([]StateKey{{KeyMemory, "b"}, {KeyFrame, ""}, {KeyMemory, "a"}, {KeyMemory, "b"}, {KeyObjective, ""}})
	if want := "objective memory:a memory:b frame"; keyString(keys) != want {
		t.Fatalf("SortStateKeys = %s, want %s", keyString(keys), want)
	}
}

func keyString(keys []StateKey) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.String()
	}
	return strings.Join(s, " ")
}

// TestDeltaWrites: the keys each op writes, and what overlaps what.
func TestDeltaWrites(t *testing.T) {
	d := new(frame.Delta).SetObjective("o").AddSubgoal("g1", "t").SetSubgoalStatus("g2", frame.SubgoalDone).
		Set("m", nil).Delete("n").AppendScratch([]byte("s")).ClearScratch().
		AppendMessage(frame.Message{Role: frame.RoleUser, Content: "hi"}).DropMessages(1).
		AddPending(frame.Pending{CallID: "c1", Tool: "t"}).RemovePending("c2").ToolOutput("c3", "t", []byte("out"))
	want := "objective subgoal:g1 subgoal:g2 memory:m memory:n scratchpad messages pending:c1 pending:c2 pending:c3"
	if got := keyString(DeltaWrites(d)); got != want {
		t.Fatalf("DeltaWrites = %s\nwant          %s", got, want)
	}
	if got := DeltaWrites(new(frame.Delta)); len(got) != 0 {
		t.Fatalf("an empty delta writes %v", got)
	}
	mem := func(n string) StateKey { return StateKey{Kind: KeyMemory, Name: n} }
	for _, c := range []struct {
		a, b []StateKey
		want bool
	}{
		{[]StateKey{mem("a")}, []StateKey{mem("b")}, false},
		{[]StateKey{mem("a"), mem("c")}, []StateKey{mem("b"), mem("c")}, true},
		{[]StateKey{{Kind: KeyFrame}}, []StateKey{mem("x")}, true},
		{[]StateKey{mem("x")}, []StateKey{{Kind: KeyFrame}}, true},
		{[]StateKey{{Kind: KeyFrame}}, nil, false},
		{[]StateKey{{Kind: KeyObjective}}, []StateKey{{Kind: KeyScratchpad}}, false},
	} {
		if _, got := Overlap(c.a, c.b); got != c.want {
			t.Errorf("Overlap(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// FuzzBranchBase decodes fuzzed extension data: it decodes or is refused
// without a panic, and what decodes re-encodes to its input (one encoding)
// and passes the rules the decoder promises.
func FuzzBranchBase(f *testing.F) {
	f.Add(AppendBranchBase(nil, &BranchBase{Base: 7, Branch: "fetch"}))
	f.Add(AppendBranchBase(nil, &BranchBase{Base: 300, Branch: "w-1", Reads: []StateKey{
		{Kind: KeyObjective}, {Kind: KeySubgoal, Name: "s1"}, {Kind: KeyMemory, Name: "k"}, {Kind: KeyPending, Name: "c"}, {Kind: KeyFrame}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBranchBase(data)
		if err != nil {
			return
		}
		if enc := AppendBranchBase(nil, b); !bytes.Equal(enc, data) {
			t.Fatalf("%x decodes to %+v, which re-encodes to %x", data, b, enc)
		}
		if err := CheckBranchName(b.Branch); err != nil {
			t.Fatalf("decoded a branch name the rule refuses: %v", err)
		}
		for i, k := range b.Reads {
			if err := k.Check(); err != nil {
				t.Fatalf("decoded read %d that Check refuses: %v", i, err)
			}
			if i > 0 && CompareStateKeys(b.Reads[i-1], k) >= 0 {
				t.Fatalf("decoded reads out of order: %v", b.Reads)
			}
		}
	})
}
