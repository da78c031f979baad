package bench

import (
	"fmt"
	"io"
	"sync"
)

// progress writes one self-overwriting status line to a terminal; with no writer it does
// nothing.
type progress struct {
	mu sync.Mutex
	w  io.Writer
	on bool // a line is showing
}

func newProgress(w io.Writer) *progress { return &progress{w: w} }

// phase replaces the status line.
func (p *progress) phase(format string, args ...any) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = fmt.Fprintf(p.w, "\r\033[K"+format, args...)
	p.on = true
}

// clear removes the status line.
func (p *progress) clear() {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		_, _ = fmt.Fprint(p.w, "\r\033[K")
		p.on = false
	}
}
