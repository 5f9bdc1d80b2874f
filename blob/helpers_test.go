package blob

import (
	"encoding/binary"
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/crc32c"
)

func readAll(t testing.TB, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(fs vfs.FS, name string, b []byte) error {
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeAll(t testing.TB, fs vfs.FS, name string, b []byte) {
	t.Helper()
	if err := writeFile(fs, name, append([]byte(nil), b...)); err != nil {
		t.Fatal(err)
	}
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func checksum(b []byte) uint32 { return crc32c.Checksum(b) }
