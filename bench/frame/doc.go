// Package framebench measures the frame package on realistic agent text
// from internal/agenttext: encoding and compressing a typical ~500-byte
// delta (the engine does it on every commit), decoding it back, and the
// same for a 100 KB frame (a snapshot), per codec, with and without a
// trained dictionary; and LLM-shaped messages: a tool result recorded
// inline against a reference to its certificate, and a turn of tool calls
// in the message shape against the converter's.
//
//	go test -run '^$' -bench . -benchmem -count 6 ./bench/frame/
//
// Reported metrics: ns/op, allocs/op, B/op, MB/s of raw record, and
// stored-B/rec, the mean stored size of one record (header included).
// Figures and their machine are in bench/RESULTS-frame.md.
//
// # Caveats
//
// Synthetic text has a smaller vocabulary than real transcripts, so ratios
// here are somewhat optimistic; the dictionary is trained on other seeds
// than the records measured, so it is not fitted to them.
package framebench
