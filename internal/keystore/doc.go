// Package keystore is KEYS, the key table of an encrypted store
// (docs/DESIGN.md, "Encryption at rest"): the data keys, one per run, per
// erasable memory key and one for the store, wrapped by the user's
// keyring (seal.Keyring) and written durably before any of them is used.
// It opens KEYS at Open (a missing or wrong user key fails there, before
// any record is read), creates it for a new store, adds keys in batches
// (the additions that wait while KEYS is being written share the next
// write, as the log's appends share an fsync), re-wraps them (Rekey) and
// lists them. Package engine holds one Store per encrypted store (none
// for a plaintext one); package internal/erasure changes the table
// through Lock, Replace and Unlock.
//
// # Usage
//
//	ks, err := keystore.Create(fs, name, storeID, ring, noSync) // a new store
//	ks, err = keystore.Open(fs, name, storeName, storeID, ring, noSync)
//	err = ks.Add("run-7")           // durable in KEYS when it returns
//	k, _ := ks.Keys().Scope("run-7") // the unwrapped key
//	sealer := ks.Sealer()            // seals and opens the store's payloads with them
//
// # Guarantees
//
//   - A key is in memory (Keys) only once the KEYS that holds it is
//     durable (file and directory fsync, layout.WriteFileAtomic): nothing
//     is ever sealed with a key a crash could lose.
//   - Every change of the table (Add, Rekey, an erasure's through
//     Replace) is ordered by one mutex and writes a clone: a failed write
//     changes nothing.
//
// # Caveats
//
//   - KEYS is as precious as the log: without it nothing sealed opens.
//     The package never reads or writes the log.
package keystore
