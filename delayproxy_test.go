package taskorch_test

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// delayProxy is a TCP proxy in front of PostgreSQL that hands the server's bytes to the client
// late, by minDelay to maxDelay (order kept): a slow network on the way back. The client's bytes
// go through at once. A statement the client gives up on (its context cancelled) has then
// usually been executed and committed by the server before the client stops waiting for it: the
// window in which a cancelled claim commits on the server and is thrown away by the client is
// the delay, not luck.
//
// It reads the protocol enough to see the claims (statements calling queues.claim_tasks):
// ClaimsInFlight counts those sent whose answer (up to ReadyForQuery) has not been handed to the
// client yet, and CutShort the connections a client closed right after a claim, without a
// request after it: what pgx does with a connection whose query's context was cancelled (pool
// connections are not otherwise closed while a test runs). It expects plain-text connections
// (sslmode=disable).
type delayProxy struct {
	ln                 net.Listener
	target             string
	minDelay, maxDelay time.Duration

	mu    sync.Mutex
	conns map[*proxyConn]struct{}
	rnd   *rand.Rand

	cutShort  atomic.Int64
	claimSent chan struct{} // a claim was just sent (the latest one; never blocks the proxy)
	wg        sync.WaitGroup
}

// startDelayProxy listens on 127.0.0.1 and forwards to target (host:port) until the test ends.
func startDelayProxy(t *testing.T, target string, minDelay, maxDelay time.Duration) *delayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &delayProxy{ln: ln, target: target, minDelay: minDelay, maxDelay: maxDelay,
		conns: map[*proxyConn]struct{}{}, rnd: rand.New(rand.NewPCG(1, 2)), claimSent: make(chan struct{}, 1)}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Port is the proxy's port on 127.0.0.1.
func (p *delayProxy) Port() uint16 { return uint16(p.ln.Addr().(*net.TCPAddr).Port) }

// ClaimsInFlight is how many claims have been sent and not yet fully answered to their client.
func (p *delayProxy) ClaimsInFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		n += c.claimsOutstanding()
	}
	return n
}

// ClaimSent delivers a value when a claim has been sent to the server since the last receive:
// its answer, delayed by at least minDelay, is then in flight.
func (p *delayProxy) ClaimSent() <-chan struct{} { return p.claimSent }

func (p *delayProxy) noteClaimSent() {
	select {
	case p.claimSent <- struct{}{}:
	default:
	}
}

// CutShort is how many connections were closed by their client with a claim as their last
// request: claims whose context was cancelled while they were in flight. The database may have
// committed them.
func (p *delayProxy) CutShort() int64 { return p.cutShort.Load() }

func (p *delayProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.closeBoth()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *delayProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &proxyConn{p: p, client: client, server: server, stmts: map[string]bool{}, chunks: make(chan delayedChunk, 1024),
			outstanding: []bool{false}} // the startup, answered by a ReadyForQuery too
		p.mu.Lock()
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(c.clientToServer)
		p.wg.Go(c.serverReader)
		p.wg.Go(c.serverWriter)
	}
}

func (p *delayProxy) releaseAt(after time.Time) time.Time {
	p.mu.Lock()
	d := p.minDelay + time.Duration(p.rnd.Int64N(int64(p.maxDelay-p.minDelay)+1))
	p.mu.Unlock()
	return after.Add(d)
}

type delayedChunk struct {
	data []byte
	at   time.Time
}

// proxyConn is one client connection and its server connection.
type proxyConn struct {
	p              *delayProxy
	client, server net.Conn
	chunks         chan delayedChunk // server bytes waiting for their time

	mu          sync.Mutex
	stmts       map[string]bool // prepared statement name -> it calls queues.claim_tasks
	boundClaim  bool            // the request being sent executes a claim
	outstanding []bool          // requests sent (up to Sync or a simple query), oldest first: is it a claim
	lastClaim   bool            // the last request sent was a claim
	closeOnce   sync.Once
}

func (c *proxyConn) claimsOutstanding() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, claim := range c.outstanding {
		if claim {
			n++
		}
	}
	return n
}

func (c *proxyConn) closeBoth() {
	c.closeOnce.Do(func() {
		_ = c.client.Close()
		_ = c.server.Close()
	})
}

// clientToServer forwards the client's bytes at once, noting the requests they carry. When the
// client goes away right after a claim, the claim was cut short.
func (c *proxyConn) clientToServer() {
	var buf []byte
	started := false
	b := make([]byte, 32*1024)
	for {
		n, err := c.client.Read(b)
		if n > 0 {
			if _, werr := c.server.Write(b[:n]); werr != nil {
				err = werr
			}
			buf = append(buf, b[:n]...)
			buf = c.noteClientMessages(buf, &started)
		}
		if err != nil {
			break
		}
	}
	c.mu.Lock()
	if c.lastClaim {
		c.p.cutShort.Add(1)
	}
	c.outstanding = nil
	c.mu.Unlock()
	c.closeBoth()
	c.p.mu.Lock()
	delete(c.p.conns, c)
	c.p.mu.Unlock()
}

// noteClientMessages consumes the complete messages at the start of buf and returns the rest.
func (c *proxyConn) noteClientMessages(buf []byte, started *bool) []byte {
	for {
		if !*started { // the startup message has no type byte
			if len(buf) < 4 {
				return buf
			}
			n := int(binary.BigEndian.Uint32(buf))
			if len(buf) < n {
				return buf
			}
			*started = true
			buf = buf[n:]
			continue
		}
		if len(buf) < 5 {
			return buf
		}
		n := 1 + int(binary.BigEndian.Uint32(buf[1:5]))
		if len(buf) < n {
			return buf
		}
		typ, body := buf[0], buf[5:n]
		c.mu.Lock()
		switch typ {
		case 'P': // Parse: statement name, query, ...
			name, rest := cstring(body)
			query, _ := cstring(rest)
			c.stmts[name] = isClaimSQL(query)
		case 'B': // Bind: portal, statement name, ...
			_, rest := cstring(body)
			name, _ := cstring(rest)
			c.boundClaim = c.boundClaim || c.stmts[name]
		case 'S': // Sync: the request is complete; one ReadyForQuery will answer it
			c.outstanding = append(c.outstanding, c.boundClaim)
			c.lastClaim, c.boundClaim = c.boundClaim, false
			if c.lastClaim {
				c.p.noteClaimSent()
			}
		case 'Q': // simple query
			query, _ := cstring(body)
			c.lastClaim = isClaimSQL(query)
			c.outstanding = append(c.outstanding, c.lastClaim)
			if c.lastClaim {
				c.p.noteClaimSent()
			}
		}
		c.mu.Unlock()
		buf = buf[n:]
	}
}

func isClaimSQL(q string) bool { return bytes.Contains([]byte(q), []byte("claim_tasks")) }

func cstring(b []byte) (string, []byte) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return string(b), nil
	}
	return string(b[:i]), b[i+1:]
}

// serverReader reads the server's bytes as they come and queues each chunk for its time.
func (c *proxyConn) serverReader() {
	defer close(c.chunks)
	last := time.Now()
	for {
		b := make([]byte, 32*1024)
		n, err := c.server.Read(b)
		if n > 0 {
			at := c.p.releaseAt(time.Now())
			if at.Before(last) {
				at = last // order is kept
			}
			last = at
			c.chunks <- delayedChunk{data: b[:n], at: at}
		}
		if err != nil {
			return
		}
	}
}

// serverWriter hands each chunk to the client at its time, then notes the answers it completed.
func (c *proxyConn) serverWriter() {
	var buf []byte
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ch := range c.chunks {
		if d := time.Until(ch.at); d > 0 {
			timer.Reset(d)
			<-timer.C
		}
		if _, err := c.client.Write(ch.data); err != nil {
			c.closeBoth()
			for range c.chunks { // drain: the reader stops once the server side is closed
			}
			return
		}
		buf = append(buf, ch.data...)
		for len(buf) >= 5 {
			n := 1 + int(binary.BigEndian.Uint32(buf[1:5]))
			if len(buf) < n {
				break
			}
			if buf[0] == 'Z' { // ReadyForQuery: the oldest request is answered
				c.mu.Lock()
				if len(c.outstanding) > 0 {
					c.outstanding = c.outstanding[1:]
				}
				c.mu.Unlock()
			}
			buf = buf[n:]
		}
	}
	c.closeBoth()
}
