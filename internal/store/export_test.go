package store

// ClearGuards empties s's guard cache, as its bound does.
func (s *Store) ClearGuards() {
	s.mu.Lock()
	s.guards = nil
	s.mu.Unlock()
}
