package sidecar

import (
	"bufio"
	"io"
)

// runWriterSink writes one line per event, flushing whenever the queue runs
// dry so lines appear promptly at low rates and in large writes at high ones.
func runWriterSink(k *sink, w io.Writer, format *lineFormat) {
	defer close(k.stopped)
	bw := bufio.NewWriterSize(w, 64<<10)
	var line []byte
	write := func(ev *event) {
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
