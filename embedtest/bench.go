package embedtest

// WithFsync makes every member fsync its WAL and backend as a production
// etcd does. Tests leave it off (UnsafeNoFsync: a killed process loses
// recent writes, and every write is much faster); `leasegate bench` turns
// it on by default, so that its figures include the disk.
func WithFsync() Option {
	return func(c *config) error {
		c.fsync = true
		return nil
	}
}

// DirectClientURL is the URL the member's etcd listens on behind its client
// proxy: a client that dials it skips the proxy's relay (benchmarks), and
// also every client fault the proxy injects.
func (m *Member) DirectClientURL() string { return m.listenClient.String() }
