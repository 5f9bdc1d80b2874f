// Package resumekey decides the key of a default-key call of an atom
// re-begun after a crash whose action differs from the interrupted
// attempt's call at the same index (docs/DESIGN.md, write path step 2, and
// "The engine's API, section by section", Caveats): refused while the old
// call is in doubt, then run at that index with a key no earlier call
// used (the default key, "~" and 16 hex digits of its fingerprint), so
// that the calls after it keep the interrupted attempt's keys.
//
// # The interface to the engine
//
// The engine hands Check the intent of the new call, the interrupted
// attempt's calls (a copy of the run's inflight list, taken under the
// run's lock; those at the call's index count) and the ledger, read
// through (engine/rollback.go's ledgerView):
//
//	type Ledger interface {
//		// Lookup returns the ledger's entry of an action's fingerprint.
//		Lookup(fp ledger.Fingerprint) (ledger.Entry, bool)
//		// Intent reads the intent record at loc from the log.
//		Intent(loc ledger.Loc) (*ledger.Intent, error)
//	}
//
// and words the engine's ActionChangedError with
//
//	Describe(run, seq, index, oldTool, newTool, key) string
//
// # Guarantees
//
//   - Check returns the intent unchanged when no earlier call at its
//     index differs from it, the intent with its replacement key
//     (ReplacementKey) once a different call at its default key is
//     settled, and a *ledger.InDoubtError of the old call (the engine
//     wraps it in its ActionChangedError) while one is in doubt and no
//     exec of it is running.
//   - A call made with an explicit key numbers no call: it is ignored.
//   - Intent's error is returned wrapped, naming the old call's index.
//
// A run keeps the calls its failed attempts of a seq wrote intents for in
// a Failed (held in its fields under its lock: Note at each Fail and at
// the replay of a Fail record, At for the next attempt's Check,
// Committed when the seq commits), so that Check covers a failed
// attempt's calls as it covers a crash's.
//
// # Caveats
//
//   - Check reads the ledger as it is: the engine calls it once per Do,
//     before the intent is written.
package resumekey
