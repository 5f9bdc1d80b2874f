package offline_test

import (
	"testing"

	"github.com/continuumdb/continuum/offline"
)

// TestScanChargesOnce: reading a store's log charges its budget with each
// record's decompressed size once. (An atom's body was charged when the
// cursor read the record and again when it was decompressed: a store
// used the budget's base twice as fast as its bytes warranted.)
func TestScanChargesOnce(t *testing.T) {
	dir := exportStore(t)
	charged, decompressed, err := offline.ScanCharges(dir)
	if err != nil {
		t.Fatal(err)
	}
	if decompressed == 0 {
		t.Fatal("the store's records decompressed to nothing: the test reads no compressed record")
	}
	if charged != decompressed {
		t.Errorf("the budget was charged %d bytes for records that decompress to %d", charged, decompressed)
	}
}
