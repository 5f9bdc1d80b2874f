package agenttext

import (
	"strconv"
	"strings"
)

// Gen is a deterministic generator of agent text. Create one with New.
// It is not safe for concurrent use.
type Gen struct {
	state uint64
	inc   uint64
	calls int // counter used to build call ids
}

// New returns a generator whose whole output is determined by seed.
func New(seed int64) *Gen {
	g := &Gen{inc: uint64(seed)<<1 | 1}
	g.next()
	g.state += uint64(seed) ^ 0x853c49e6748fea9b
	g.next()
	return g
}

// next is PCG-XSH-RR 64/32, widened to 64 bits by two steps.
func (g *Gen) next32() uint32 {
	old := g.state
	g.state = old*6364136223846793005 + g.inc
	xorshifted := uint32(((old >> 18) ^ old) >> 27)
	rot := uint32(old >> 59)
	return xorshifted>>rot | xorshifted<<((-rot)&31)
}

func (g *Gen) next() uint64 { return uint64(g.next32())<<32 | uint64(g.next32()) }

// intn returns a value in [0, n). n must be > 0.
func (g *Gen) intn(n int) int { return int(g.next() % uint64(n)) }

func (g *Gen) pick(list []string) string { return list[g.intn(len(list))] }

// Word returns one word of the agent vocabulary.
func (g *Gen) Word() string {
	switch g.intn(10) {
	case 0, 1, 2:
		return g.pick(nouns)
	case 3, 4:
		return g.pick(verbs)
	case 5:
		return g.pick(adjectives)
	default:
		return g.pick(common)
	}
}

// Sentence returns one English-like sentence ending in punctuation.
func (g *Gen) Sentence() string {
	var b strings.Builder
	g.sentence(&b)
	return b.String()
}

func (g *Gen) sentence(b *strings.Builder) {
	tpl := g.pick(templates)
	for i := 0; i < len(tpl); i++ {
		c := tpl[i]
		if c != '{' {
			b.WriteByte(c)
			continue
		}
		j := strings.IndexByte(tpl[i:], '}')
		g.fill(b, tpl[i+1:i+j])
		i += j
	}
}

// fill writes a value for one template slot.
func (g *Gen) fill(b *strings.Builder, slot string) {
	switch slot {
	case "noun":
		b.WriteString(g.pick(nouns))
	case "verb":
		b.WriteString(g.pick(verbs))
	case "verbing":
		b.WriteString(g.pick(verbings))
	case "adj":
		b.WriteString(g.pick(adjectives))
	case "service":
		b.WriteString(g.pick(services))
	case "region":
		b.WriteString(g.pick(regions))
	case "bucket":
		b.WriteString(g.pick(bucketPrefixes))
		b.WriteByte('-')
		b.WriteString(g.pick(envs))
		b.WriteByte('-')
		b.WriteString(strconv.Itoa(g.intn(100)))
	case "env":
		b.WriteString(g.pick(envs))
	case "num":
		b.WriteString(strconv.Itoa(g.intn(1000)))
	case "pct":
		b.WriteString(strconv.Itoa(g.intn(100)))
		b.WriteByte('%')
	case "money":
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(g.intn(5000)))
		b.WriteByte('.')
		b.WriteString(strconv.Itoa(10 + g.intn(90)))
	case "email":
		b.WriteString(g.pick(people))
		b.WriteByte('@')
		b.WriteString(g.pick(domains))
	case "person":
		b.WriteString(g.pick(people))
	case "version":
		b.WriteString("v")
		b.WriteString(strconv.Itoa(1 + g.intn(4)))
		b.WriteByte('.')
		b.WriteString(strconv.Itoa(g.intn(20)))
		b.WriteByte('.')
		b.WriteString(strconv.Itoa(g.intn(10)))
	case "migration":
		b.WriteString(strconv.Itoa(20260000 + g.intn(1300)))
		b.WriteByte('_')
		b.WriteString(g.pick(migrationNames))
	case "id":
		g.hex(b, 8)
	case "tool":
		b.WriteString(g.pick(tools))
	case "code":
		b.WriteByte('`')
		b.WriteString(g.pick(codeSnippets))
		b.WriteByte('`')
	default:
		b.WriteString(slot)
	}
}

func (g *Gen) hex(b *strings.Builder, n int) {
	const digits = "0123456789abcdef"
	for i := 0; i < n; i++ {
		b.WriteByte(digits[g.intn(16)])
	}
}

// Message returns a user or assistant message of about approxBytes bytes:
// prose, with the occasional inline code, command line, or JSON fragment,
// the way agent transcripts look. approxBytes <= 0 yields one sentence.
func (g *Gen) Message(approxBytes int) string {
	var b strings.Builder
	b.Grow(approxBytes + 64)
	g.sentence(&b)
	for b.Len() < approxBytes {
		switch r := g.intn(20); {
		case r == 0:
			b.WriteString("\n\n```\n$ ")
			b.WriteString(g.pick(commands))
			b.WriteString(" ")
			g.fill(&b, "service")
			b.WriteString(" --region ")
			g.fill(&b, "region")
			b.WriteString("\n```\n")
		case r == 1:
			b.WriteString("\n\nResult: {\"status\": \"")
			b.WriteString(g.pick(statuses))
			b.WriteString("\", \"id\": \"")
			g.hex(&b, 12)
			b.WriteString("\"}\n")
		case r == 2:
			b.WriteString("\n- ")
			g.sentence(&b)
		case r < 5:
			b.WriteString("\n\n")
			g.sentence(&b)
		default:
			b.WriteByte(' ')
			g.sentence(&b)
		}
	}
	return b.String()
}

// ToolArgs returns the JSON arguments of a tool call, a valid JSON object of
// about approxBytes bytes (200 is typical).
func (g *Gen) ToolArgs(approxBytes int) []byte {
	var b strings.Builder
	b.Grow(approxBytes + 96)
	b.WriteString(`{"action":"`)
	b.WriteString(g.pick(verbs))
	b.WriteString(`","service":"`)
	g.fill(&b, "service")
	b.WriteString(`","region":"`)
	g.fill(&b, "region")
	b.WriteByte('"')
	for i := 0; b.Len() < approxBytes-2; i++ {
		b.WriteString(`,"`)
		key := g.pick(argKeys)
		b.WriteString(key)
		b.WriteByte('_')
		b.WriteString(strconv.Itoa(i))
		b.WriteString(`":`)
		g.jsonValue(&b, key)
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// ToolResult returns the JSON result of a tool call, a valid JSON object of
// about approxBytes bytes (300 is typical).
func (g *Gen) ToolResult(approxBytes int) []byte {
	var b strings.Builder
	b.Grow(approxBytes + 96)
	b.WriteString(`{"status":"`)
	b.WriteString(g.pick(statuses))
	b.WriteString(`","request_id":"req_`)
	g.hex(&b, 16)
	b.WriteString(`","items":[`)
	first := true
	for b.Len() < approxBytes-40 {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(`{"name":"`)
		g.fill(&b, g.pick([]string{"bucket", "service", "migration"}))
		b.WriteString(`","state":"`)
		b.WriteString(g.pick(statuses))
		b.WriteString(`","updated_at":"2026-`)
		g.twoDigits(&b, 1+g.intn(12))
		b.WriteByte('-')
		g.twoDigits(&b, 1+g.intn(28))
		b.WriteByte('T')
		g.twoDigits(&b, g.intn(24))
		b.WriteByte(':')
		g.twoDigits(&b, g.intn(60))
		b.WriteString(`:00Z","size_bytes":`)
		b.WriteString(strconv.Itoa(g.intn(1 << 30)))
		b.WriteByte('}')
	}
	b.WriteString(`],"message":"`)
	msg := g.Sentence()
	jsonEscape(&b, msg)
	b.WriteString(`"}`)
	return []byte(b.String())
}

func (g *Gen) twoDigits(b *strings.Builder, n int) {
	b.WriteByte(byte('0' + n/10%10))
	b.WriteByte(byte('0' + n%10))
}

// jsonValue writes a JSON value suited to key.
func (g *Gen) jsonValue(b *strings.Builder, key string) {
	switch key {
	case "dry_run", "force", "notify":
		if g.intn(2) == 0 {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case "replicas", "timeout_seconds", "limit", "amount_cents":
		b.WriteString(strconv.Itoa(g.intn(10000)))
	case "tags":
		b.WriteString(`["`)
		b.WriteString(g.pick(envs))
		b.WriteString(`","`)
		b.WriteString(g.pick(adjectives))
		b.WriteString(`"]`)
	case "recipient":
		b.WriteByte('"')
		g.fill(b, "email")
		b.WriteByte('"')
	case "bucket":
		b.WriteByte('"')
		g.fill(b, "bucket")
		b.WriteByte('"')
	case "migration":
		b.WriteByte('"')
		g.fill(b, "migration")
		b.WriteByte('"')
	case "version":
		b.WriteByte('"')
		g.fill(b, "version")
		b.WriteByte('"')
	default:
		b.WriteByte('"')
		jsonEscape(b, g.Sentence())
		b.WriteByte('"')
	}
}

// jsonEscape writes s as the inside of a JSON string.
func jsonEscape(b *strings.Builder, s string) {
	const hexd = "0123456789abcdef"
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hexd[c>>4])
			b.WriteByte(hexd[c&15])
		default:
			b.WriteByte(c)
		}
	}
}

// CallID returns a fresh tool-call id of the form "call_<hex>", distinct
// from every earlier one of this generator.
func (g *Gen) CallID() string {
	g.calls++
	var b strings.Builder
	b.WriteString("call_")
	g.hex(&b, 12)
	b.WriteString(strconv.Itoa(g.calls))
	return b.String()
}

// Tool returns the name of a tool an agent might call.
func (g *Gen) Tool() string { return g.pick(tools) }

// Intn returns a deterministic value in [0, n); n <= 0 yields 0. It lets
// callers make further choices from the same seeded stream.
func (g *Gen) Intn(n int) int {
	if n <= 0 {
		return 0
	}
	return g.intn(n)
}
