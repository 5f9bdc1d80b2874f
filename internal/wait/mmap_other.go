//go:build !unix

package wait

import (
	"errors"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// errNoMap: the file is not mapped (this system's files are read, not
// mapped); the caller reads it instead.
var errNoMap = errors.New("wait: not mapped")

func mapFile(vfs.FS, string) ([]byte, func(), error) { return nil, nil, errNoMap }
