package layout

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestCleanMark(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("s", 0o700); err != nil {
		t.Fatal(err)
	}
	if HasCleanMark(fs, "s") {
		t.Fatal("a mark in an empty directory")
	}
	if err := RemoveCleanMark(fs, "s"); err != nil {
		t.Fatalf("removing no mark: %v", err)
	}
	if err := CreateCleanMark(fs, "s"); err != nil {
		t.Fatal(err)
	}
	if !HasCleanMark(fs, "s") {
		t.Fatal("no mark after CreateCleanMark")
	}
	if err := RemoveCleanMark(fs, "s"); err != nil || HasCleanMark(fs, "s") {
		t.Fatalf("RemoveCleanMark: %v, mark left: %v", err, HasCleanMark(fs, "s"))
	}
	if err := CreateCleanMark(fs, "missing"); err == nil {
		t.Fatal("a mark created in a directory that does not exist")
	}
}
