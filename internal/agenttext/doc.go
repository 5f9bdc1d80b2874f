// Package agenttext generates deterministic, realistic English-like text of
// the kind an AI agent's transcript holds: user requests, assistant
// reasoning, tool-call arguments and tool results about deploying services,
// buckets, migrations, billing, emails and regions, with code-ish and
// JSON-ish fragments mixed in.
//
// It exists so that tests and benchmarks of compression, encoding and
// storage measure something close to real workloads, not zeros (which
// compress absurdly well) nor random bytes (which never compress).
//
// Usage:
//
//	g := agenttext.New(42)
//	user := g.Message(300)         // ~300 bytes of a user or assistant turn
//	args := g.ToolArgs(200)        // a valid JSON object, ~200 bytes
//	result := g.ToolResult(300)    // a valid JSON object, ~300 bytes
//
// # Guarantees
//
// The same seed always yields the same sequence of outputs, on every
// platform and Go version: the generator uses its own PCG-style random
// source, not math/rand's global or version-dependent streams. ToolArgs and
// ToolResult always return valid JSON objects. Sizes are approximate: the
// output is within a sentence or a JSON field of the requested size.
//
// # Caveats
//
// A Gen is not safe for concurrent use; give each goroutine its own, seeded
// differently. The vocabulary is fixed and small (a few hundred words), so
// text from this package is somewhat more compressible than real transcripts
// with their long tail of rare identifiers; the generator mixes in random
// identifiers (hashes, ids, timestamps) to keep that gap narrow.
package agenttext
