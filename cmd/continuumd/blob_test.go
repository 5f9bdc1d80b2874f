package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/offline"
)

// TestBlobUploadDownload: a blob streamed up with chunked transfer
// encoding is stored once, referenced by a commit, and streamed down
// checked; an unknown blob is blob_not_found; a damaged one never reaches
// the client whole.
func TestBlobUploadDownload(t *testing.T) {
	ts := startServer(t, "", nil)
	ts.openRun("r")
	p, _ := ts.begin("r", nil)
	content := bytes.Repeat([]byte("<tr><td>row</td><td>of a large table</td></tr>\n"), 70000) // 3.3 MB
	upload := func() reply {
		pr, pw := io.Pipe()
		go func() {
			for off := 0; off < len(content); off += 100_000 { // the body in pieces of unknown total length
				pw.Write(content[off:min(off+100_000, len(content))])
			}
			pw.Close()
		}()
		req, err := http.NewRequest("POST", "http://continuumd"+p+"/blobs", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "text/html")
		resp, err := ts.cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		r := reply{status: resp.StatusCode, raw: raw}
		if err := json.Unmarshal(raw, &r.body); err != nil || r.status != 200 {
			t.Fatalf("upload: %d %s", resp.StatusCode, raw)
		}
		return r
	}
	up := upload()
	h := blob.Hash(content)
	if up.str("hash") != hex.EncodeToString(h[:]) || up.num("size") != float64(len(content)) || up.str("media_type") != "text/html" {
		t.Fatalf("upload answered %s", up)
	}
	if again := upload(); again.str("value") != up.str("value") {
		t.Fatal("the same bytes uploaded twice have two references")
	}
	names, _ := os.ReadDir(filepath.Join(ts.dir, blob.Dir))
	if len(names) != 1 {
		t.Fatalf("%d files in blobs/ after two uploads of the same bytes", len(names))
	}
	ts.commit(p, map[string]any{"op": "set", "key": "page", "value": up.str("value")})
	st := ts.must(200, "GET", "/v1/runs/r/state", nil)
	if mem, _ := st.body["memory"].(map[string]any); mem["page"] != up.str("value") {
		t.Fatalf("state memory %v", st.body["memory"])
	}

	get := func(path string) (*http.Response, []byte, error) {
		resp, err := ts.cl.Get("http://continuumd" + path)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	path := fmt.Sprintf("/v1/runs/r/blobs/%s/%d?media_type=text/html", up.str("hash"), len(content))
	resp, b, err := get(path)
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(b, content) || resp.Header.Get("Content-Type") != "text/html" {
		t.Fatalf("download: %v, status %v, %d bytes", err, resp.StatusCode, len(b))
	}
	other := blob.Hash([]byte("other"))
	nf := ts.do("GET", fmt.Sprintf("/v1/runs/r/blobs/%x/5", other), nil)
	wantError(t, nf, 404, codeBlobNotFound, "hash")
	if strings.Contains(fmt.Sprint(nf.body), ts.dir) {
		t.Fatalf("the answer names the server's store directory: %s", nf)
	}
	// The blob's hash with another size names no blob: the caller's
	// mistake, not a damaged store.
	wantError(t, ts.do("GET", fmt.Sprintf("/v1/runs/r/blobs/%s/%d", up.str("hash"), len(content)+1), nil), 404, codeBlobNotFound, "hash")
	wantError(t, ts.do("GET", "/v1/runs/r/blobs/XYZ/5", nil), 400, codeBadRequest, "hash")
	wantError(t, ts.do("GET", fmt.Sprintf("/v1/runs/r/blobs/%x/-1", other), nil), 400, codeBadRequest, "size")
	wantError(t, ts.do("GET", fmt.Sprintf("/v1/runs/nope/blobs/%x/5", other), nil), 404, codeRunNotFound, "run")

	// A chunk damaged on disk: the header and trailer check out, so the
	// answer begins, and ends short.
	name := filepath.Join(ts.dir, blob.Dir, names[0].Name())
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 1
	if err := os.WriteFile(name, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	resp, b, err = get(path)
	if err == nil && resp.StatusCode == 200 && len(b) == len(content) {
		t.Fatal("a damaged blob was downloaded whole")
	}
}

// TestBlobServerKilled: the server (with --blob-threshold) is SIGKILLed at
// a seeded moment while it writes blobs (a streamed upload, a commit of a
// large value) and commits; after each restart every reference in the
// run's state downloads whole and checked, and at the end the store
// verifies and a GC leaves no more blob files than references.
func TestBlobServerKilled(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	dir := shortTempDir(t)
	store, sock := filepath.Join(dir, "s"), filepath.Join(dir, "s.sock")
	p := startProc(t, "--store", store, "--socket", sock, "--blob-threshold", "4096", "--max-body", "8388608")
	cl := unixClient(t, sock)
	rounds := 6
	if testing.Short() {
		rounds = 3
	}
	content := func(i int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("<li>item %d of a long page</li>\n", i)), 60000+i) // ~2 MB
	}
	cl.openRun("r")
	for i := range rounds {
		done := make(chan struct{})
		stage := "begin"
		go func() {
			defer close(done)
			r, err := cl.send("POST", "/v1/runs/r/attempts", map[string]any{"takeover": true})
			if err != nil || r.status != 201 {
				stage = fmt.Sprintf("begin: %v %v", err, r)
				return
			}
			stage = "upload"
			pth := "/v1/runs/r/attempts/" + r.str("attempt")
			req, _ := http.NewRequest("POST", "http://continuumd"+pth+"/blobs", bytes.NewReader(content(i)))
			resp, err := cl.cl.Do(req)
			if err != nil {
				return
			}
			var up map[string]any
			json.NewDecoder(resp.Body).Decode(&up)
			resp.Body.Close()
			v, _ := up["value"].(string)
			stage = "commit"
			cr, err := cl.send("POST", pth+"/commit", map[string]any{"delta": []map[string]any{
				{"op": "set", "key": fmt.Sprint("up-", i), "value": v},
				{"op": "set", "key": fmt.Sprint("big-", i), "value": string(content(1000 + i))},
			}})
			stage = fmt.Sprintf("committed: %v %v", err, cr.status)
		}()
		// The kill falls in the i-th of rounds slices of 400 ms: early rounds
		// cut the upload, later ones the commit or after it.
		slice := 400_000 / rounds
		time.Sleep(time.Duration(i*slice+rng.IntN(slice)) * time.Microsecond)
		p.kill()
		<-done
		cl.cl.CloseIdleConnections()
		p.start()
		st := cl.must(200, "GET", "/v1/runs/r/state", nil)
		mem, _ := st.body["memory"].(map[string]any)
		for k, v := range mem {
			ref, ok := blob.ParseValue(fmt.Sprint(v))
			if !ok {
				t.Fatalf("round %d: memory %s holds %d bytes inline", i, k, len(fmt.Sprint(v)))
			}
			resp, err := cl.cl.Get(fmt.Sprintf("http://continuumd/v1/runs/r/blobs/%x/%d", ref.Hash, ref.Size))
			if err != nil {
				t.Fatalf("round %d: download %s: %v", i, k, err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || blob.Hash(b) != ref.Hash {
				t.Fatalf("round %d: download %s: status %d, %d bytes, %v", i, k, resp.StatusCode, len(b), err)
			}
		}
		if strings.HasPrefix(stage, "committed: <nil> 200") && (mem[fmt.Sprint("up-", i)] == nil || mem[fmt.Sprint("big-", i)] == nil) {
			t.Fatalf("round %d: an acknowledged commit lost its values: memory %v", i, mem)
		}
		t.Logf("round %d: killed at %s; %d values in blobs after the restart", i, stage, len(mem))
	}
	cl.must(200, "POST", "/v1/gc", nil)
	st := cl.must(200, "GET", "/v1/runs/r/state", nil)
	mem, _ := st.body["memory"].(map[string]any)
	p.kill()
	rep, err := offline.Verify(context.Background(), store, &offline.VerifyOptions{Deep: true})
	if err != nil || !rep.OK {
		t.Fatalf("verify: %v %+v", err, rep.Failures)
	}
	names, _ := os.ReadDir(filepath.Join(store, blob.Dir))
	if len(names) > len(mem) {
		t.Fatalf("after GC, %d files in blobs/ for %d references", len(names), len(mem))
	}
}
