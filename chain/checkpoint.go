package chain

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// Checkpoint commits a run's head at a seq under a store id. Signed, it lets
// a verifier holding only the public key prove that the run had exactly this
// head at Seq, which neither truncation nor a recomputed chain can fake.
type Checkpoint struct {
	StoreID string
	RunID   string
	Seq     uint64
	Head    Hash
	Final   bool // the run ended at Seq
}

// RunHead is one run's entry in a StoreHead (and in a State).
type RunHead struct {
	RunID string
	Seq   uint64
	Head  Hash
}

// StoreHead is one entry of the store-level head log: every run's latest
// checkpoint. A run listed in any store head must exist in the store, so a
// deleted run is detected.
type StoreHead struct {
	StoreID string
	Runs    []RunHead // sorted by RunID, unique
}

// Set records r as its run's latest checkpoint, replacing the run's
// previous entry and keeping Runs sorted by RunID. The engine keeps one
// StoreHead up to date this way and signs it into the head log.
func (h *StoreHead) Set(r RunHead) {
	i, found := slices.BinarySearchFunc(h.Runs, r.RunID, func(e RunHead, id string) int { return strings.Compare(e.RunID, id) })
	if found {
		h.Runs[i] = r
		return
	}
	h.Runs = slices.Insert(h.Runs, i, r)
}

// Signer signs checkpoints and store heads with an Ed25519 key in the
// golang.org/x/mod/sumdb/note format. It is safe for concurrent use.
type Signer struct {
	name string
	hash uint32             // note key hash of (name, public key)
	key  ed25519.PrivateKey // never modified after NewSigner
	pub  ed25519.PublicKey
}

// NewSigner returns a Signer for key under name. name is the note signer
// name: non-empty UTF-8 without spaces or '+'.
func NewSigner(name string, key ed25519.PrivateKey) (*Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: have %d bytes, want %d", ErrPrivateKey, len(key), ed25519.PrivateKeySize)
	}
	pub := key.Public().(ed25519.PublicKey)
	v, err := noteVerifier(name, pub)
	if err != nil {
		return nil, err
	}
	k := make(ed25519.PrivateKey, len(key))
	copy(k, key)
	return &Signer{name: name, hash: v.KeyHash(), key: k, pub: pub}, nil
}

// Name returns the signer name written in signature lines.
func (s *Signer) Name() string { return s.name }

// PublicKey returns the public half of the signing key.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.pub }

// noteSigner adapts Signer to note.Signer.
type noteSigner struct{ s *Signer }

func (n noteSigner) Name() string    { return n.s.name }
func (n noteSigner) KeyHash() uint32 { return n.s.hash }
func (n noteSigner) Sign(msg []byte) ([]byte, error) {
	return ed25519.Sign(n.s.key, msg), nil
}

// SignCheckpoint returns the checkpoint's note text followed by a blank line
// and its signature line.
func (s *Signer) SignCheckpoint(c Checkpoint) ([]byte, error) {
	return note.Sign(&note.Note{Text: string(MarshalCheckpoint(c))}, noteSigner{s})
}

// SignStoreHead returns the store head's note text and its signature line.
// Runs must be sorted by RunID and unique.
func (s *Signer) SignStoreHead(h StoreHead) ([]byte, error) {
	if err := checkRunsSorted(h.Runs); err != nil {
		return nil, err
	}
	return note.Sign(&note.Note{Text: string(MarshalStoreHead(h))}, noteSigner{s})
}

// MarshalCheckpoint returns the unsigned checkpoint text (format.go).
func MarshalCheckpoint(c Checkpoint) []byte {
	b := make([]byte, 0, 128+len(c.StoreID)+len(c.RunID))
	b = append(b, checkpointHeader...)
	b = append(b, "\nstore "...)
	b = strconv.AppendQuote(b, c.StoreID)
	b = append(b, "\nrun "...)
	b = strconv.AppendQuote(b, c.RunID)
	b = append(b, "\nseq "...)
	b = strconv.AppendUint(b, c.Seq, 10)
	b = append(b, "\nhead "...)
	b = append(b, c.Head.String()...)
	b = append(b, '\n')
	if c.Final {
		b = append(b, "final\n"...)
	}
	return b
}

// MarshalStoreHead returns the unsigned store head text (format.go). The
// caller keeps Runs sorted by RunID; ParseStoreHead rejects any other order.
func MarshalStoreHead(h StoreHead) []byte {
	b := make([]byte, 0, 64+len(h.StoreID)+len(h.Runs)*100)
	b = append(b, storeHeadHeader...)
	b = append(b, "\nstore "...)
	b = strconv.AppendQuote(b, h.StoreID)
	b = append(b, '\n')
	for _, r := range h.Runs {
		b = append(b, "run "...)
		b = strconv.AppendQuote(b, r.RunID)
		b = append(b, ' ')
		b = strconv.AppendUint(b, r.Seq, 10)
		b = append(b, ' ')
		b = append(b, r.Head.String()...)
		b = append(b, '\n')
	}
	return b
}

func checkRunsSorted(runs []RunHead) error {
	for i := 1; i < len(runs); i++ {
		if runs[i-1].RunID >= runs[i].RunID {
			return fmt.Errorf("%w: store head runs not sorted and unique at index %d (%q after %q)", ErrParse, i, truncate(runs[i].RunID), truncate(runs[i-1].RunID))
		}
	}
	return nil
}

// splitNote returns the note text of b (signed or not) and whether b
// carries a signature block. It checks the note syntax, not signatures.
func splitNote(b []byte, what string) (text string, signed bool, err error) {
	if len(b) > maxNoteSize {
		return "", false, fmt.Errorf("%w: %s of %d bytes exceeds %d", ErrParse, what, len(b), maxNoteSize)
	}
	if !bytes.Contains(b, []byte("\n\n")) {
		if len(b) == 0 || b[len(b)-1] != '\n' {
			return "", false, fmt.Errorf("%w: %s does not end in a newline", ErrParse, what)
		}
		for i := 0; i < len(b); {
			r, size := utf8.DecodeRune(b[i:])
			if r < 0x20 && r != '\n' || r == utf8.RuneError && size == 1 {
				return "", false, fmt.Errorf("%w: %s has a control character or invalid UTF-8 at byte %d", ErrParse, what, i)
			}
			i += size
		}
		return string(b), false, nil
	}
	n, err := note.Open(b, nil)
	var unverified *note.UnverifiedNoteError
	if !errors.As(err, &unverified) {
		if err == nil {
			// Unreachable with no known verifiers, but never trust it.
			return "", false, fmt.Errorf("%w: %s: unexpected verified note", ErrParse, what)
		}
		return "", false, fmt.Errorf("%w: %s: %v", ErrParse, what, err)
	}
	n = unverified.Note
	return n.Text, true, nil
}

// ParseCheckpoint parses a checkpoint, signed or unsigned, without checking
// signatures. It never panics; errors wrap ErrParse and say which line.
func ParseCheckpoint(b []byte) (Checkpoint, error) {
	text, _, err := splitNote(b, "checkpoint")
	if err != nil {
		return Checkpoint{}, err
	}
	return parseCheckpointText(text)
}

func parseCheckpointText(text string) (Checkpoint, error) {
	var c Checkpoint
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if lines[0] != checkpointHeader {
		return c, fmt.Errorf("%w: checkpoint line 1: %q is not %q", ErrParse, truncate(lines[0]), checkpointHeader)
	}
	if len(lines) != 5 && len(lines) != 6 {
		return c, fmt.Errorf("%w: checkpoint has %d lines, want 5 or 6", ErrParse, len(lines))
	}
	var err error
	if c.StoreID, err = quotedField(lines[1], "store ", "checkpoint", 2); err != nil {
		return Checkpoint{}, err
	}
	if c.RunID, err = quotedField(lines[2], "run ", "checkpoint", 3); err != nil {
		return Checkpoint{}, err
	}
	s, ok := strings.CutPrefix(lines[3], "seq ")
	if !ok {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint line 4: want \"seq <n>\", have %q", ErrParse, truncate(lines[3]))
	}
	if c.Seq, err = parseSeq(s); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint line 4: %w", err)
	}
	s, ok = strings.CutPrefix(lines[4], "head ")
	if !ok {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint line 5: want \"head <hex>\", have %q", ErrParse, truncate(lines[4]))
	}
	if c.Head, err = parseCanonicalHash(s); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint line 5: %w", err)
	}
	if len(lines) == 6 {
		if lines[5] != "final" {
			return Checkpoint{}, fmt.Errorf("%w: checkpoint line 6: want \"final\", have %q", ErrParse, truncate(lines[5]))
		}
		c.Final = true
	}
	return c, nil
}

// ParseStoreHead parses a store head, signed or unsigned, without checking
// signatures. It never panics; errors wrap ErrParse and say which line.
func ParseStoreHead(b []byte) (StoreHead, error) {
	text, _, err := splitNote(b, "store head")
	if err != nil {
		return StoreHead{}, err
	}
	return parseStoreHeadText(text)
}

func parseStoreHeadText(text string) (StoreHead, error) {
	var h StoreHead
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if lines[0] != storeHeadHeader {
		return h, fmt.Errorf("%w: store head line 1: %q is not %q", ErrParse, truncate(lines[0]), storeHeadHeader)
	}
	if len(lines) < 2 {
		return h, fmt.Errorf("%w: store head has %d lines, want at least 2", ErrParse, len(lines))
	}
	var err error
	if h.StoreID, err = quotedField(lines[1], "store ", "store head", 2); err != nil {
		return StoreHead{}, err
	}
	for i, line := range lines[2:] {
		n := i + 3
		rest, ok := strings.CutPrefix(line, "run ")
		if !ok {
			return StoreHead{}, fmt.Errorf("%w: store head line %d: want \"run <id> <seq> <head>\", have %q", ErrParse, n, truncate(line))
		}
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return StoreHead{}, fmt.Errorf("%w: store head line %d: run id: %v", ErrParse, n, err)
		}
		id, err := canonicalUnquote(q)
		if err != nil {
			return StoreHead{}, fmt.Errorf("store head line %d: %w", n, err)
		}
		seqS, headS, ok := strings.Cut(strings.TrimPrefix(rest[len(q):], " "), " ")
		if !ok || !strings.HasPrefix(rest[len(q):], " ") {
			return StoreHead{}, fmt.Errorf("%w: store head line %d: want \"run <id> <seq> <head>\", have %q", ErrParse, n, truncate(line))
		}
		seq, err := parseSeq(seqS)
		if err != nil {
			return StoreHead{}, fmt.Errorf("store head line %d: %w", n, err)
		}
		head, err := parseCanonicalHash(headS)
		if err != nil {
			return StoreHead{}, fmt.Errorf("store head line %d: %w", n, err)
		}
		if len(h.Runs) > 0 && h.Runs[len(h.Runs)-1].RunID >= id {
			return StoreHead{}, fmt.Errorf("%w: store head line %d: run %q is not after %q (runs must be sorted and unique)", ErrParse, n, truncate(id), truncate(h.Runs[len(h.Runs)-1].RunID))
		}
		h.Runs = append(h.Runs, RunHead{RunID: id, Seq: seq, Head: head})
	}
	return h, nil
}

func quotedField(line, prefix, what string, n int) (string, error) {
	q, ok := strings.CutPrefix(line, prefix)
	if !ok {
		return "", fmt.Errorf("%w: %s line %d: want %q<quoted id>, have %q", ErrParse, what, n, prefix, truncate(line))
	}
	s, err := canonicalUnquote(q)
	if err != nil {
		return "", fmt.Errorf("%s line %d: %w", what, n, err)
	}
	return s, nil
}

// canonicalUnquote accepts exactly what strconv.Quote writes, so each id
// has one encoding.
func canonicalUnquote(q string) (string, error) {
	s, err := strconv.Unquote(q)
	if err != nil || !strings.HasPrefix(q, `"`) || strconv.Quote(s) != q {
		return "", fmt.Errorf("%w: %q is not a canonical Go-quoted string", ErrParse, truncate(q))
	}
	return s, nil
}

func parseSeq(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || strconv.FormatUint(v, 10) != s {
		return 0, fmt.Errorf("%w: seq %q is not a canonical decimal uint64", ErrParse, truncate(s))
	}
	return v, nil
}

func parseCanonicalHash(s string) (Hash, error) {
	h, err := ParseHash(s)
	if err != nil {
		return Hash{}, err
	}
	if h.String() != s {
		return Hash{}, fmt.Errorf("%w: hash %q is not lowercase hex", ErrParse, truncate(s))
	}
	return h, nil
}

// keyVerifiers is a note.Verifiers that knows exactly one Ed25519 public
// key: the trust comes from the key the user supplied, not from a name
// found in the store. With origin set, only a signature under that signer
// name counts; without, one under any name.
type keyVerifiers struct {
	pub    ed25519.PublicKey
	origin string
}

func (k keyVerifiers) Verifier(name string, hash uint32) (note.Verifier, error) {
	if k.origin != "" && name != k.origin {
		return nil, &note.UnknownVerifierError{Name: name, KeyHash: hash}
	}
	v, err := noteVerifier(name, k.pub)
	if err != nil || v.KeyHash() != hash {
		return nil, &note.UnknownVerifierError{Name: name, KeyHash: hash}
	}
	return v, nil
}

func noteVerifier(name string, pub ed25519.PublicKey) (note.Verifier, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: have %d bytes, want %d", ErrPublicKey, len(pub), ed25519.PublicKeySize)
	}
	vkey, err := note.NewEd25519VerifierKey(name, pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPublicKey, err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrSignerName, truncate(name), err)
	}
	return v, nil
}

// openSigned checks that b is a note signed by pub (under the signer name
// origin, unless it is "") and returns its text.
func openSigned(b []byte, pub ed25519.PublicKey, origin, what string) (string, error) {
	if len(pub) != ed25519.PublicKeySize {
		return "", fmt.Errorf("%w: have %d bytes, want %d", ErrPublicKey, len(pub), ed25519.PublicKeySize)
	}
	text, signed, err := splitNote(b, what)
	if err != nil {
		return "", err
	}
	if !signed {
		return text, fmt.Errorf("%w: %s is not signed", ErrBadSignature, what)
	}
	_, err = note.Open(b, keyVerifiers{pub: pub, origin: origin})
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case err == nil:
		return text, nil
	case errors.As(err, &unverified):
		var names []string
		for _, s := range unverified.Note.UnverifiedSigs {
			names = append(names, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
		}
		return text, fmt.Errorf("%w: %s is not signed by the trusted key (signed by %s)", ErrBadSignature, what, strings.Join(names, ", "))
	case errors.As(err, &invalid):
		return text, fmt.Errorf("%w: %s signature by %s+%08x does not verify", ErrBadSignature, what, invalid.Name, invalid.Hash)
	default:
		return text, fmt.Errorf("%w: %s: %v", ErrParse, what, err)
	}
}

// VerifyCheckpoint parses b and checks that it is signed by pub. On a bad
// signature it still returns the parsed checkpoint (when parseable) with an
// error wrapping ErrBadSignature.
func VerifyCheckpoint(b []byte, pub ed25519.PublicKey) (Checkpoint, error) {
	c, parseErr, sigErr := verifyCheckpoint(b, pub, "")
	if parseErr != nil {
		return Checkpoint{}, parseErr
	}
	return c, sigErr
}

// verifyCheckpoint separates the two ways a checkpoint can fail: not
// parseable (parseErr), or parseable with a bad signature (sigErr).
func verifyCheckpoint(b []byte, pub ed25519.PublicKey, origin string) (c Checkpoint, parseErr, sigErr error) {
	text, err := openSigned(b, pub, origin, "checkpoint")
	if err != nil && !errors.Is(err, ErrBadSignature) {
		return Checkpoint{}, err, nil
	}
	c, perr := parseCheckpointText(text)
	if perr != nil {
		return Checkpoint{}, perr, nil
	}
	return c, nil, err
}

// VerifyStoreHead parses b and checks that it is signed by pub, like
// VerifyCheckpoint.
func VerifyStoreHead(b []byte, pub ed25519.PublicKey) (StoreHead, error) {
	return verifyStoreHead(b, pub, "")
}

func verifyStoreHead(b []byte, pub ed25519.PublicKey, origin string) (StoreHead, error) {
	text, err := openSigned(b, pub, origin, "store head")
	if err != nil && !errors.Is(err, ErrBadSignature) {
		return StoreHead{}, err
	}
	h, perr := parseStoreHeadText(text)
	if perr != nil {
		return StoreHead{}, perr
	}
	return h, err
}

// MarshalPublicKey returns the public key file for pub under the signer
// name (format.go): one note verifier key line.
func MarshalPublicKey(name string, pub ed25519.PublicKey) ([]byte, error) {
	if _, err := noteVerifier(name, pub); err != nil {
		return nil, err
	}
	vkey, err := note.NewEd25519VerifierKey(name, pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPublicKey, err)
	}
	return []byte(vkey + "\n"), nil
}

// OriginPrefix starts every origin name (see OriginName).
const OriginPrefix = "continuum-"

// OriginName is the signer name a store's checkpoints and store heads are
// signed under, its origin: "continuum-" and the first 16 hex digits (8
// bytes) of the store id as the store holds it (storeID: 32 hex digits).
// A public key file names the origin it belongs to, so that a key of
// another store is told apart from a bad signature (VerifyOptions.Origin).
func OriginName(storeID string) string {
	if len(storeID) > 16 {
		storeID = storeID[:16]
	}
	return OriginPrefix + storeID
}

// SignerNames returns the names of the signatures that b, a checkpoint or
// store head as stored, carries, without checking them: none for an
// unsigned one. It fails, wrapping ErrParse, on a malformed note.
func SignerNames(b []byte) ([]string, error) {
	_, signed, err := splitNote(b, "note")
	if err != nil || !signed {
		return nil, err
	}
	_, err = note.Open(b, nil)
	var unverified *note.UnverifiedNoteError
	if !errors.As(err, &unverified) {
		return nil, fmt.Errorf("%w: note: %v", ErrParse, err)
	}
	names := make([]string, 0, len(unverified.Note.UnverifiedSigs))
	for _, s := range unverified.Note.UnverifiedSigs {
		names = append(names, s.Name)
	}
	return names, nil
}

// ParsePublicKey reads a public key file (format.go): exactly one note
// verifier key line, blank lines and '#' comments ignored. The key hash in
// the line is checked, so a damaged file is an error, not another key.
// ParsePublicKeyFile returns the origin name the line carries too.
func ParsePublicKey(b []byte) (ed25519.PublicKey, error) {
	_, key, err := ParsePublicKeyFile(b)
	return key, err
}

// ParsePublicKeyFile reads a public key file like ParsePublicKey and
// returns the signer name of its line as well: the origin the key belongs
// to (OriginName of the store it signs), for VerifyOptions.Origin.
func ParsePublicKeyFile(b []byte) (name string, key ed25519.PublicKey, err error) {
	found := 0
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		found++
		if found > 1 {
			return "", nil, fmt.Errorf("%w: public key file line %d: more than one key", ErrParse, i+1)
		}
		if _, err := note.NewVerifier(line); err != nil {
			return "", nil, fmt.Errorf("%w: public key file line %d: %v", ErrParse, i+1, err)
		}
		// NewVerifier checked the shape: name+hash+base64(alg || key).
		parts := strings.SplitN(line, "+", 3)
		raw, err := base64.StdEncoding.DecodeString(parts[2])
		if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 1 {
			return "", nil, fmt.Errorf("%w: public key file line %d: not an ed25519 key", ErrParse, i+1)
		}
		name, key = parts[0], ed25519.PublicKey(raw[1:])
	}
	if found == 0 {
		return "", nil, fmt.Errorf("%w: public key file holds no key", ErrParse)
	}
	return name, key, nil
}
