package runstate

import (
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
)

// DecodeFrame decodes a stored frame of run at seq (a frame file's, or an
// opaque snapshot's): opened first under sealer in an encrypted store
// (record.PlaceFrame; nil: a plaintext store), then decompressed by comp.
// Damage, and a frame that does not open, is a *record.CorruptionError
// naming where. What a Core's DecodeFrame does, for the engine's readers
// of frame files and snapshots alike.
func DecodeFrame(comp record.Compressor, sealer *record.Sealer, b []byte, run string, seq uint64, where string) (*frame.Frame, error) {
	if sealer != nil {
		var err error
		if b, err = sealer.OpenFrame(b, run, seq); err != nil {
			return nil, record.Corruptf(where, "frame: %v", err)
		}
	}
	return layout.DecodeFrame(comp, b, where)
}
