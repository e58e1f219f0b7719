package embedtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a plain TCP relay on 127.0.0.1 in front of one address, with
// faults: it can cut connections, hold bytes back (stall, delivered late on
// Heal), delay them, or swallow them (blackhole, or only the answers).
//
// Every member of a Cluster has two: one in front of its client port (the
// URL clients dial) and one in front of its peer port (the URL the other
// members dial). Cluster.ClientProxy makes one more per client. Faults on a
// member's peer proxy are set per sending member (Cluster.Partition,
// CutLink, DelayLink, DropLink), which the proxy tells from the
// X-Server-From header etcd's raft transport puts on its requests.
type Proxy struct {
	l     net.Listener
	sniff func(id uint64) int // peer proxies: member index of a raft sender ID

	mu      sync.Mutex
	target  string        // where connections are relayed to
	down    bool          // the member behind it is stopped: refuse everything
	all     fault         // fault for every sender
	from    map[int]fault // fault per sending member (peer proxies)
	conns   map[*relay]struct{}
	changed chan struct{} // closed and replaced on every change
	closed  bool
	wg      sync.WaitGroup
}

// fault is what a proxy does to bytes. The zero fault passes them.
type fault struct {
	cut       bool          // close connections, refuse new ones
	stall     bool          // hold bytes (both ways) until healed
	blackhole bool          // swallow bytes both ways, connections stay open
	dropBack  bool          // swallow answers (target to client) only
	delay     time.Duration // deliver every chunk this late
}

func (f fault) merge(g fault) fault {
	return fault{cut: f.cut || g.cut, stall: f.stall || g.stall, blackhole: f.blackhole || g.blackhole,
		dropBack: f.dropBack || g.dropBack, delay: max(f.delay, g.delay)}
}

// relay is one proxied connection.
type relay struct {
	src          atomic.Uint64 // raft ID of the sending member, 0 until known
	held         bool          // StallOpen: its bytes are held until Heal (guarded by Proxy.mu)
	client, upst net.Conn
	once         sync.Once
}

func (r *relay) close() {
	r.once.Do(func() {
		_ = r.client.Close()
		_ = r.upst.Close()
	})
}

// NewProxy starts a proxy on a free 127.0.0.1 port relaying to target, a
// loopback host:port. The caller must Close it.
func NewProxy(target string) (*Proxy, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("embedtest: proxy target %q: %w", target, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("embedtest: proxy target %q is not on loopback", target)
	}
	return newProxy("127.0.0.1:0", target, nil)
}

func newProxy(addr, target string, sniff func(uint64) int) (*Proxy, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("embedtest: proxy listen: %w", err)
	}
	p := &Proxy{l: l, target: target, sniff: sniff, from: map[int]fault{}, conns: map[*relay]struct{}{}, changed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// URL is the proxy's address as an http URL.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Cut closes every connection through the proxy and refuses new ones, as if
// the network between the two sides were gone: both sides see it at once.
func (p *Proxy) Cut() { p.set(func() { p.all.cut = true }) }

// Stall holds every byte, both ways, without closing anything: requests and
// answers are delivered late, in order, on Heal.
func (p *Proxy) Stall() { p.set(func() { p.all.stall = true }) }

// StallOpen holds every byte of the connections open now, both ways, as
// Stall does, until Heal; connections opened after it pass. It is the
// path of an established connection hung (a middlebox that lost its
// state, say) while a fresh connection to the same member gets through.
func (p *Proxy) StallOpen() {
	p.set(func() {
		for r := range p.conns {
			r.held = true
		}
	})
}

// CutOpen closes the connections open now, both sides at once, as Cut
// does, and refuses no new one: the path lost its connections of that
// moment (a middlebox reset) and carries the next. Bytes written to a
// connection it closed reach nobody.
func (p *Proxy) CutOpen() {
	p.mu.Lock()
	open := make([]*relay, 0, len(p.conns))
	for r := range p.conns {
		open = append(open, r)
	}
	p.mu.Unlock()
	for _, r := range open {
		r.close()
	}
}

// Blackhole swallows every byte, both ways; connections stay open, so
// neither side learns anything until its own timeouts fire.
func (p *Proxy) Blackhole() { p.set(func() { p.all.blackhole = true }) }

// DropAnswers delivers requests but swallows every answer: a write reaches
// etcd and applies, and its client never hears of it.
func (p *Proxy) DropAnswers() { p.set(func() { p.all.dropBack = true }) }

// Delay delivers every chunk d late, both ways.
func (p *Proxy) Delay(d time.Duration) { p.set(func() { p.all.delay = d }) }

// Heal clears every fault of the proxy (not per-sender ones, see
// Cluster.Heal) and delivers what a stall held.
func (p *Proxy) Heal() {
	p.set(func() {
		p.all = fault{}
		for r := range p.conns {
			r.held = false
		}
	})
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	_ = p.l.Close()
	p.set(func() {})
	p.wg.Wait()
}

// set applies a change, closes the connections it cuts and wakes the pumps.
func (p *Proxy) set(change func()) {
	p.mu.Lock()
	change()
	var cut []*relay
	for r := range p.conns {
		if p.closed || p.faultLocked(r.src.Load()).cut {
			cut = append(cut, r)
		}
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	for _, r := range cut {
		r.close()
	}
}

func (p *Proxy) setDown(down bool) { p.set(func() { p.down = down }) }

// retarget relays new connections to target (a restarted member's new
// port).
func (p *Proxy) retarget(target string) { p.set(func() { p.target = target }) }

// faultLocked is the fault for a connection from the member with raft ID
// src (0: unknown). IDs are mapped to members at every look, since a
// member's ID is known only once it has started.
func (p *Proxy) faultLocked(src uint64) fault {
	f := p.all
	if p.down {
		f.cut = true
	}
	if src != 0 && p.sniff != nil {
		if i := p.sniff(src); i >= 0 {
			f = f.merge(p.from[i])
		}
	}
	return f
}

// state is the fault for r and a channel closed at its next change.
func (p *Proxy) state(r *relay) (fault, <-chan struct{}, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.faultLocked(r.src.Load())
	f.stall = f.stall || r.held
	return f, p.changed, p.closed
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	refuse, target := p.closed || p.faultLocked(0).cut, p.target
	p.mu.Unlock()
	if refuse {
		_ = c.Close()
		return
	}
	u, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	r := &relay{client: c, upst: u}
	p.mu.Lock()
	if p.closed || p.faultLocked(0).cut {
		p.mu.Unlock()
		r.close()
		return
	}
	p.conns[r] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if p.sniff != nil {
			p.requests(r, c, u)
		} else {
			p.pump(r, c, u, false)
		}
	}()
	go func() { defer wg.Done(); p.pump(r, u, c, true) }()
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, r)
	p.mu.Unlock()
}

// requests relays the requests of a peer connection one by one, learning
// the sending member from each (etcd reuses a connection its prober opened
// for raft messages, so the first request may name no sender). Peer TLS
// is not plain HTTP: such a connection is relayed as bytes, sender unknown.
func (p *Proxy) requests(r *relay, from, to net.Conn) {
	defer r.close()
	br := bufio.NewReader(from)
	if first, err := br.Peek(1); err != nil || first[0] < 'A' || first[0] > 'Z' {
		p.pump(r, readerConn{br, from}, to, false)
		return
	}
	var buf bytes.Buffer
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if id, err := strconv.ParseUint(req.Header.Get("X-Server-From"), 16, 64); err == nil && id != 0 {
			r.src.Store(id)
		}
		buf.Reset()
		err = req.Write(&buf)
		_ = req.Body.Close()
		if err != nil || !p.deliver(r, to, buf.Bytes(), false) {
			return
		}
	}
}

// readerConn reads through a bufio.Reader that has buffered part of a
// connection.
type readerConn struct {
	r io.Reader
	net.Conn
}

func (c readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// pump copies one direction of r. back is the answer direction (target to
// client).
func (p *Proxy) pump(r *relay, from, to net.Conn, back bool) {
	defer r.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 && !p.deliver(r, to, buf[:n], back) {
			return
		}
		if err != nil {
			return
		}
	}
}

// deliver writes b to `to` under the proxy's faults; false ends the relay.
func (p *Proxy) deliver(r *relay, to net.Conn, b []byte, back bool) bool {
	for {
		f, changed, closed := p.state(r)
		switch {
		case closed || f.cut:
			return false
		case f.stall:
			<-changed
			continue
		case f.blackhole || (back && f.dropBack):
			return true
		case f.delay > 0:
			t := time.NewTimer(f.delay)
			select {
			case <-t.C:
			case <-changed:
				t.Stop()
				continue
			}
		}
		_, err := to.Write(b)
		return err == nil
	}
}
