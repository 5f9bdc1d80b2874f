package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/cmd/internal/cli"
	"github.com/continuumdb/continuum/offline"
)

const blobUsage = "blob get DIR REF [--run ID] [--keyring FILE] [--out FILE]"

const blobAbout = `Blob get writes the bytes of one blob of a store (a large value the engine keeps
outside the log: engine.Options.BlobThreshold, Atom.PutBlob) to standard output
or to --out FILE, streaming: the blob is never whole in memory. REF is the
reference as inspect and export show it: "blake3t:HEX/SIZE" (what verify
prints), or the reference value a frame holds ("continuum-blob:HEX/SIZE;MEDIA",
with or without its leading NUL, \u0000 in JSON).

Every chunk is checked against the hash before a byte of it is written: a
damaged blob stops with an error, having written only checked bytes. In an
encrypted store pass the keyring, and --run to name the run that wrote it
(every run's keys are tried without it). Blob get takes no lock and writes
nothing to the store.

Exit 0: written. Exit 1: the blob is damaged. Exit 2: usage or I/O error, or
no such blob.`

const blobExamples = `  continuumctl blob get ./agent-store blake3t:3f2a...c9/52428800 --out page.html
  continuumctl export ./agent-store --run r | grep -o 'continuum-blob:[^"]*'`

func runBlob(args []string, stdout, stderr io.Writer) int {
	fs := ctl.Flags("blob", blobUsage, blobAbout, blobExamples, stderr)
	run := fs.String("run", "", "the run `ID` whose keys an encrypted store's blob is under")
	out := fs.String("out", "", "write the blob to `FILE` (created; it must not exist) instead of standard output")
	keyring := keyringFlag(fs)
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 3 || pos[0] != "get" {
		return cli.UsageErr(fs, stderr, "want: blob get DIR REF")
	}
	dir := pos[1]
	ref, err := parseBlobRef(pos[2])
	if err != nil {
		return cli.UsageErr(fs, stderr, "%v", err)
	}
	ring, err := readKeyring(*keyring)
	if err != nil {
		return ctl.Fail(stderr, "blob", err)
	}
	r, err := offline.OpenBlob(dir, ref, &offline.BlobOptions{Keyring: ring, Run: *run})
	if err != nil {
		return blobFail(stderr, err)
	}
	defer r.Close()
	w := stdout
	var f *os.File
	if *out != "" {
		f, err = os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return ctl.Fail(stderr, "blob", err)
		}
		w = f
	}
	_, err = io.Copy(w, r)
	if f != nil {
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(*out)
		}
	}
	if err != nil {
		return blobFail(stderr, err)
	}
	return 0
}

func blobFail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "continuumctl blob: %v\n", err)
	if errors.Is(err, blob.ErrCorrupt) {
		return cli.ExitCorrupt
	}
	return cli.ExitUsage
}

// parseBlobRef reads a reference as blob.Ref.String writes it
// ("blake3t:HEX/SIZE", then an optional space and media type) or as a
// reference value, with or without its NUL.
func parseBlobRef(s string) (blob.Ref, error) {
	if r, ok := blob.ParseValue(s); ok {
		return r, nil
	}
	if r, ok := blob.ParseValue("\x00" + s); ok {
		return r, nil
	}
	hs, ok := strings.CutPrefix(s, "blake3t:")
	if !ok {
		return blob.Ref{}, fmt.Errorf("reference %q: want blake3t:HEX/SIZE or continuum-blob:HEX/SIZE", s)
	}
	hs, media, _ := strings.Cut(hs, " ")
	h, size, ok := strings.Cut(hs, "/")
	n, err := strconv.ParseInt(size, 10, 64)
	if !ok || err != nil || n < 0 {
		return blob.Ref{}, fmt.Errorf("reference %q: the size after / is not a number", s)
	}
	r, ok := blob.ParseValue(blob.ValuePrefix + h + "/" + strconv.FormatInt(n, 10))
	if !ok {
		return blob.Ref{}, fmt.Errorf("reference %q: want 64 lower-case hex digits of hash", s)
	}
	r.Media = media
	return r, nil
}
