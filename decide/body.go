package decide

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// MaxRequestBytes bounds a request body: an evaluate request, or a POST to
// the MCP proxy.
const MaxRequestBytes = 1 << 20

// maxPooledBuffer keeps one huge request from pinning a megabyte per pooled
// buffer forever.
const maxPooledBuffer = 64 << 10

// Buffers are the per-request scratch space: the body as read and the
// response as encoded, both reused across requests.
type Buffers struct {
	In  []byte
	Out []byte
	// reserved is what In holds of --max-body-bytes-in-flight: its
	// capacity once that is past maxPooledBuffer, else 0.
	reserved int64
	// probe is one byte of scratch for ReadBody to see the end of a body
	// that fills in exactly.
	probe [1]byte
}

// BodyBudget is --max-body-bytes-in-flight: what request bodies being read
// and decided may hold beyond the pooled buffers. Past it a request is
// denied OVERLOADED rather than read.
type BodyBudget struct {
	held      atomic.Int64
	budget    int64
	pool      sync.Pool
	onReserve func(inFlight int64)
}

// Held is what bodies hold of the budget now.
func (bb *BodyBudget) Held() int64 { return bb.held.Load() }

// Budget is --max-body-bytes-in-flight.
func (bb *BodyBudget) Budget() int64 { return bb.budget }

// Get is a pooled Buffers; Put returns it.
func (bb *BodyBudget) Get() *Buffers {
	if b, ok := bb.pool.Get().(*Buffers); ok {
		return b
	}
	return new(Buffers)
}

// Put releases the request's body reservation and pools b, unless a
// buffer grew past maxPooledBuffer: then it is left to the collector, so
// idle memory does not stay at the high-water mark.
func (bb *BodyBudget) Put(b *Buffers) {
	bb.Release(b)
	if cap(b.In) > maxPooledBuffer || cap(b.Out) > maxPooledBuffer {
		return
	}
	bb.pool.Put(b)
}

// Release returns what b holds of the budget.
func (bb *BodyBudget) Release(b *Buffers) {
	if b.reserved > 0 {
		bb.held.Add(-b.reserved)
		b.reserved = 0
	}
}

// reserve is asked before b.In grows to newCap bytes. Buffers up to
// maxPooledBuffer are free (at most one per connection, bounded by
// --max-connections); past it the request holds its whole capacity against
// the budget, and is refused when that would exceed it.
func (bb *BodyBudget) reserve(b *Buffers, newCap int) bool {
	if newCap <= maxPooledBuffer {
		return true
	}
	need := int64(newCap) - b.reserved
	for {
		held := bb.held.Load()
		if held+need > bb.budget {
			return false
		}
		if bb.held.CompareAndSwap(held, held+need) {
			b.reserved = int64(newCap)
			if bb.onReserve != nil {
				bb.onReserve(held + need)
			}
			return true
		}
	}
}

// ErrBodyBudget ends a read whose buffer would take the request bodies
// being read past --max-body-bytes-in-flight.
var ErrBodyBudget = errors.New("request bodies in flight are at --max-body-bytes-in-flight")

// Read appends the whole body r to dst (b.In's storage for the sidecar's
// own reads), keeping the slice for reuse, and stores it in b.In. The
// buffer grows to size at once when that is known (a Content-Length; -1
// when not), else by doubling, and never past limit: a longer body is r's
// to refuse. Before each growth the budget is asked for the new capacity;
// a refusal ends the read with ErrBodyBudget, before anything is
// allocated.
func (bb *BodyBudget) Read(b *Buffers, dst []byte, r io.Reader, size, limit int) error {
	var err error
	b.In, err = readBody(dst, r, size, limit, b.probe[:], func(newCap int) bool { return bb.reserve(b, newCap) })
	return err
}

// readBody appends the whole body to dst; see BodyBudget.Read. probe is
// one byte of scratch to see the end of a body that fills the buffer at
// limit.
func readBody(dst []byte, r io.Reader, size, limit int, probe []byte, reserve func(newCap int) bool) ([]byte, error) {
	for {
		if len(dst) == cap(dst) || size > cap(dst) {
			if cap(dst) >= limit {
				n, err := r.Read(probe)
				switch {
				case n > 0:
					return dst, fmt.Errorf("the body is longer than %d bytes", limit)
				case err == io.EOF:
					return dst, nil
				case err != nil:
					return dst, err
				}
				continue
			}
			newCap := min(max(2*cap(dst), 512, size), limit)
			if !reserve(newCap) {
				return dst, ErrBodyBudget
			}
			grown := make([]byte, len(dst), newCap)
			copy(grown, dst)
			dst = grown
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err != nil {
			if err == io.EOF {
				return dst, nil
			}
			return dst, err
		}
	}
}
