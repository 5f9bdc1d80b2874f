// Package crc32c is the one CRC-32C (Castagnoli) of the store's formats:
// the log's records and segment headers (wal), snapshot values (snapshot),
// the ledger's table (ledger) and the engine's files all checksum with it.
// CRC-32C has hardware support on amd64 and arm64, and detects every
// burst error up to 32 bits; the formats built on it are frozen, so the
// polynomial is too.
package crc32c

import "hash/crc32"

// Table is the CRC-32C table, for the hash/crc32 functions that take one
// (crc32.New). It must not be modified.
var Table = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, Table) }

// Update returns the CRC-32C of the bytes crc was the checksum of, followed
// by b: Update(Checksum(a), b) == Checksum(a || b), and Update(0, b) ==
// Checksum(b).
func Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, Table, b) }
