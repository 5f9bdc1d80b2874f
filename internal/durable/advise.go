package durable

import (
	"errors"
	"syscall"
)

// advisedError is an I/O error with what to do about it.
type advisedError struct {
	err  error
	what string
}

func (e *advisedError) Error() string { return e.err.Error() + " (" + e.what + ")" }
func (e *advisedError) Unwrap() error { return e.err }

// Advise adds to an I/O error of a store what to do about it, when there
// is something to do: a full disk (ENOSPC, EDQUOT), a failing device
// (EIO), a read-only filesystem (EROFS). The result wraps err (errors.Is
// still matches its errno). Other errors, nil, and errors advised already
// are returned as they are.
func Advise(err error) error {
	var a *advisedError
	if err == nil || errors.As(err, &a) {
		return err
	}
	var what string
	switch {
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		what = "the disk is full: free space, then Close the store and open it again; nothing acknowledged is lost"
	case errors.Is(err, syscall.EIO):
		what = "an I/O error from the device: check it, then Close the store and open it again; nothing acknowledged is lost"
	case errors.Is(err, syscall.EROFS):
		what = "the filesystem became read-only: remount it read-write, then open the store again"
	default:
		return err
	}
	return &advisedError{err: err, what: what}
}
