package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

func TestAdvise(t *testing.T) {
	for _, tc := range []struct {
		errno syscall.Errno
		want  string
	}{
		{syscall.ENOSPC, "the disk is full"},
		{syscall.EDQUOT, "the disk is full"},
		{syscall.EIO, "an I/O error from the device"},
		{syscall.EROFS, "the filesystem became read-only"},
	} {
		in := fmt.Errorf("wal: write seg 3: %w", &fs.PathError{Op: "write", Path: "000003.log", Err: tc.errno})
		got := Advise(in)
		if !errors.Is(got, tc.errno) {
			t.Errorf("%v: Advise(%v) = %v, no longer matches the errno", tc.errno, in, got)
		}
		if !strings.HasPrefix(got.Error(), in.Error()+" (") || !strings.Contains(got.Error(), tc.want) {
			t.Errorf("%v: Advise(%v) = %q, want the error then %q", tc.errno, in, got, tc.want)
		}
		if again := Advise(got); again != got {
			t.Errorf("%v: Advise advised twice: %q", tc.errno, again)
		}
		if wrapped := fmt.Errorf("engine: commit: %w", got); Advise(wrapped) != wrapped {
			t.Errorf("%v: Advise of a wrapped advised error changed it: %q", tc.errno, Advise(wrapped))
		}
	}
	for _, in := range []error{nil, errors.New("wal: bad checksum"), syscall.EACCES, fmt.Errorf("x: %w", syscall.EAGAIN)} {
		if got := Advise(in); got != in {
			t.Errorf("Advise(%v) = %v, want it unchanged", in, got)
		}
	}
}
