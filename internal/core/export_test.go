package core

// ClearGuards empties c's guard cache, as its bound does.
func ClearGuards[G comparable, S any](c lender[G, S]) {
	l := c.lent()
	l.mu.Lock()
	l.guards = nil
	l.mu.Unlock()
}
