package offline

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/internal/privfs"
	"github.com/continuumdb/continuum/seal"
)

// BlobOptions configure OpenBlob.
type BlobOptions struct {
	// FS is the filesystem of the store. Default: the operating system's.
	FS vfs.FS
	// Keyring opens an encrypted store's blobs (required there).
	Keyring seal.Keyring
	// Run, if set, is the run whose keys an encrypted store's blob is
	// named and sealed with (a fork's blobs from before its fork point are
	// its parent's). Unset: every run's live keys are tried.
	Run string
}

// OpenBlob opens the blob ref of the store in dir for reading, without
// taking the store's lock or writing anything: every chunk is checked
// against ref's hash before a byte of it is returned. A missing blob
// matches blob.ErrNotFound, a damaged one blob.ErrCorrupt. The caller
// closes it.
func OpenBlob(dir string, ref blob.Ref, opts *BlobOptions) (io.ReadCloser, error) {
	var o BlobOptions
	if opts != nil {
		o = *opts
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	fs := privfs.Confine(o.FS, dir)
	sf, err := readStoreFile(fs, dir)
	if err != nil {
		return nil, err
	}
	db := &store{fs: fs, dir: dir}
	st := blob.Open(fs, db.path(blob.Dir))
	if !sf.Sealed() {
		return st.Open(ref, nil)
	}
	if o.Keyring == nil {
		return nil, fmt.Errorf("%w: the store is encrypted: its blobs need the keyring", ErrKeyring)
	}
	if _, err := db.openKeys(sf.ID, o.Keyring); err != nil {
		return nil, err
	}
	if db.sealer == nil {
		return nil, fmt.Errorf("%w: the store's key table did not open", ErrKeyring)
	}
	var runs []string
	if o.Run != "" {
		runs = []string{o.Run}
	} else if db.keys != nil {
		seen := map[string]bool{}
		for _, e := range db.keys.Entries() {
			// Run scopes only: not the store's (""), not a memory key's.
			if e.Scope != "" && !strings.Contains(e.Scope, "\x00") && !seen[e.Scope] {
				seen[e.Scope] = true
				runs = append(runs, e.Scope)
			}
		}
	}
	var first error
	for _, run := range runs {
		for _, s := range db.sealer.BlobSealers(run) {
			r, err := st.Open(ref, s)
			if err == nil {
				return r, nil
			}
			if first == nil || (errors.Is(first, blob.ErrNotFound) && !errors.Is(err, blob.ErrNotFound)) {
				first = err
			}
		}
	}
	if first == nil {
		first = fmt.Errorf("%w: %v: no live data key of %s names it", blob.ErrNotFound, ref, describeRuns(o.Run))
	}
	return nil, first
}

func describeRuns(run string) string {
	if run == "" {
		return "any run"
	}
	return fmt.Sprintf("run %q", run)
}
