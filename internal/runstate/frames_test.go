package runstate

import (
	"errors"
	"testing"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/record"
)

func TestDecodeFrame(t *testing.T) {
	comp := frame.NewCompressor(nil)
	f := &frame.Frame{Memory: map[string][]byte{"k": []byte("v")}}
	b := comp.Compress(nil, frame.AppendFrame(nil, f), 0)
	got, err := DecodeFrame(comp, nil, b, "r", 1, "r.frame")
	if err != nil || string(got.Memory["k"]) != "v" {
		t.Fatalf("DecodeFrame = %+v, %v", got, err)
	}
	_, err = DecodeFrame(comp, nil, b[:len(b)/2], "r", 1, "r.frame")
	var ce *record.CorruptionError
	if !errors.As(err, &ce) || ce.File != "r.frame" {
		t.Fatalf("a torn frame: %v, want damage naming r.frame", err)
	}
}
