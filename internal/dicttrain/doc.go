// Package dicttrain trains a store's compression dictionary from the bodies
// of its first records, and loads the dictionaries a store has.
//
// Records of an agent are small (a few hundred bytes) and alike;
// per-record compression barely helps them without a dictionary. The
// Trainer keeps a copy of the first record bodies it is shown (Sample),
// trains a dictionary from them on one goroutine of its own once it has
// Config.Samples of them, writes it durably under dicts/, hands it to the
// Host (which replicates it), and only then selects it for new records
// (Config.Current). Dictionaries are never removed, so every record stays
// readable.
//
// An encrypted store trains none: a dictionary is made of the text of the
// records it was trained on, which an encrypted store must not hold in the
// clear, and no key can seal it in a way erasure reaches (docs/DESIGN.md,
// "Encryption at rest").
//
// # The interface to the engine
//
// The engine creates one Trainer at Open (New), calls Load once before it
// reads the log (then CheckNewest: a CHECKPOINT written after a dictionary
// Load did not find is log damage), Sample with each record body it writes (the atom and
// ledger records), and Wait at Close. The Trainer reaches the engine
// through one method:
//
//	type Host interface {
//		// Replicate hands the dictionary file data (layout.MarshalDict of
//		// id), already durable in the store's directory, to the store's
//		// replication before any record uses it. An error leaves the
//		// dictionary unused until the next Open ships it.
//		Replicate(id uint32, data []byte) error
//	}
//
// Replicate is called on the Trainer's goroutine, with no lock of the
// engine held and none of the Trainer's.
//
// # Usage
//
//	t := dicttrain.New(dicttrain.Config{FS: fs, Dir: dir, Dicts: dicts, Current: &curDict, ...}, host)
//	if err := t.Load(); err != nil { ... }
//	t.Sample(body) // each record body, on the commit path
//	t.Wait()       // at Close: training finished (or never started)
//
// # Guarantees
//
//   - A dictionary is durable (written atomically, its directory synced
//     unless Config.NoSync) and replicated before Current names it.
//   - Sample copies at most MaxSample bytes of a body and takes the
//     Trainer's mutex only; after training has started it returns at once.
//   - Training runs at most once per Trainer, and never when the store has
//     a dictionary already, Config.Samples < 0, or Config.Encrypted.
//   - A failed training is not an error of the store: records stay
//     compressed without a dictionary; it is logged and Config.OnFailure
//     is called.
//
// # Caveats
//
//   - Load must run before Sample; Sample after Wait starts no training.
//   - The dictionary's id is Current + 1 when training ends: ids are only
//     assigned by one Trainer at a time (the store's lock).
package dicttrain
