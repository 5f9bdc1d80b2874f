package layout

import (
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/durable"
)

// HasCleanMark reports whether dir holds the clean-close mark (CleanName):
// a Stat, any error of which counts as no mark.
func HasCleanMark(fs vfs.FS, dir string) bool {
	_, err := fs.Stat(fs.PathJoin(dir, CleanName))
	return err == nil
}

// RemoveCleanMark removes dir's clean-close mark, if there is one.
func RemoveCleanMark(fs vfs.FS, dir string) error {
	name := fs.PathJoin(dir, CleanName)
	if err := fs.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the clean-close mark %s: %w", name, UnwrapPathErr(err))
	}
	return nil
}

// CreateCleanMark creates dir's clean-close mark, an empty file.
func CreateCleanMark(fs vfs.FS, dir string) error {
	name := fs.PathJoin(dir, CleanName)
	f, err := durable.Create(fs, name, vfs.WriteCategoryUnspecified)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return fmt.Errorf("create the clean-close mark %s: %w", name, UnwrapPathErr(err))
	}
	return nil
}
