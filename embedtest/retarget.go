package embedtest

// Retarget relays the proxy's new connections to target, a loopback
// host:port; connections already open stay where they are. It is what a
// TCP load balancer does when its health check moves traffic off a dead
// backend (testsupport/robustness moves a worker between gateway replicas
// with it).
func (p *Proxy) Retarget(target string) { p.retarget(target) }

// Target is where the proxy relays new connections.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}
