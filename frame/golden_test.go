package frame

import (
	"bytes"
	"testing"

	"github.com/continuumdb/continuum/internal/goldenhex"
)

// TestGoldenEncoding pins the wire format (format.go says it is frozen): a
// change of encoding fails here before it makes stored records unreadable.
func TestGoldenEncoding(t *testing.T) {
	var d Delta
	d.SetObjective("go").
		AddSubgoal("s", "t").
		SetSubgoalStatus("s", SubgoalDone).
		Set("k", []byte("v")).
		Delete("k").
		AppendScratch([]byte("x")).
		ClearScratch().
		AppendMessage(Message{Role: RoleAssistant, Content: "hi", Tool: "ls", CallID: "c1"}).
		AddPending(Pending{CallID: "c2", Tool: "rm", Args: []byte("{}"), Key: "K"}).
		ToolOutput("c2", "rm", []byte("ok")).
		RemovePending("c9").
		DropMessages(300)
	wantDelta := goldenhex.Decode(t, `
		d1 0c                    # tag delta v1, 12 ops
		01 02 676f               # set_objective "go"
		02 01 73 01 74           # add_subgoal "s" "t"
		03 01 73 02              # set_subgoal_status "s" done
		04 01 6b 01 76           # set "k" = "v"
		05 01 6b                 # delete "k"
		06 01 78                 # append_scratch "x"
		07                       # clear_scratch
		08 32 02 6869 02 6c73 02 6331   # append_message head=assistant|tool|callid "hi" "ls" "c1"
		09 02 6332 02 726d 02 7b7d 01 4b # add_pending "c2" "rm" {} "K"
		0a 02 6332 02 726d 02 6f6b       # tool_output "c2" "rm" "ok"
		0b 02 6339               # remove_pending "c9"
		0c ac02                  # drop_messages 300
	`)
	if got := AppendDelta(nil, &d); !bytes.Equal(got, wantDelta) {
		t.Fatalf("delta encoding changed:\n got %x\nwant %x", got, wantDelta)
	}
	if back, err := DecodeDelta(wantDelta); err != nil || back.String() != d.String() {
		t.Fatalf("golden delta decodes to %v, %v", back, err)
	}

	f := &Frame{
		Objective:  "o",
		Subgoals:   []Subgoal{{ID: "a", Text: "b", Status: SubgoalFailed}},
		Memory:     map[string][]byte{"z": []byte("1"), "a": nil},
		Scratchpad: []byte("s"),
		Messages:   []Message{{Role: RoleUser, Content: "u"}, {Role: RoleTool, Content: "r", CallID: "c"}},
		Pending:    []Pending{{CallID: "p", Tool: "t"}},
	}
	wantFrame := goldenhex.Decode(t, `
		f1                       # tag frame v1
		01 6f                    # objective "o"
		01 01 61 01 62 03        # 1 subgoal: "a" "b" failed
		02 01 61 00 01 7a 01 31  # 2 memory entries, sorted: "a"="" "z"="1"
		01 73                    # scratchpad "s"
		02 01 01 75 23 01 72 01 63  # 2 messages: user "u"; tool|callid "r" "c"
		01 01 70 01 74 00 00     # 1 pending: "p" "t" args="" key=""
	`)
	if got := AppendFrame(nil, f); !bytes.Equal(got, wantFrame) {
		t.Fatalf("frame encoding changed:\n got %x\nwant %x", got, wantFrame)
	}
	if _, err := DecodeFrame(wantFrame); err != nil {
		t.Fatal(err)
	}
}

const (
	goldenDict   = "deploy the billing-worker service to eu-west-1 and email the report to ops@example.com"
	goldenRecord = "Next I will deploy the billing-worker service to eu-west-1, then email the report to ops@example.com; deploy the billing-worker service again if it fails."
)

// TestGoldenCompressed pins compressed records as written today: they must
// decompress forever, whatever the library version (the s2 dictionary
// derivation and the zstd dictionary id patching are part of the format).
func TestGoldenCompressed(t *testing.T) {
	ds := NewDicts()
	if err := ds.Add(3, []byte(goldenDict)); err != nil {
		t.Fatal(err)
	}
	c := NewCompressor(ds)
	for _, rec := range []string{
		`01 00 # s2, no dictionary
			9a01e84e65787420492077696c6c206465706c6f79207468652062696c6c696e672d776f726b6572207365727669636520746f2065752d776573742d312c0129186e20656d61696c010b18207265706f727401243c6f7073406578616d706c652e636f6d3b8a5a0044616761696e206966206974206661696c732e`,
		`01 03 # s2, dictionary 3
			9a012c4e65787420492077696c6c20b66200142c207468656e8e6400003b8a5a0044616761696e206966206974206661696c732e`,
		`02 00 # zstd, no dictionary
			28b52ffd209a3503002287161970691ba58614dd5c8a91b67d35abf8e2827810b378fd7f090186c233c47b46cee82c31c1c9c338a663cb072aa573bd9ae98a67e74657d6808059f5651277ae7f9c42afac47682e93a0433c83afac1789e90723de32c1bbbc100200ea0219c6155414`,
		`02 03 # zstd, dictionary 3 (raw content)
			28b52ffd21039a95010054024e65787420492077696c6c202c207468656e3b616761696e206966206974206661696c732e0310063a523cc972692601`,
	} {
		b := goldenhex.Decode(t, rec)
		out, err := c.Decompress(nil, b)
		if err != nil {
			t.Fatalf("golden record %x: %v", b[:4], err)
		}
		if string(out) != goldenRecord {
			t.Fatalf("golden record %x decodes to %q", b[:4], out)
		}
	}
}
