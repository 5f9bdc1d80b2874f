package tamper

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// copyTree copies the directory tree src to dst (which must not exist).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// BuildHistory makes a store in root/store of runs runs with atoms atoms
// each (one certified action per atom), with the suite's options, closed
// once at the end: a long history for restart measurements.
func BuildHistory(ctx context.Context, root string, seed int64, runs, atoms int) (*Store, error) {
	b := &builder{dir: filepath.Join(root, "store"), work: root, seed: seed, keySeed: make([]byte, ed25519.SeedSize)}
	b.st = &Store{Dir: b.dir, KeySeed: b.keySeed, PublicKey: ed25519.NewKeyFromSeed(b.keySeed).Public().(ed25519.PublicKey)}
	if err := b.open(); err != nil {
		return nil, err
	}
	for i := range runs {
		b.st.Runs = append(b.st.Runs, fmt.Sprintf("run-%03d", i))
	}
	for range atoms {
		for _, id := range b.st.Runs {
			if err := b.atom(ctx, id); err != nil {
				b.db.Close()
				return nil, err
			}
		}
	}
	if err := b.closeLast(); err != nil {
		return nil, err
	}
	return b.st, nil
}

// storeFile is where Save writes a store's description, beside it.
const storeFile = "store.json"

// Save copies the store and its older copies under root (root/store,
// root/older-N) and describes them in root/store.json, for Load.
func (s *Store) Save(root string) error {
	c := *s
	c.Dir = "store"
	if err := copyTree(s.Dir, filepath.Join(root, c.Dir)); err != nil {
		return err
	}
	c.Older = nil
	for _, o := range s.Older {
		name := filepath.Base(o)
		if err := copyTree(o, filepath.Join(root, name)); err != nil {
			return err
		}
		c.Older = append(c.Older, name)
	}
	return writeAnswer(filepath.Join(root, storeFile), &c, "")
}

// Load reads a store saved by Save under root.
func Load(root string) (*Store, error) {
	var s Store
	if err := readAnswer(filepath.Join(root, storeFile), &s); err != nil {
		return nil, fmt.Errorf("tamper: load a saved store: %w", err)
	}
	s.Dir = filepath.Join(root, s.Dir)
	for i, o := range s.Older {
		s.Older[i] = filepath.Join(root, o)
	}
	return &s, nil
}
