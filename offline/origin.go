package offline

import (
	"encoding/hex"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
)

// readStoreFile reads and parses dir's STORE file: a directory without
// one fails with ErrNotAStore.
func readStoreFile(fs vfs.FS, dir string) (*layout.Store, error) {
	name := fs.PathJoin(dir, layout.StoreName)
	b, err := layout.ReadFile(fs, name)
	if layout.NotExist(err) {
		return nil, fmt.Errorf("%w: %s has no %s file", ErrNotAStore, dir, layout.StoreName)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: read %s: %w", name, err)
	}
	return layout.ParseStore(name, b)
}

// StoreOrigin returns the origin (chain.OriginName of the store id) of
// the store in dir, reading only its STORE file, without a lock; fs nil
// means the operating system's filesystem. A directory without a store
// fails with ErrNotAStore.
func StoreOrigin(dir string, fs vfs.FS) (string, error) {
	if fs == nil {
		fs = vfs.Default
	}
	sf, err := readStoreFile(fs, dir)
	if err != nil {
		return "", err
	}
	return chain.OriginName(hex.EncodeToString(sf.ID[:])), nil
}
