package decisionlog

import (
	"bufio"
	"io"
	"time"
)

// writerSinkNap is how long the sink rests after the queue runs dry
// before it waits on the queue again. A sink waiting on the queue is woken
// by the next decision's send, and waking it makes the deciding goroutine
// wake an idle thread too: on this kind of machine tens of microseconds on
// every decision's path. Resting, it takes whatever arrived meanwhile in
// one go; a line is at most this much later.
const writerSinkNap = 5 * time.Millisecond

// runWriterSink writes one line per event, flushing whenever the queue runs
// dry so lines appear promptly at low rates and in large writes at high ones.
func runWriterSink(k *sink, w io.Writer, format *lineFormat) {
	defer close(k.stopped)
	bw := bufio.NewWriterSize(w, 64<<10)
	nap := time.NewTimer(writerSinkNap)
	nap.Stop()
	var line []byte
	write := func(ev *Event) {
		line = append(appendEvent(line[:0], ev, format), '\n')
		_, _ = bw.Write(line)
	}
	for {
		select {
		case ev := <-k.queue:
			k.take(&ev)
			write(&ev)
			if len(k.queue) == 0 {
				_ = bw.Flush()
				nap.Reset(writerSinkNap)
				select {
				case <-nap.C:
				case <-k.stop: // handled by the next select
					nap.Stop()
				}
			}
		case <-k.stop:
			for len(k.queue) > 0 { // this goroutine is the only reader
				ev := <-k.queue
				k.take(&ev)
				write(&ev)
			}
			_ = bw.Flush()
			return
		}
	}
}
