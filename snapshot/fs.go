package snapshot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// File modes of the store on a real disk.
const (
	fileMode = 0o600
	dirMode  = 0o700
)

// privateFS wraps the operating system's filesystem so that what Pebble
// creates is private to the owner: files 0600, directories 0700. (Pebble
// itself creates files 0666 and directories 0755, less the umask.) It is used
// only when the FS is rooted in vfs.Default; other filesystems have no
// permission bits worth setting.
type privateFS struct {
	vfs.FS
}

func (p privateFS) chmod(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	if cerr := os.Chmod(name, fileMode); cerr != nil {
		f.Close()
		return nil, fmt.Errorf("snapshot: restricting %s to %#o: %w", name, fileMode, cerr)
	}
	return f, nil
}

func (p privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.Create(name, category)
	return p.chmod(name, f, err)
}

func (p privateFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := p.FS.OpenReadWrite(name, category, opts...)
	return p.chmod(name, f, err)
}

func (p privateFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.ReuseForWrite(oldname, newname, category)
	return p.chmod(newname, f, err)
}

func (p privateFS) Lock(name string) (io.Closer, error) {
	c, err := p.FS.Lock(name)
	if err != nil {
		return nil, err
	}
	if cerr := os.Chmod(name, fileMode); cerr != nil {
		c.Close()
		return nil, fmt.Errorf("snapshot: restricting %s to %#o: %w", name, fileMode, cerr)
	}
	return c, nil
}

func (p privateFS) MkdirAll(dir string, _ os.FileMode) error {
	return p.FS.MkdirAll(dir, dirMode)
}

func (p privateFS) Unwrap() vfs.FS { return p.FS }

// pebbleLogger routes Pebble's log lines to slog: its informational chatter
// at Debug (so a default logger stays quiet), its errors at Error.
type pebbleLogger struct {
	l *slog.Logger
}

var _ pebble.Logger = pebbleLogger{}

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l.Enabled(context.Background(), slog.LevelDebug) {
		p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf is called by Pebble on a state it cannot continue from (its default
// logger exits the process). We log and panic so the state is never carried
// on from; see the package's Caveats.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic(msg)
}
