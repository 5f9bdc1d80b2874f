package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/continuumdb/continuum/internal/workload"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

func init() {
	register(peer{name: "sqlite", open: openSQLite})
	register(peer{name: "sqlitecheckpoint", open: openSQLiteCheckpoint, quadratic: true})
}

// openSQLiteDB opens path with the settings an application that wants
// durability uses: WAL journal, synchronous=FULL (fsync the WAL at every
// commit). One connection: SQLite has one writer at a time anyway, and a
// pool of writers only adds SQLITE_BUSY retries and sleeps.
func openSQLiteDB(path string, opts Options) (*sql.DB, error) {
	syncMode := "FULL"
	if opts.NoSync {
		syncMode = "OFF"
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+syncMode+")")
	q.Add("_pragma", "busy_timeout(10000)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if mode != "wal" {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: journal_mode is %q, want wal", path, mode)
	}
	return db, nil
}

// sqliteStore keeps intents, certificates, deltas and snapshots in four
// tables keyed by (run, seq); each INSERT is its own transaction, so each
// is one fsync of the WAL.
type sqliteStore struct {
	db                        *sql.DB
	intent, cert, delta, snap *sql.Stmt
}

func openSQLite(dir string, opts Options) (Store, error) {
	db, err := openSQLiteDB(filepath.Join(dir, "agent.db"), opts)
	if err != nil {
		return nil, err
	}
	s := &sqliteStore{db: db}
	for _, t := range []struct {
		name string
		stmt **sql.Stmt
	}{{"intents", &s.intent}, {"certs", &s.cert}, {"deltas", &s.delta}, {"snapshots", &s.snap}} {
		if _, err := db.Exec("CREATE TABLE IF NOT EXISTS " + t.name + " (run TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL, PRIMARY KEY (run, seq))"); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite: create table %s: %w", t.name, err)
		}
		if *t.stmt, err = db.Prepare("INSERT INTO " + t.name + " (run, seq, body) VALUES (?, ?, ?)"); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite: prepare insert into %s: %w", t.name, err)
		}
	}
	return s, nil
}

func (s *sqliteStore) Atom(ctx context.Context, st *Step) error {
	a := st.Atom
	for _, r := range []struct {
		what string
		stmt *sql.Stmt
		body []byte
	}{{"intent", s.intent, st.Intent}, {"cert", s.cert, st.Cert}, {"delta", s.delta, st.Delta}} {
		if _, err := r.stmt.ExecContext(ctx, a.Run, int64(a.Seq), r.body); err != nil {
			return fmt.Errorf("sqlite: run %q seq %d %s: %w", a.Run, a.Seq, r.what, err)
		}
	}
	return nil
}

func (s *sqliteStore) Snapshot(ctx context.Context, run string, seq uint64, state *workload.State) error {
	b, err := state.Encode()
	if err != nil {
		return err
	}
	if _, err := s.snap.ExecContext(ctx, run, int64(seq), b); err != nil {
		return fmt.Errorf("sqlite: run %q snapshot %d: %w", run, seq, err)
	}
	return nil
}

func (s *sqliteStore) Restore(ctx context.Context, run string) (*workload.State, error) {
	var snap []byte
	var snapSeq int64
	err := s.db.QueryRowContext(ctx, "SELECT seq, body FROM snapshots WHERE run = ? ORDER BY seq DESC LIMIT 1", run).Scan(&snapSeq, &snap)
	if errors.Is(err, sql.ErrNoRows) {
		snap, snapSeq, err = nil, 0, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: restore %q: latest snapshot: %w", run, err)
	}
	st, err := startState(run, snap)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if snap != nil && st.Seq != uint64(snapSeq) {
		return nil, fmt.Errorf("sqlite: %w: run %q snapshot row %d holds seq %d", errCorrupt, run, snapSeq, st.Seq)
	}
	rows, err := s.db.QueryContext(ctx, "SELECT seq, body FROM deltas WHERE run = ? AND seq > ? ORDER BY seq", run, snapSeq)
	if err != nil {
		return nil, fmt.Errorf("sqlite: restore %q: deltas: %w", run, err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var body []byte
		if err := rows.Scan(&seq, &body); err != nil {
			return nil, fmt.Errorf("sqlite: restore %q: %w", run, err)
		}
		if err := applyDelta(st, uint64(seq), body); err != nil {
			return nil, fmt.Errorf("sqlite: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: restore %q: %w", run, err)
	}
	if st.Seq == 0 {
		return nil, fmt.Errorf("sqlite: %w: %q", errNoRun, run)
	}
	return st, nil
}

func (s *sqliteStore) Close() error { return s.db.Close() }

// sqliteCheckpoint is the checkpoint-saver layout of agent frameworks
// (LangGraph's SqliteSaver and its kin): at every step, the whole
// accumulated state is serialized and inserted as one row, in its own
// transaction. Restore reads the latest row. There is no intent or
// certificate: an interrupted tool call is simply made again.
type sqliteCheckpoint struct {
	db  *sql.DB
	put *sql.Stmt
}

func openSQLiteCheckpoint(dir string, opts Options) (Store, error) {
	db, err := openSQLiteDB(filepath.Join(dir, "checkpoints.db"), opts)
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS checkpoints (thread_id TEXT NOT NULL, step INTEGER NOT NULL, checkpoint BLOB NOT NULL, PRIMARY KEY (thread_id, step))"); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitecheckpoint: create table: %w", err)
	}
	put, err := db.Prepare("INSERT INTO checkpoints (thread_id, step, checkpoint) VALUES (?, ?, ?)")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitecheckpoint: prepare: %w", err)
	}
	return &sqliteCheckpoint{db: db, put: put}, nil
}

func (s *sqliteCheckpoint) Atom(ctx context.Context, st *Step) error {
	b, err := st.State.Encode()
	if err != nil {
		return fmt.Errorf("sqlitecheckpoint: run %q seq %d: encode state: %w", st.Atom.Run, st.Atom.Seq, err)
	}
	if _, err := s.put.ExecContext(ctx, st.Atom.Run, int64(st.Atom.Seq), b); err != nil {
		return fmt.Errorf("sqlitecheckpoint: run %q seq %d: %w", st.Atom.Run, st.Atom.Seq, err)
	}
	return nil
}

// Snapshot does nothing: every step already is a full checkpoint.
func (s *sqliteCheckpoint) Snapshot(context.Context, string, uint64, *workload.State) error {
	return nil
}

func (s *sqliteCheckpoint) Restore(ctx context.Context, run string) (*workload.State, error) {
	var step int64
	var b []byte
	err := s.db.QueryRowContext(ctx, "SELECT step, checkpoint FROM checkpoints WHERE thread_id = ? ORDER BY step DESC LIMIT 1", run).Scan(&step, &b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlitecheckpoint: %w: %q", errNoRun, run)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitecheckpoint: restore %q: %w", run, err)
	}
	st, err := startState(run, b)
	if err != nil {
		return nil, fmt.Errorf("sqlitecheckpoint: %w", err)
	}
	if st.Seq != uint64(step) {
		return nil, fmt.Errorf("sqlitecheckpoint: %w: run %q row of step %d holds seq %d", errCorrupt, run, step, st.Seq)
	}
	return st, nil
}

func (s *sqliteCheckpoint) Close() error { return s.db.Close() }
