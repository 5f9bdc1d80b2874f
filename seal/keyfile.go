package seal

// The keyring file: how a user hands a StaticKeyring to a tool
// (continuumctl --keyring FILE). Text, one directive per line:
//
//	continuum-keyring 1
//	current ID
//	key ID HEX
//	...
//
// The first line names the format and its version. "key" lines give each
// key-encryption key by id, as 64 hex digits (32 bytes); ids are 1 to
// MaxKeyID bytes without spaces, each once. "current" names the key that
// wraps new data keys (exactly once, one of the keys). Blank lines and
// lines starting with # are ignored. The file is a secret: keep it 0600,
// outside the store.

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

const keyringFileHeader = "continuum-keyring 1"

// ParseKeyringFile reads a keyring file. An error names the line and what
// is wrong with it, never a key's bytes.
func ParseKeyringFile(b []byte) (*StaticKeyring, error) {
	keys := map[string][]byte{}
	current := ""
	header := false
	for i, line := range strings.Split(string(b), "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !header {
			if line != keyringFileHeader {
				return nil, fmt.Errorf("seal: keyring file: line %d: want %q first", n, keyringFileHeader)
			}
			header = true
			continue
		}
		f := strings.Fields(line)
		switch {
		case f[0] == "current" && len(f) == 2:
			if current != "" {
				return nil, fmt.Errorf("seal: keyring file: line %d: a second current key", n)
			}
			current = f[1]
		case f[0] == "key" && len(f) == 3:
			if _, dup := keys[f[1]]; dup {
				return nil, fmt.Errorf("seal: keyring file: line %d: key %q a second time", n, f[1])
			}
			k, err := hex.DecodeString(f[2])
			if err != nil || len(k) != KeySize {
				return nil, fmt.Errorf("seal: keyring file: line %d: key %q is not %d hex digits", n, f[1], 2*KeySize)
			}
			keys[f[1]] = k
		default:
			return nil, fmt.Errorf("seal: keyring file: line %d: want \"current ID\" or \"key ID HEX\"", n)
		}
	}
	switch {
	case !header:
		return nil, fmt.Errorf("seal: keyring file: empty (want %q first)", keyringFileHeader)
	case current == "":
		return nil, fmt.Errorf("seal: keyring file: no current key")
	}
	ring, err := NewKeyring(keys, current)
	for _, k := range keys {
		clear(k)
	}
	if err != nil {
		return nil, fmt.Errorf("seal: keyring file: %w", err)
	}
	return ring, nil
}

// AppendKeyringFile appends the keyring file of keys (id -> 32 bytes),
// current wrapping new data keys, keys in order of id.
func AppendKeyringFile(dst []byte, keys map[string][]byte, current string) []byte {
	w := bytes.NewBuffer(dst)
	fmt.Fprintf(w, "%s\ncurrent %s\n", keyringFileHeader, current)
	ids := make([]string, 0, len(keys))
	for id := range keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(w, "key %s %x\n", id, keys[id])
	}
	return w.Bytes()
}
