package layout

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/internal/goldenhex"
	"github.com/continuumdb/continuum/wal"
)

// TestGoldenInbox pins INBOX (inbox.go, frozen) byte for byte, its
// checksum computed with an independent CRC-32C, and reads it back.
func TestGoldenInbox(t *testing.T) {
	in := &Inbox{Gen: 7, Replay: wal.Pos{Segment: 2, Offset: 160}, Ended: []string{"c"}, Deleted: []string{"d"},
		Queues: []InboxQueue{{To: "b", From: "a", CursorSeq: 3, CursorIndex: 2,
			Pending: []InboxMessage{{Seq: 5, Index: 0, At: wal.Pos{Segment: 1, Offset: 2}, Payload: []byte("hi")}}}}}
	want := goldenhex.Decode(t, `
		434e544d494e4258   # "CNTMINBX"
		0100               # version 1
		07                 # generation 7
		02 a001            # replay position 2:160
		01 0163            # 1 ended run: "c"
		01 0164            # 1 deleted run: "d"
		01                 # 1 queue
		0162 0161          #   to "b", from "a"
		03 02              #   cursor: seq 3 index 2 consumed
		01                 #   1 message not consumed
		05 00              #     seq 5, index 0
		01 02              #     sent by the atom at 1:2
		02 6869            #     payload "hi"
		8b3c1aa1           # crc32c of all before`)
	got := in.Marshal()
	if !bytes.Equal(got, want) {
		t.Fatalf("INBOX\n got %x\nwant %x", got, want)
	}
	back, err := ParseInbox("INBOX", got)
	if err != nil || !reflect.DeepEqual(back, in) {
		t.Fatalf("ParseInbox = %+v, %v; want %+v", back, err, in)
	}
	if _, err := ParseInbox("INBOX", (&Inbox{}).Marshal()); err != nil {
		t.Fatalf("an empty INBOX: %v", err)
	}
}

// TestInboxMalformed: a damaged INBOX is an error naming the file.
func TestInboxMalformed(t *testing.T) {
	good := (&Inbox{Gen: 1, Queues: []InboxQueue{{To: "b", From: "a", Pending: []InboxMessage{{Seq: 1}, {Seq: 2}}}}}).Marshal()
	flip := bytes.Clone(good)
	flip[12] ^= 1
	unordered := (&Inbox{Gen: 1, Queues: []InboxQueue{{To: "b", From: "a", CursorSeq: 2, Pending: []InboxMessage{{Seq: 1}}}}}).Marshal()
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"short", good[:5], "not an inbox file"},
		{"bit flip", flip, "checksum mismatch"},
		{"message before the cursor", unordered, "does not follow"},
	} {
		if _, err := ParseInbox("INBOX", c.b); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "INBOX") {
			t.Errorf("%s: %v, want an error naming INBOX that says %q", c.name, err, c.want)
		}
	}
}

// FuzzParseInbox: what parses re-encodes to its input; nothing panics.
func FuzzParseInbox(f *testing.F) {
	f.Add((&Inbox{Gen: 7, Replay: wal.Pos{Segment: 2, Offset: 160}, Ended: []string{"c"},
		Queues: []InboxQueue{{To: "b", From: "a", CursorSeq: 3, Pending: []InboxMessage{{Seq: 5, Payload: []byte("hi")}}}}}).Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := ParseInbox("INBOX", b)
		if err != nil {
			return
		}
		if again := in.Marshal(); !bytes.Equal(again, b) {
			t.Fatalf("%x re-encodes to %x", b, again)
		}
	})
}
