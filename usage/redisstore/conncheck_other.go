//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd && !solaris && !illumos

package redisstore

import "net"

// alive cannot look into a connection on this platform: a closed one
// fails its next command, as it would with go-redis here.
func alive(net.Conn) bool { return true }
