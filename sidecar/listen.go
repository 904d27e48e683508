package sidecar

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
)

// listen opens host:port, or a Unix socket for unix:/path. A socket file
// left by a previous process is removed first; any other file is not.
func listen(addr string) (net.Listener, error) {
	path, isUnix := strings.CutPrefix(addr, unixPrefix)
	if !isUnix {
		return net.Listen("tcp", addr)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return net.Listen("unix", path)
}
