package engine

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/offline"
)

// Origin returns the store's origin: the signer name its checkpoints and
// store heads are signed under when Options.SigningKey is set,
// chain.OriginName of the store id ("continuum-" and its first 16 hex
// digits). A public key file for the store names this origin
// (chain.MarshalPublicKey(db.Origin(), pub)); verify checks it.
func (db *DB) Origin() string { return chain.OriginName(db.StoreID()) }

// StoreOrigin returns the origin (see DB.Origin) of the store in dir,
// reading only its STORE file: it takes no lock and may run beside the
// process that has the store open. fs nil means the operating system's
// filesystem. A directory without a store fails with ErrNotAStore.
func StoreOrigin(dir string, fs vfs.FS) (string, error) { return offline.StoreOrigin(dir, fs) }
