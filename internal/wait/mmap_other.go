//go:build !unix

package wait

import "errors"

// errNoMap: the file is not mapped (this system's files are read, not
// mapped); the caller reads it instead.
var errNoMap = errors.New("wait: not mapped")

func mapFile(string) ([]byte, func(), error) { return nil, nil, errNoMap }
