package record

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/internal/goldenhex"
	"github.com/continuumdb/continuum/ledger"
)

// TestGoldenMessages pins the data of the message extensions byte for
// byte (message.go says they are frozen), and an atom body that carries
// both, and reads each back.
func TestGoldenMessages(t *testing.T) {
	sent := []SentMessage{{To: "r2", Payload: []byte("hi")}, {To: "r3", Payload: nil}}
	consumed := []MessageID{{From: "r1", Seq: 300, Index: 1}, {From: "r1", Seq: 301, Index: 0}, {From: "r4", Seq: 2, Index: 0}}
	for _, c := range []struct {
		name string
		got  []byte
		want string
	}{{
		name: "sent",
		got:  AppendSent(nil, sent),
		want: `
			02         # 2 messages
			02 7232    # to run "r2"
			02 6869    # payload "hi"
			02 7233    # to run "r3"
			00         # empty payload`,
	}, {
		name: "consumed",
		got:  AppendConsumed(nil, consumed),
		want: `
			03         # 3 messages
			02 7231    # from run "r1"
			ac02       # seq 300
			01         # index 1
			02 7231    # from run "r1"
			ad02       # seq 301
			00         # index 0
			02 7234    # from run "r4"
			02         # seq 2
			00         # index 0`,
	}, {
		name: "body",
		got: append(AppendAtomBodyHeaderExt(nil, []ledger.Fingerprint{fp1}, []AtomExt{
			{Tag: ExtTagSent, Data: AppendSent(nil, sent[:1])},
			{Tag: ExtTagConsumed, Data: AppendConsumed(nil, consumed[2:])},
		}), 0xde, 0xad),
		want: `
			02                      # atom body version 2
			01                      # 1 action
			` + hexFP + `           # its fingerprint
			02                      # 2 extensions
			02 07                   # tag 2 (sent), 7 bytes
			  01 02 7232 02 6869    #   1 message: to "r2", payload "hi"
			03 06                   # tag 3 (consumed), 6 bytes
			  01 02 7234 02 00      #   1 message: from "r4", seq 2, index 0
			dead                    # the delta`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			want := goldenhex.Decode(t, c.want)
			if !bytes.Equal(c.got, want) {
				t.Fatalf("encoding\n got %x\nwant %x", c.got, want)
			}
		})
	}
	if got, err := DecodeSent(AppendSent(nil, sent)); err != nil || len(got) != 2 || got[0].To != "r2" || string(got[0].Payload) != "hi" || got[1].To != "r3" || len(got[1].Payload) != 0 {
		t.Fatalf("DecodeSent = %+v, %v", got, err)
	}
	if got, err := DecodeConsumed(AppendConsumed(nil, consumed)); err != nil || !reflect.DeepEqual(got, consumed) {
		t.Fatalf("DecodeConsumed = %+v, %v; want %+v", got, err, consumed)
	}
	body, err := DecodeAtomBody(append(AppendAtomBodyHeaderExt(nil, nil, []AtomExt{
		{Tag: ExtTagSent, Data: AppendSent(nil, sent)}, {Tag: ExtTagConsumed, Data: AppendConsumed(nil, consumed)}}), 0x01))
	if err != nil {
		t.Fatal(err)
	}
	s, m, err := body.Messages()
	if err != nil || len(s) != 2 || !reflect.DeepEqual(m, consumed) {
		t.Fatalf("Messages = %+v, %+v, %v", s, m, err)
	}
	if s, m, err := (&AtomBody{}).Messages(); s != nil || m != nil || err != nil {
		t.Fatalf("Messages of a body without them = %v, %v, %v", s, m, err)
	}
}

// TestMessagesMalformed: each way the data can break its rules is an error
// that says which rule.
func TestMessagesMalformed(t *testing.T) {
	big := AppendSent(nil, []SentMessage{{To: "r", Payload: make([]byte, MaxMessageSize+1)}})
	for _, c := range []struct {
		name string
		sent bool
		data []byte
		want string
	}{
		{"sent: empty", true, nil, "message count"},
		{"sent: none", true, []byte{0}, "message count 0"},
		{"sent: count beyond data", true, []byte{5, 1, 'r', 0}, "message count 5"},
		{"sent: bad run id", true, []byte{1, 0, 0}, "invalid run id"},
		{"sent: payload truncated", true, []byte{1, 1, 'r', 4, 'a'}, "payload"},
		{"sent: payload too large", true, big, "exceeds the bound"},
		{"sent: trailing", true, []byte{1, 1, 'r', 0, 9}, "trailing"},
		{"sent: non-minimal varint", true, []byte{0x81, 0x00, 1, 'r', 0}, "not minimal"},
		{"consumed: none", false, []byte{0}, "consumed count 0"},
		{"consumed: seq 0", false, []byte{1, 1, 'r', 0, 0}, "seq 0"},
		{"consumed: index too large", false, AppendConsumed(nil, []MessageID{{From: "r", Seq: 1, Index: MaxMessagesPerAtom}}), "index 4096"},
		{"consumed: twice", false, AppendConsumed(nil, []MessageID{{From: "r", Seq: 1}, {From: "r", Seq: 1}}), "ascend"},
		{"consumed: out of order", false, AppendConsumed(nil, []MessageID{{From: "r", Seq: 2}, {From: "q", Seq: 1}, {From: "r", Seq: 1, Index: 3}}), "ascend"},
		{"consumed: trailing", false, []byte{1, 1, 'r', 1, 0, 0}, "trailing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.sent {
				_, err = DecodeSent(c.data)
			} else {
				_, err = DecodeConsumed(c.data)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one that says %q", err, c.want)
			}
		})
	}
}

// FuzzDecodeSent: sent messages that decode re-encode to their input,
// within the bounds; nothing panics.
func FuzzDecodeSent(f *testing.F) {
	f.Add(AppendSent(nil, []SentMessage{{To: "r2", Payload: []byte("hi")}, {To: "r3"}}))
	f.Add([]byte{1, 1, 'r', 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := DecodeSent(b)
		if err != nil {
			return
		}
		if len(msgs) == 0 || len(msgs) > MaxMessagesPerAtom {
			t.Fatalf("%d messages decoded", len(msgs))
		}
		for _, m := range msgs {
			if CheckRunID(m.To) != nil || len(m.Payload) > MaxMessageSize {
				t.Fatalf("decoded a message out of bounds: %q, %d bytes", m.To, len(m.Payload))
			}
		}
		if enc := AppendSent(nil, msgs); !bytes.Equal(enc, b) {
			t.Fatalf("%x re-encodes to %x", b, enc)
		}
	})
}

// FuzzDecodeConsumed: consumed ids that decode re-encode to their input,
// each sender's ascending; nothing panics.
func FuzzDecodeConsumed(f *testing.F) {
	f.Add(AppendConsumed(nil, []MessageID{{From: "r1", Seq: 300, Index: 1}, {From: "r1", Seq: 301}, {From: "r4", Seq: 2}}))
	f.Add([]byte{1, 1, 'r', 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := DecodeConsumed(b)
		if err != nil {
			return
		}
		last := map[string]MessageID{}
		for _, id := range ids {
			if p, ok := last[id.From]; ok && !p.Less(id) || id.Seq == 0 || id.Index >= MaxMessagesPerAtom {
				t.Fatalf("decoded %v after %v", id, p)
			}
			last[id.From] = id
		}
		if enc := AppendConsumed(nil, ids); !bytes.Equal(enc, b) {
			t.Fatalf("%x re-encodes to %x", b, enc)
		}
	})
}
