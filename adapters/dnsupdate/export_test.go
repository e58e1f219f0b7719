package dnsupdate

// SetAnsweredHook has a's Apply call f once the server has answered an
// UPDATE, before Apply reads the zone for its evidence.
func SetAnsweredHook(a *Adapter, f func()) { a.answered = f }
