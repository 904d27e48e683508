// Package jsonrpc reads the JSON-RPC 2.0 messages of an MCP POST body or
// stdio line as the MCP proxy decides them: one pass over the bytes
// (scan.go) that checks the JSON as encoding/json would and refuses
// ambiguous keys in every object, then the few values a decision reads,
// read into Message and ToolCall as encoding/json would read them
// (body.go). A differential test and a fuzzer hold it to encoding/json
// (scan_test.go, scan_ref_test.go).
package jsonrpc
