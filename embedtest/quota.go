package embedtest

import "fmt"

// WithQuotaBackendBytes sets every member's backend quota (etcd's
// --quota-backend-bytes; default 2 GiB). A tiny quota makes etcd raise its
// NOSPACE alarm after a few writes, so that a test can see what leasegate
// answers when etcd refuses every write.
func WithQuotaBackendBytes(n int64) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("embedtest: quota %d bytes must be positive", n)
		}
		c.quotaBytes = n
		return nil
	}
}
