package layout

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
	"github.com/zeebo/blake3"
)

// The names of a store's files and directories, relative to its directory.
const (
	LockName = "LOCK"
	// CleanName is the clean-close mark: an empty file that exists only
	// between a clean Close of a writable DB (every directory entry of the
	// store durable, every fsync of the process successful) and the next
	// writable Open, which removes it before its first write. An Open that
	// removes it needs no fsync of the store's directories before its first
	// acknowledgement. It is only ever created and removed without a sync:
	// a crash without power loss keeps what the page cache holds (the mark
	// gone once a process has started writing), and after a power loss
	// everything a store shows is on disk already.
	CleanName      = "CLEAN"
	StoreName      = "STORE"
	CheckpointName = "CHECKPOINT"
	WALDir         = "wal"
	FramesDir      = "frames"
	DictsDir       = "dicts"
	SnapshotsDir   = "snapshots"

	// DictSuffix ends the name of a dictionary file.
	DictSuffix = ".dict"
	// FrameSuffix ends the name of a frame file.
	FrameSuffix = ".frame"
)

// DictFileName names dictionary id's file in DictsDir.
func DictFileName(id uint32) string { return fmt.Sprintf("%08x%s", id, DictSuffix) }

// FrameFileBase names a run's frame file in FramesDir: hex of the first 16
// bytes of BLAKE3(run id). Run ids may hold any character; file names may
// not.
func FrameFileBase(run string) string {
	sum := blake3.Sum256([]byte(run))
	return hex.EncodeToString(sum[:16]) + FrameSuffix
}

// LedgerTableName names the ledger table of checkpoint generation gen.
func LedgerTableName(gen uint64) string { return fmt.Sprintf("ledger-%06d.tbl", gen) }

// ParseLedgerTableName returns the generation of a ledger table's file
// name (LedgerTableName), or false.
func ParseLedgerTableName(name string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, "ledger-")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ".tbl")
	if !ok || len(s) < 6 {
		return 0, false
	}
	gen, err := strconv.ParseUint(s, 10, 64)
	if err != nil || gen == 0 {
		return 0, false
	}
	return gen, true
}

// CheckLedgerTable says why b is not the ledger table of checkpoint
// generation gen taken at log position at, or "". A version 1 table names
// no origin and is taken on its checksums alone.
func CheckLedgerTable(b []byte, gen uint64, at wal.Pos) string {
	o, err := ledger.ReadTableOrigin(b)
	if err != nil {
		return err.Error()
	}
	if o == (ledger.TableOrigin{}) {
		return ""
	}
	if want := (ledger.TableOrigin{Gen: gen, Pos: at}); o != want {
		return fmt.Sprintf("it was written by checkpoint %d at %d:%d, CHECKPOINT is %d at %v", o.Gen, o.Pos.Segment, o.Pos.Offset, gen, at)
	}
	return ""
}
