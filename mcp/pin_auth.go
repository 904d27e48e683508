package mcp

// ReadHeaderFile reads a credential file as --mcp-upstream-auth reads one:
// one header line "Name: value" (e.g. "Authorization: Bearer ..."), which
// must not be a header of the MCP transport or of HTTP framing. `toolgate
// mcp pin --header-file` sends it to the server it pins.
func ReadHeaderFile(file string) (name, value string, err error) {
	return readAuthHeader(file)
}
