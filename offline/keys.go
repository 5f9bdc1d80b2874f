package offline

// The keys of an encrypted store, for the read-only tools: KEYS opened
// with the user's keyring, or the store read without it (verify then
// checks every record and link over the stored, sealed bytes, and says
// that the payloads were not opened).

import (
	"fmt"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// notOpenedPayloads is what Report.Unchecked says of an encrypted store
// verified without its keyring.
const notOpenedPayloads = "payloads: the store is encrypted and no keyring was given: every record, link, checkpoint and signature was checked over the sealed bytes, no payload was opened (frames, fingerprints, certificates, references and the derived files' contents were not checked)"

// openKeys reads KEYS of the encrypted store id and, with ring, unwraps
// its data keys into db.sealer. A wrong or missing user key is an error
// matching seal.ErrWrongKey or seal.ErrUnknownKey, as is, with ring, a
// missing or damaged KEYS. Without ring, KEYS is still read and checked:
// damage is returned as damage, for the report.
func (db *store) openKeys(id [16]byte, ring seal.Keyring) (damage, err error) {
	db.sealed = true
	name := db.path(layout.KeysName)
	b, err := layout.ReadFile(db.fs, name)
	var t *seal.Table
	switch {
	case layout.NotExist(err):
		damage = record.Corruptf(name, "missing, but STORE says the store is encrypted: without it nothing the store sealed can be opened")
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", name, err)
	case len(b) > layout.MaxKeysFile:
		damage = record.Corruptf(name, "%d bytes, above %d", len(b), layout.MaxKeysFile)
	default:
		t, damage = layout.ParseKeys(name, id, b)
		if damage == nil {
			db.keys = t
		}
	}
	if ring == nil || damage != nil {
		if ring != nil {
			return nil, damage
		}
		return damage, nil
	}
	ks, err := t.Open(ring)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	db.sealer = &record.Sealer{Store: id, Keys: ks, KeysFile: name}
	return nil, nil
}

// openStoreFile returns b, a derived file of checkpoint generation gen,
// opened from its seal in an encrypted store: b itself in a plaintext
// one, nil if it does not open or there is no keyring (the engine
// rebuilds such a file from the log, so it is compared with nothing).
func (db *store) openStoreFile(b []byte, k record.Kind, gen uint64) []byte {
	if !db.sealed {
		return b
	}
	if db.sealer == nil {
		return nil
	}
	plain, err := db.sealer.OpenStoreFile(b, k, gen)
	if err != nil {
		return nil
	}
	return plain
}
