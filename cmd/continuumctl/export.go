package main

import (
	"context"
	"fmt"
	"io"

	"github.com/continuumdb/continuum/cmd/internal/cli"
)

const exportUsage = "export DIR --run ID [--from N] [--to M] [--stream NAME [--offset N]] [--keyring FILE]"

const exportAbout = `Export writes the atoms of one run of the store in DIR as JSON Lines, one
object per atom, read-only, for analysis tools:
  {"run","seq","head","pos","size","raw_size",
   "delta":[{"op":..,...}],                   the frame delta, op by op
   "actions":[{"tool","args","key","idempotent","status","result",..}],
   "end":{"seq","head","status","ended","result"}}
"end" is on the line of the run's last atom only, once the run ended: its
status (completed, failed, cancelled), time, result, and the end's link in
the chain. Every line is an atom, so a run that ended before its first atom
exports nothing (inspect shows its end).
In an encrypted store a set_sealed op (a value of an erasable memory key) is
written opened with the keyring, {"op":"set_sealed","key","value"}, or, once
the key was erased (erase --memory-key), {"op":"set_sealed","key","erased":
true}, without a value.
--from and --to bound the seqs (inclusive; default: the whole run).
With --stream NAME it writes the chunks of the run's stream NAME instead,
one object per chunk, from offset --offset (default 0):
  {"run","stream","offset","seq","attempt","status","data"}
seq and attempt name the atom attempt that appended the chunk; status is
that attempt's: open, committed, failed or abandoned (it stopped, and a
later attempt ran or the run ended). data is absent once the run's key was
erased, or without the keyring of an encrypted store.
Exit 0 on success, 1 if a record cannot be decoded, 2 on a usage or I/O error.`

const exportExamples = `  continuumctl export ./agent-store --run deploy-42 > deploy-42.jsonl
  continuumctl export ./agent-store --run deploy-42 --from 10 --to 20
  continuumctl export ./agent-store --run deploy-42 --stream tokens --offset 100`

func runExport(args []string, stdout, stderr io.Writer) int {
	fs := ctl.Flags("export", exportUsage, exportAbout, exportExamples, stderr)
	keyring := keyringFlag(fs)
	id := fs.String("run", "", "the run `ID` to export (required)")
	from := fs.Uint64("from", 1, "first seq `N`")
	to := fs.Uint64("to", 0, "last seq `M` (0 or none: the run's last)")
	streamName := fs.String("stream", "", "export the chunks of the run's stream `NAME` instead of its atoms")
	offset := fs.Uint64("offset", 0, "with --stream: the first chunk's offset `N`")
	pos, code, ok := cli.ParseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return cli.UsageErr(fs, stderr, "want one store directory, got %d arguments", len(pos))
	}
	if *id == "" {
		return cli.UsageErr(fs, stderr, "--run is required")
	}
	if *to != 0 && *from > *to {
		return cli.UsageErr(fs, stderr, "--from %d is after --to %d", *from, *to)
	}
	dir := pos[0]
	in, code := openInspector("export", dir, *keyring, stderr)
	if in == nil {
		return code
	}
	defer in.Close()
	if _, ok := in.Run(*id); !ok {
		fmt.Fprintf(stderr, "continuumctl export: store %s has no run %q\n", dir, *id)
		return cli.ExitUsage
	}
	if *streamName != "" {
		if _, err := in.ExportStream(context.Background(), stdout, *id, *streamName, *offset); err != nil {
			return ctl.Fail(stderr, "export", err)
		}
		return cli.ExitOK
	}
	if _, err := in.Export(context.Background(), stdout, *id, *from, *to); err != nil {
		return ctl.Fail(stderr, "export", err)
	}
	return cli.ExitOK
}
