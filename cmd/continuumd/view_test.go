package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/continuumdb/continuum/engine"
)

// TestViewNeedsAdminToken: with scoped tokens and no admin token the view
// would show every run to anyone who reaches the listener; it stays off,
// and /view/ is the API's (which refuses a request without a token). With
// the admin token it is mounted and refuses a request without it.
func TestViewNeedsAdminToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	log := slog.New(slog.DiscardHandler)
	db, err := engine.Open(dir, &engine.Options{Logger: log, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	file := filepath.Join(t.TempDir(), "tokens")
	makeToken(t, file, "agent7", "read,write", "agent-7-")
	b, err := readSecretFile("--tokens", file)
	if err != nil {
		t.Fatal(err)
	}
	set, err := parseTokens(b, file)
	if err != nil {
		t.Fatal(err)
	}
	const apiStatus = 299
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(apiStatus) })
	get := func(h http.Handler) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", viewPrefix, nil))
		return rec.Code
	}

	cfg := testConfig(dir)
	cfg.tokens = set
	if code := get(withView(newServer(db, cfg, log), api, nil, nil, false)); code != apiStatus {
		t.Fatalf("scoped tokens only: /view/ answered %d, want the API's %d (the view off)", code, apiStatus)
	}

	cfg.token = []byte("admin-token-0123456789abcdef")
	code := get(withView(newServer(db, cfg, log), api, nil, nil, false))
	if code == apiStatus || code == http.StatusOK {
		t.Fatalf("admin token set: /view/ without a token answered %d, want the view's refusal", code)
	}

	// Guessing the token through the view is limited as through the API:
	// after authBurst refusals the address is answered 429, the right
	// token too, and so is the API behind the same limiter.
	s := newServer(db, cfg, log)
	h := withView(s, s.handler(), nil, nil, false)
	try := func(target string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		return rec
	}
	for i := range authBurst {
		if rec := try(viewPrefix + "?token=wrong-guess-" + strconv.Itoa(i)); rec.Code != http.StatusUnauthorized {
			t.Fatalf("view guess %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	for _, target := range []string{viewPrefix + "?token=" + string(cfg.token), "/v1/health"} {
		rec := try(target)
		var body map[string]any
		json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != http.StatusTooManyRequests || errorCode(body) != codeAuthRateLimited || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("%s after %d refused guesses: %d %s", target, authBurst, rec.Code, rec.Body)
		}
	}
}
