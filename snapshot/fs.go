package snapshot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

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
		p.l.Debug(pebbleMsg(format, args))
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(pebbleMsg(format, args))
}

// pebbleMsg formats a Pebble log line, prefixed "pebble: " once.
func pebbleMsg(format string, args []any) string {
	msg := fmt.Sprintf(format, args...)
	if !strings.HasPrefix(msg, "pebble: ") {
		msg = "pebble: " + msg
	}
	return msg
}

// Fatalf is called by Pebble on a state it cannot continue from (its default
// logger exits the process), such as a failed WAL write or sync in a commit.
// It must not return: Pebble would carry on as if the operation had
// succeeded. It logs and panics with a *fatalError, which Store.apply
// recovers on the committing goroutine and turns into a sticky ErrFailed;
// see the package's Caveats for Pebble's own goroutines.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := pebbleMsg(format, args)
	p.l.Error(msg)
	panic(&fatalError{msg: msg})
}

// fatalError is the panic value of pebbleLogger.Fatalf.
type fatalError struct{ msg string }

func (e *fatalError) Error() string { return e.msg }
