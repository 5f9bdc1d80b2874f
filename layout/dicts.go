package layout

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/record"
)

// LoadDicts registers every dictionary file of the store in dir with
// dicts and returns the newest id (0: none). A damaged file, a file under
// another id's name, or a gap in the ids (a dictionary the log's records
// may need is missing) is a *record.CorruptionError naming the file.
func LoadDicts(fs vfs.FS, dir string, dicts *frame.Dicts) (uint32, error) {
	dir = fs.PathJoin(dir, DictsDir)
	names, err := fs.List(dir)
	if err != nil && !NotExist(err) {
		return 0, fmt.Errorf("list %s: %w", dir, UnwrapPathErr(err))
	}
	sort.Strings(names)
	var newest uint32
	for _, n := range names {
		if !strings.HasSuffix(n, DictSuffix) {
			continue // a temporary file of an interrupted write
		}
		name := fs.PathJoin(dir, n)
		b, err := ReadFile(fs, name)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", name, UnwrapPathErr(err))
		}
		id, dict, err := ParseDict(name, b)
		if err != nil {
			return 0, err
		}
		if n != DictFileName(id) {
			return 0, record.Corruptf(name, "holds dictionary %d under another name", id)
		}
		if err := dicts.Add(id, dict); err != nil {
			return 0, record.Corruptf(name, "%v", err)
		}
		newest = max(newest, id)
	}
	// Ids are given in order from 1 and never removed: a gap is a missing
	// dictionary, which records of the log may need.
	for id := uint32(1); id < newest; id++ {
		if _, ok := dicts.Get(id); ok {
			continue
		}
		return 0, record.Corruptf(fs.PathJoin(dir, DictFileName(id)), "missing, but dictionary %d exists: records of the log may need it", newest)
	}
	return newest, nil
}
