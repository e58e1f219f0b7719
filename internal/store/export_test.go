package store

// ClearGuards empties s's guard cache, as its bound does.
func (s *Store) ClearGuards() {
	s.mu.Lock()
	s.guards = nil
	s.mu.Unlock()
}

// MaxGuards is the guard cache's bound.
const MaxGuards = maxGuards

// GuardsHeld is the number of grants s's guard cache holds.
func (s *Store) GuardsHeld() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.guards)
}
