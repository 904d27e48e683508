package httploop

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// plainSeeds are heads real clients send (the load generator, curl,
// Python's urllib and http.client, Node's fetch, Go's net/http client) and
// near misses of them.
var plainSeeds = []string{
	"POST /v1/evaluate HTTP/1.1\r\nHost: 127.0.0.1:8181\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/evaluate HTTP/1.1\r\nHost: localhost:8181\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\n{}\r\n",
	"POST /v1/evaluate?explain=true HTTP/1.1\r\nAccept-Encoding: identity\r\nContent-Length: 2\r\nHost: sidecar\r\nUser-Agent: Python-urllib/3.12\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{}",
	"POST /v1/evaluate HTTP/1.1\r\nhost: localhost\r\nconnection: keep-alive\r\ncontent-type: application/json\r\naccept: */*\r\naccept-language: *\r\nsec-fetch-mode: cors\r\nuser-agent: node\r\naccept-encoding: gzip, deflate\r\ncontent-length: 2\r\n\r\n{}",
	"GET /readyz HTTP/1.1\r\nHost: x\r\nUser-Agent: Go-http-client/1.1\r\nAccept-Encoding: gzip\r\n\r\n",
	"GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nX-A: 2\r\nX-Empty:\r\n\r\n",
	"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nTraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nContent-Length: 2\r\n\r\n{}GET / HTTP/1.1\r\nHost: x\r\n\r\n",
	"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{}",
	// Not plain: net/http reads these.
	"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
	"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
	"POST /v1/evaluate HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}",
	"POST http://x/v1/evaluate HTTP/1.1\r\nHost: y\r\n\r\n",
	"POST /v1/evaluate HTTP/1.1\nHost: x\n\n",
	"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
	"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: +2\r\n\r\n{}",
	"POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
}

// FuzzPlainHeadMatchesReadRequest holds readPlainHead to http.ReadRequest:
// whatever it reads, net/http reads to the same request, the same body
// and the same bytes left for the next request; whatever it refuses, it
// leaves unread.
func FuzzPlainHeadMatchesReadRequest(f *testing.F) {
	for _, s := range plainSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(raw), 4<<10)
		_, _ = br.Peek(min(len(raw), 4<<10))
		buffered := br.Buffered()
		got := readPlainHead(br, &plainStore{})
		if got == nil {
			if br.Buffered() != buffered {
				t.Fatalf("refused but consumed %d bytes", buffered-br.Buffered())
			}
			return
		}
		wbr := bufio.NewReader(bytes.NewReader(raw))
		want, err := http.ReadRequest(wbr)
		if err != nil {
			t.Fatalf("read as plain, but net/http refuses it: %v", err)
		}
		type view struct {
			Method, Proto, Host, RequestURI, Path, RawPath, RawQuery string
			ProtoMajor, ProtoMinor                                   int
			Header                                                   http.Header
			ContentLength                                            int64
			Close, NoBody                                            bool
		}
		see := func(r *http.Request) view {
			return view{r.Method, r.Proto, r.Host, r.RequestURI, r.URL.Path, r.URL.RawPath, r.URL.RawQuery,
				r.ProtoMajor, r.ProtoMinor, r.Header, r.ContentLength, r.Close, r.Body == http.NoBody}
		}
		if g, w := see(got), see(want); !reflect.DeepEqual(g, w) {
			t.Fatalf("plain read\n%+v\nnet/http read\n%+v", g, w)
		}
		if want.TransferEncoding != nil || want.Trailer != nil || want.URL.Host != "" || want.URL.Scheme != "" {
			t.Fatalf("read as plain, but net/http frames it otherwise: %+v", want)
		}
		gb, gerr := io.ReadAll(got.Body)
		wb, werr := io.ReadAll(want.Body)
		if !bytes.Equal(gb, wb) || (gerr == nil) != (werr == nil) {
			t.Fatalf("bodies: plain %q (%v), net/http %q (%v)", gb, gerr, wb, werr)
		}
		if gerr == nil {
			grest, _ := io.ReadAll(br)
			wrest, _ := io.ReadAll(wbr)
			if !bytes.Equal(grest, wrest) {
				t.Fatalf("left for the next request: plain %q, net/http %q", grest, wrest)
			}
		}
	})
}

func TestPlainHeads(t *testing.T) {
	read := func(raw string) *http.Request {
		br := bufio.NewReaderSize(strings.NewReader(raw), 4<<10)
		_, _ = br.Peek(min(len(raw), 4<<10))
		return readPlainHead(br, &plainStore{})
	}
	r := read(plainSeeds[2])
	if r == nil || r.Method != "POST" || r.URL.Path != "/v1/evaluate" || r.URL.RawQuery != "explain=true" ||
		r.Host != "sidecar" || !r.Close || r.ContentLength != 2 || r.Header.Get("User-Agent") != "Python-urllib/3.12" {
		t.Fatalf("urllib's request read as %+v", r)
	}
	if r := read(plainSeeds[5]); r == nil || !reflect.DeepEqual(r.Header["X-A"], []string{"1", "2"}) || r.Body != http.NoBody {
		t.Fatalf("repeated header: %+v", r)
	}
	// A body cut short is io.ErrUnexpectedEOF, as net/http's.
	if r := read(plainSeeds[7]); r == nil {
		t.Fatal("short body: not read")
	} else if _, err := io.ReadAll(r.Body); err != io.ErrUnexpectedEOF {
		t.Fatalf("short body: %v, want io.ErrUnexpectedEOF", err)
	}
	notPlain := map[string]string{
		"chunked":               plainSeeds[8],
		"two lengths":           plainSeeds[9],
		"expect":                plainSeeds[10],
		"HTTP/1.0":              plainSeeds[11],
		"absolute target":       plainSeeds[12],
		"bare LF":               plainSeeds[13],
		"folded header":         plainSeeds[14],
		"signed length":         plainSeeds[15],
		"two hosts":             plainSeeds[16],
		"no host":               "GET / HTTP/1.1\r\n\r\n",
		"head not all buffered": "POST / HTTP/1.1\r\nHost: x\r\n",
		"lower-case method":     "post / HTTP/1.1\r\nHost: x\r\n\r\n",
		"escaped path":          "GET /a%20b HTTP/1.1\r\nHost: x\r\n\r\n",
		"space before colon":    "GET / HTTP/1.1\r\nHost : x\r\n\r\n",
		"underscore in name":    "GET / HTTP/1.1\r\nHost: x\r\nX_A: 1\r\n\r\n",
		"control in value":      "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n",
		"non-ASCII value":       "GET / HTTP/1.1\r\nHost: x\r\nX-A: \xc3\xa9\r\n\r\n",
		"empty length":          "POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n",
		"huge length":           "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9999999999999999999\r\n\r\n",
		"connection upgrade":    "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n",
		"pragma":                "GET / HTTP/1.1\r\nHost: x\r\nPragma: no-cache\r\n\r\n",
		"trailer":               "GET / HTTP/1.1\r\nHost: x\r\nTrailer: X\r\n\r\n",
		"too many headers":      "GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-A: 1\r\n", maxPlainHeaders) + "\r\n",
	}
	for name, raw := range notPlain {
		if r := read(raw); r != nil {
			t.Errorf("%s: read as plain: %+v", name, r)
		}
	}
}
