package frame

import (
	"bytes"
	"testing"

	"github.com/continuumdb/continuum/internal/goldenhex"
	"github.com/google/go-cmp/cmp"
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

// TestGoldenEncodingV2 pins version 2: messages with tool calls, parts, an
// error flag and the developer role, references to certified results, and
// op 13. A message without flags keeps its version 1 bytes inside a
// version 2 record.
func TestGoldenEncodingV2(t *testing.T) {
	var inline Delta
	inline.AppendMessage(Message{Role: RoleDeveloper, Content: "d"}).
		AppendMessage(Message{Role: RoleAssistant, Content: "ok", ToolCalls: []ToolCall{
			{ID: "a", Name: "ls", Arguments: []byte(`{}`)}, {ID: "b", Name: "rm"}}}).
		AppendMessage(Message{Role: RoleTool, Content: "no", Tool: "rm", CallID: "b", IsError: true}).
		AppendMessage(Message{Role: RoleUser, Parts: []Part{
			{Kind: PartToolResult, CallID: "a", Text: "x", IsError: true},
			{Kind: PartText, Text: "t"},
			{Kind: PartJSON, JSON: []byte(`{}`)},
			{Kind: PartToolResult, CallID: "c", JSON: []byte(`[]`)}}}).
		AppendMessage(Message{Role: RoleAssistant, Parts: []Part{
			{Kind: PartText, Text: "p"},
			{Kind: PartToolCall, Call: ToolCall{ID: "t1", Name: "ls", Arguments: []byte(`{"d":1}`)}}}}).
		ToolOutputResult("a", "ls", 0).
		AppendMessage(Message{Role: RoleTool, CallID: "a", Content: "R"}).
		AppendMessage(Message{Role: RoleUser, Parts: []Part{{Kind: PartToolResult, CallID: "a", Text: "R"}}}).
		AppendMessage(Message{Role: RoleUser, Content: "u"})
	results := [][]byte{[]byte("out"), []byte("R")}
	d := inline.ReferResults(results)
	want := goldenhex.Decode(t, `
		d2 09                    # tag delta v2, 9 ops
		08 04 01 64              # append_message head=developer (no flags) "d"
		08 42 02 02 6f6b         # append_message head=assistant|flags, flags=calls, "ok"
		   02                    #   2 tool calls:
		   01 61 02 6c73 02 7b7d #     "a" "ls" {}
		   01 62 02 726d 00      #     "b" "rm" (no arguments)
		08 73 01 02 6e6f 02 726d 01 62  # head=tool|tool|callid|flags, flags=is_error, "no" "rm" "b"
		08 41 04 00              # head=user|flags, flags=parts, content ""
		   04                    #   4 parts:
		   12 01 61 01 78 00     #     tool_result|is_error "a" text "x" json ""
		   00 01 74              #     text "t"
		   03 02 7b7d            #     json {}
		   02 01 63 00 02 5b5d   #     tool_result "c" text "" json []
		08 42 04 00 02           # head=assistant|flags, flags=parts, content "", 2 parts:
		   00 01 70              #     text "p"
		   01 02 7431 02 6c73 07 7b2264223a317d  # tool_call "t1" "ls" {"d":1}
		0d 01 61 02 6c73 00      # tool_output_ref "a" "ls" result 0
		08 63 08 01 01 61        # head=tool|callid|flags, flags=content ref, result 1, "a"
		08 41 04 00 01           # head=user|flags, flags=parts, content "", 1 part:
		   22 01 61 01 00        #     tool_result|ref "a" text=result 1 json ""
		08 01 01 75              # append_message user "u" (version 1 bytes)
	`)
	got := AppendDelta(nil, d)
	if !bytes.Equal(got, want) {
		t.Fatalf("delta v2 encoding changed:\n got %x\nwant %x", got, want)
	}
	back, err := DecodeDelta(want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, back, deltaCmp); diff != "" {
		t.Fatalf("golden v2 delta decodes differently (-want +got):\n%s", diff)
	}
	resolved, err := back.Resolve(func(i int) ([]byte, error) { return results[i], nil })
	if err != nil {
		t.Fatal(err)
	}
	f1, f2 := &Frame{}, &Frame{}
	if err := f1.ApplyWith(&inline, func(i int) ([]byte, error) { return results[i], nil }); err != nil {
		t.Fatal(err)
	}
	if err := f2.Apply(resolved); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(AppendFrame(nil, f1), AppendFrame(nil, f2)) {
		t.Fatal("the golden delta's references resolve to another frame than its inline form")
	}

	f := &Frame{Messages: []Message{
		{Role: RoleDeveloper, Content: "d"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "a", Name: "ls", Arguments: []byte(`{}`)}}},
		{Role: RoleTool, Content: "ok", CallID: "a", IsError: true},
		{Role: RoleUser, Parts: []Part{{Kind: PartToolResult, CallID: "a", Text: "x"}}},
		{Role: RoleUser, Content: "u"},
	}}
	wantFrame := goldenhex.Decode(t, `
		f2                       # tag frame v2
		00 00 00 00              # objective "", no subgoals, no memory, scratchpad ""
		05                       # 5 messages:
		04 01 64                 #   developer "d" (no flags)
		42 02 00 01 01 61 02 6c73 02 7b7d  # assistant|flags, flags=calls, "", 1 call "a" "ls" {}
		63 01 02 6f6b 01 61      #   tool|callid|flags, flags=is_error, "ok" "a"
		41 04 00 01 02 01 61 01 78 00      # user|flags, flags=parts, "", 1 part: tool_result "a" "x" json ""
		01 01 75                 #   user "u" (version 1 bytes)
		00                       # no pending
	`)
	if got := AppendFrame(nil, f); !bytes.Equal(got, wantFrame) {
		t.Fatalf("frame v2 encoding changed:\n got %x\nwant %x", got, wantFrame)
	}
	fb, err := DecodeFrame(wantFrame)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f, fb, frameCmp); diff != "" {
		t.Fatalf("golden v2 frame decodes differently (-want +got):\n%s", diff)
	}
}
