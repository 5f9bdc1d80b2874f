package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/continuumdb/continuum/blob"
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
	wantError(t, ts.do("GET", fmt.Sprintf("/v1/runs/r/blobs/%x/5", other), nil), 404, codeBlobNotFound, "hash")
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
