package realprov

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
)

// CutProxy is a TCP relay on 127.0.0.1 in front of one address that can
// cut a connection once a chosen request has reached the server: the
// server reads it and acts on it; its answer is lost and the client's
// connection fails — the ambiguous answer of a promote whose connection
// was killed after send.
type CutProxy struct {
	l      net.Listener
	target string

	mu      sync.Mutex
	pattern []byte // armed: cut at the bytes containing it
	deliver bool   // forward those bytes before cutting (CutAfter) or not (DropAt)
	before  func() // OnRequest: run before forwarding them, and do not cut
	conns   map[net.Conn]struct{}
	cuts    atomic.Int64
	wg      sync.WaitGroup
}

// NewCutProxy relays connections to target. The caller must Close it.
func NewCutProxy(target string) (*CutProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &CutProxy{l: l, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial.
func (p *CutProxy) Addr() string { return p.l.Addr().String() }

// Port is Addr's port.
func (p *CutProxy) Port() int { return p.l.Addr().(*net.TCPAddr).Port }

// CutAfter arms the proxy: the next client bytes containing pattern are
// forwarded, and the connection is closed both ways when the server's
// answer comes (the answer is dropped): so the server has read the request
// and acted on it. Closing at once instead would race the server's read —
// a close that becomes a reset can discard a request still in the
// server's socket buffer, which is DropAt's fault, not this one. It fires
// once.
func (p *CutProxy) CutAfter(pattern string) { p.arm(pattern, true) }

// DropAt arms the proxy to swallow the next client bytes containing
// pattern and close that connection: the client wrote its request (so it
// cannot know it was not delivered) and the server never receives it —
// an ambiguous answer whose truth is "not applied". It fires once.
func (p *CutProxy) DropAt(pattern string) { p.arm(pattern, false) }

// OnRequest arms the proxy to run f when the next client bytes containing
// pattern arrive, then forward them and go on relaying (no cut): a fault
// placed exactly between a connection's setup and one request (freeze the
// server, say). It fires once.
func (p *CutProxy) OnRequest(pattern string, f func()) {
	p.mu.Lock()
	p.pattern, p.deliver, p.before = []byte(pattern), true, f
	p.mu.Unlock()
}

func (p *CutProxy) arm(pattern string, deliver bool) {
	p.mu.Lock()
	p.pattern, p.deliver, p.before = []byte(pattern), deliver, nil
	p.mu.Unlock()
}

// Cuts is how many connections were cut so far.
func (p *CutProxy) Cuts() int { return int(p.cuts.Load()) }

// Close stops accepting, closes every relayed connection and waits for the
// relay goroutines.
func (p *CutProxy) Close() {
	_ = p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *CutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		p.mu.Unlock()
		severed := new(atomic.Bool) // set before a cut request is forwarded: no answer passes after it
		p.wg.Add(2)
		go p.pump(c, u, true, severed)
		go p.pump(u, c, false, severed)
	}
}

// pump copies from → to; on the client side it watches for the armed
// pattern (across read boundaries).
func (p *CutProxy) pump(from, to net.Conn, fromClient bool, severed *atomic.Bool) {
	defer p.wg.Done()
	defer func() {
		_ = from.Close()
		_ = to.Close()
		p.mu.Lock()
		delete(p.conns, from)
		delete(p.conns, to)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	var tail []byte
	for {
		n, err := from.Read(buf)
		if n > 0 {
			cut, deliver := false, true
			var before func()
			if fromClient {
				window := append(tail, buf[:n]...)
				p.mu.Lock()
				if len(p.pattern) > 0 && bytes.Contains(window, p.pattern) {
					p.pattern, cut, deliver, before = nil, p.before == nil, p.deliver, p.before
					p.before = nil
				}
				p.mu.Unlock()
				if before != nil {
					before()
				}
				tail = append(tail[:0], window[max(0, len(window)-64):]...)
			}
			if cut {
				severed.Store(true) // before the server can have the request, so before its answer
			}
			if !deliver {
				p.cuts.Add(1)
				return
			}
			if !fromClient && severed.Load() {
				return // the answer to a cut request: lost
			}
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
			if cut {
				p.cuts.Add(1) // the answer is dropped, and both ways closed, by the other pump
			}
		}
		if err != nil {
			return
		}
	}
}
