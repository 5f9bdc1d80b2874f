package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
)

// TestStoreChainMode: STORE records whether the chain is keyed; Open
// refuses the other mode, Verify without the key says the store is keyed,
// and a STORE written before the mode was recorded (0) still opens either
// way.
func TestStoreChainMode(t *testing.T) {
	ctx := context.Background()
	key := bytes.Repeat([]byte{7}, chain.KeySize)
	for _, keyed := range []bool{false, true} {
		fs := vfs.NewMem()
		opts := func(k bool) *Options {
			o := &Options{FS: fs, NoSync: true, DictSamples: -1}
			if k {
				o.ChainKey = key
			}
			return o
		}
		db, err := Open("s", opts(keyed))
		if err != nil {
			t.Fatal(err)
		}
		r, _ := db.Run(ctx, "r")
		a, _ := r.Begin(ctx)
		if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := layout.ReadFile(fs, "s/STORE")
		if err != nil {
			t.Fatal(err)
		}
		sf, err := layout.ParseStore("s/STORE", b)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]uint16{false: layout.ChainUnkeyed, true: layout.ChainKeyed}[keyed]; sf.Mode != want {
			t.Fatalf("keyed=%v: STORE says mode %d, want %d", keyed, sf.Mode, want)
		}
		if _, err := Open("s", opts(!keyed)); err == nil || !strings.Contains(err.Error(), "ChainKey") {
			t.Fatalf("keyed=%v: Open in the other mode: %v, want a refusal naming ChainKey", keyed, err)
		}
		if keyed {
			rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs})
			if err != nil || rep.OK || rep.Failures[0].Kind != chain.KindKeyedChain {
				t.Fatalf("verify of a keyed store without its key: %v %v", err, rep.Failures)
			}
		}
		// An older STORE: mode 0, checksum fixed up.
		binary.LittleEndian.PutUint16(b[10:], layout.ChainUnrecorded)
		binary.LittleEndian.PutUint32(b[36:], crc32.Checksum(b[:36], crc32.MakeTable(crc32.Castagnoli)))
		if err := layout.WriteFileAtomic(fs, "s/STORE", b, true); err != nil {
			t.Fatal(err)
		}
		db, err = Open("s", opts(keyed))
		if err != nil {
			t.Fatalf("keyed=%v: a STORE without the mode: %v", keyed, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs, ChainKey: opts(keyed).ChainKey})
		if err != nil || !rep.OK {
			t.Fatalf("keyed=%v: verify of a STORE without the mode: %v %v", keyed, err, rep.Failures)
		}
	}
}
