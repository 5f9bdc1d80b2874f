package offline

import (
	"bytes"

	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/record"
)

// The blob references of the log's records (package blob; the engine's
// engine/blobs.go). A record references a blob by holding its reference
// value (blob.Value) where a value stands: an atom in its delta (a memory
// value, a tool output, a message text: frame.Delta.Values), a
// certificate as its result. The engine's sweep keeps what these name;
// Verify checks that each is there with its bytes.

// valuePrefix is blob.ValuePrefix as bytes, for a scan of a whole delta.
var valuePrefix = []byte(blob.ValuePrefix)

// RecordBlobRefs calls fn with the run and each blob reference of rec: an
// atom's (decoded with dec, file naming its segment in errors) or a
// certificate's (dec must decode the ledger's records). Other records,
// and those whose payload was not opened (an erased run's), reference
// none. A delta that does not decode is an error.
func RecordBlobRefs(dec *record.Decoder, rec *record.Record, file string, fn func(run string, ref blob.Ref)) error {
	switch rec.Kind {
	case record.KindAtom:
		if rec.Body == nil {
			return nil
		}
		_, body, err := dec.DecodeAtom(nil, rec, file)
		if err != nil {
			return err
		}
		return DeltaBlobRefs(body.Delta, func(ref blob.Ref) { fn(rec.Run, ref) })
	case record.KindCert:
		if rec.Cert == nil {
			return nil
		}
		if ref, ok := blob.ParseValueBytes(rec.Cert.Result); ok {
			fn(rec.Run, ref)
		}
	}
	return nil
}

// DeltaBlobRefs calls fn with each blob reference of delta, an encoded
// delta (record.AtomBody.Delta). A delta that holds no reference value's
// prefix is not decoded.
func DeltaBlobRefs(delta []byte, fn func(ref blob.Ref)) error {
	if !bytes.Contains(delta, valuePrefix) {
		return nil
	}
	d, err := frame.DecodeDelta(delta)
	if err != nil {
		return err
	}
	return d.Values(func(v []byte) {
		if ref, ok := blob.ParseValueBytes(v); ok {
			fn(ref)
		}
	})
}
