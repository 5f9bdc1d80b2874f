package record

import (
	"encoding/binary"

	"github.com/continuumdb/continuum/ledger"
)

// Extensions of an atom body (body version 2). Every constant in this
// file is frozen, like those of format.go.
//
// An atom whose body carries more than its actions and its delta (the base
// of a branch, the messages it sends or consumes) is written with body
// version 2:
//
//	version 2 | uvarint n | n x fingerprint [32] | uvarint m | m x ext | delta
//	ext = uvarint tag | uvarint len | data
//
// Tags are strictly ascending (so that one body has one encoding), each
// one this version knows (ExtTag* below); an unknown tag is damage, not a
// newer feature silently dropped: a feature that can be ignored by an
// older reader does not exist in an append-only audit log. An atom with no
// extension is written with body version 1, byte for byte as before the
// extensions existed.
//
// The extensions are part of the body, so of the chained payload: the
// chain covers them as it covers the delta.

// AtomExt is one extension of an atom body.
type AtomExt struct {
	Tag  uint64
	Data []byte // the extension's own encoding; aliases the body when decoded
}

// The tags of atom body extensions.
const (
	// ExtTagBase: the branch's base seq (uvarint) and what the branch
	// declared it reads.
	ExtTagBase uint64 = 1
	// ExtTagSent: the messages the atom sends.
	ExtTagSent uint64 = 2
	// ExtTagConsumed: the messages the atom consumes.
	ExtTagConsumed uint64 = 3

	// maxExtTag is the highest tag this version knows.
	maxExtTag = ExtTagConsumed
)

const (
	// AtomBodyVersionExt is the version byte of an atom body with
	// extensions.
	AtomBodyVersionExt = 2
	// MaxAtomExts bounds the extensions of one atom body.
	MaxAtomExts = 16
)

// AppendAtomBodyHeaderExt appends the part of an atom body before its
// delta, with extensions exts (tags strictly ascending; the caller's
// duty): version 2, the fingerprints, the extensions. Without extensions
// it is AppendAtomBodyHeader, version 1.
func AppendAtomBodyHeaderExt(dst []byte, actions []ledger.Fingerprint, exts []AtomExt) []byte {
	if len(exts) == 0 {
		return AppendAtomBodyHeader(dst, actions)
	}
	dst = append(dst, AtomBodyVersionExt)
	dst = binary.AppendUvarint(dst, uint64(len(actions)))
	for _, fp := range actions {
		dst = append(dst, fp[:]...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(exts)))
	for _, e := range exts {
		dst = binary.AppendUvarint(dst, e.Tag)
		dst = AppendBytes(dst, e.Data)
	}
	return dst
}

// decodeAtomExts decodes the extensions of a version 2 body at f's
// position.
func decodeAtomExts(f *Fields) []AtomExt {
	m := f.Uvarint("extension count")
	if f.err == nil && (m == 0 || m > MaxAtomExts) {
		f.Fail("extension count %d out of range 1..%d", m, MaxAtomExts)
	}
	if f.err != nil {
		return nil
	}
	exts := make([]AtomExt, 0, m)
	for i := uint64(0); i < m && f.err == nil; i++ {
		tag := f.Uvarint("extension tag")
		if f.err != nil {
			break
		}
		switch {
		case tag == 0 || tag > maxExtTag:
			f.Fail("unknown atom extension tag %d", tag)
		case len(exts) > 0 && tag <= exts[len(exts)-1].Tag:
			f.Fail("atom extension tag %d after tag %d", tag, exts[len(exts)-1].Tag)
		}
		data := f.Bytes("extension data", len(f.b))
		exts = append(exts, AtomExt{Tag: tag, Data: data})
	}
	return exts
}

// Ext returns the data of the extension with tag, and whether the body has
// it.
func (a *AtomBody) Ext(tag uint64) ([]byte, bool) {
	for _, e := range a.Exts {
		if e.Tag == tag {
			return e.Data, true
		}
	}
	return nil, false
}
