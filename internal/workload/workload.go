package workload

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/continuumdb/continuum/internal/agenttext"
)

// Average sizes the script aims for, in bytes.
const (
	ArgsBytes    = 200 // JSON arguments of the atom's tool call
	ResultBytes  = 300 // JSON result the downstream returns
	ThoughtBytes = 500 // the assistant message (the atom's delta text)

	// SubgoalEvery is how often (in atoms) a run opens a new subgoal: at
	// seqs 1, 1+SubgoalEvery, 1+2*SubgoalEvery, ...
	SubgoalEvery = 10
)

// Size requests passed to agenttext, calibrated so the averages come out at
// the sizes above (agenttext overshoots by up to a sentence or a JSON item;
// TestScriptSizes checks the averages).
const (
	argsTarget    = 172
	resultTarget  = 205
	thoughtTarget = 460
)

// Atom is what the scripted agent does at one seq of one run: one tool
// call, one thought, one memory update, and sometimes a new subgoal.
// Byte slices are owned by the caller (Script allocates fresh ones).
type Atom struct {
	Run string
	Seq uint64

	// The action: Tool(Args) with idempotency key Key. Idempotent says the
	// downstream honours the key, so an in-doubt call may be made again.
	Tool       string
	Args       []byte // a JSON object, about ArgsBytes
	Key        string // IdempotencyKey(Run, Seq)
	Idempotent bool
	// Result is Downstream(Tool, Args, Key): what the call returns.
	Result []byte

	Thought string // the assistant message, about ThoughtBytes of agent text
	MemKey  string // working memory key set by this atom (one of 24)
	MemVal  []byte // its new value, one sentence

	Subgoal   string // "" or the text of a new subgoal (every SubgoalEvery atoms)
	Objective string // the run's objective; set only at seq 1
}

// tool is one entry of the scripted agent's toolbox.
type tool struct {
	name       string
	idempotent bool // the downstream honours idempotency keys
}

// tools mixes read-only calls, idempotent writes and non-idempotent side
// effects (payments, emails) in about the proportions of an ops agent.
var tools = []tool{
	{"deploy_service", true},
	{"create_bucket", true},
	{"delete_bucket", true},
	{"run_migration", false},
	{"send_email", false},
	{"charge_customer", false},
	{"issue_refund", false},
	{"scale_service", true},
	{"get_logs", true},
	{"list_buckets", true},
	{"query_billing", true},
	{"rotate_secret", false},
	{"http_get", true},
	{"search_docs", true},
	{"create_ticket", false},
}

// memKeys is the fixed set of working-memory keys a run updates.
var memKeys = []string{
	"focus", "last_region", "last_service", "open_incidents", "budget_left",
	"pending_approval", "current_plan", "user_preference", "blocked_on",
	"last_error", "deploy_target", "rollback_point", "cost_estimate",
	"owner", "deadline", "risk", "next_check", "known_good_version",
	"ticket", "customer", "quota", "schema_version", "alert_state", "notes",
}

// RunID returns the id of the i-th run of a workload: "run-00000",
// "run-00001", ... (ids sort in the order of i for 0 <= i < 100000).
func RunID(i int) string { return fmt.Sprintf("run-%05d", i) }

// IdempotencyKey returns the key the scripted agent gives the tool call of
// atom seq of run: "<run>/<seq>/0" (call index 0: one call per atom).
func IdempotencyKey(run string, seq uint64) string {
	return run + "/" + strconv.FormatUint(seq, 10) + "/0"
}

// splitmix64 is a bijective 64-bit mixer (Steele et al.), used to spread
// the inputs into well-separated generator seeds.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// hashString is FNV-1a 64 of s, which never changes across Go versions.
func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// atomSeed derives the generator seed of one atom from the workload seed,
// the run and the seq.
func atomSeed(run string, seq uint64, seed int64) int64 {
	x := splitmix64(uint64(seed) ^ 0x5c7f3a1d2b4e6f80)
	x = splitmix64(x ^ hashString(run))
	x = splitmix64(x ^ seq)
	return int64(x)
}

// Script returns atom seq of run under the workload seed. It is a pure
// function: equal arguments give byte-identical atoms.
func Script(runID string, seq uint64, seed int64) Atom {
	s := uint64(atomSeed(runID, seq, seed))
	g := agenttext.New(int64(s))
	a := Atom{Run: runID, Seq: seq}
	if seq == 1 {
		a.Objective = g.Message(120)
	}
	// Text is drawn from the generator in a fixed order, and the choices of
	// tool and memory key from the seed itself: changing either changes
	// every atom, which the golden test catches.
	t := tools[int(splitmix64(s^0x7001)%uint64(len(tools)))]
	a.Tool = t.name
	a.Idempotent = t.idempotent
	a.Args = g.ToolArgs(argsTarget)
	a.Key = IdempotencyKey(runID, seq)
	a.Result = Downstream(a.Tool, a.Args, a.Key)
	a.Thought = g.Message(thoughtTarget)
	a.MemKey = memKeys[int(splitmix64(s^0x3e30)%uint64(len(memKeys)))]
	a.MemVal = []byte(g.Sentence())
	if seq%SubgoalEvery == 1 {
		a.Subgoal = g.Sentence()
	}
	return a
}

// Downstream is the fake external service: the result of calling tool with
// args under idempotency key key. It is a pure function of its three
// inputs, so a re-executed idempotent call returns the same bytes, and a
// call with another key (a genuinely new request) returns different ones.
// The result is a JSON object of about ResultBytes.
func Downstream(tool string, args []byte, key string) []byte {
	h := fnv.New64a()
	var n [8]byte
	for _, part := range [][]byte{[]byte(tool), args, []byte(key)} {
		// Length-prefix each part so ("ab","c") and ("a","bc") differ.
		binary.LittleEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return agenttext.New(int64(splitmix64(h.Sum64()))).ToolResult(resultTarget)
}
