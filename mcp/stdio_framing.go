package mcp

import (
	"bytes"
	"errors"
)

// The framing the stdio guard accepts: a message is one line ending in
// "\n", with at most one "\r" right before it. The guard decides a line as
// one JSON-RPC message; the server must read the same line as that one
// message, and MCP's stdio readers do not all end lines where the guard
// does:
//
//   - the Python SDK (mcp/server/stdio.py) iterates
//     TextIOWrapper(sys.stdin.buffer, encoding="utf-8") by line, in
//     universal-newlines mode: "\r" ends a line as "\n" and "\r\n" do, and a
//     line that does not validate is skipped, the next one read;
//   - the Go SDK (go-sdk mcp/transport.go, ioConn) reads a stream of JSON
//     values with json.Decoder and accepts "\r" as well as "\n" after each,
//     so "{...}\r{...}" is two messages;
//   - the TypeScript SDK (shared/stdio.ts, ReadBuffer) splits at "\n" only
//     and drops one "\r" before it. (Readers on Java's BufferedReader.readLine
//     or .NET's TextReader.ReadLine end lines at "\r" too.)
//
// So a "\r" anywhere but just before the final "\n" is refused: JSON reads
// it as whitespace between tokens, and a line holding
// {"method":"notifications/x","params":{"p":\r{...tools/call...}\r}} is one
// notification to the guard and a tools/call to a server reading as
// Python's. Nothing else a known reader ends a line at can pass the JSON
// reader (jsonrpc.Parse) outside a string: a second value on the line, the
// control bytes \x0b, \x0c and \x1c-\x1e, and U+0085, U+2028 and U+2029 are
// not JSON whitespace, so the line is refused as not JSON. Inside strings
// those characters are valid JSON, and only str.splitlines splits there,
// which no SDK frames stdio with (TextIOWrapper does not:
// cli TestMCPStdioRefusesCarriageReturnsPythonSplitsAt runs a call holding
// U+2028 and U+0085 through a reader built as Python's).
var errBareCR = errors.New(`toolgate: the line holds a "\r" before its end; MCP servers reading stdio as Python's or Go's SDK end a message there, so the line could be read as other messages than the one decided; not forwarded`)

// checkStdioFraming refuses a line (with its "\n") holding a "\r" other
// than one just before the final "\n".
func checkStdioFraming(line []byte) error {
	i := bytes.IndexByte(line, '\r')
	if i < 0 || (i == len(line)-2 && line[i+1] == '\n') {
		return nil
	}
	return errBareCR
}
