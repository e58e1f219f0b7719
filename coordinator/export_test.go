package coordinator

// SetAcquireHook has Acquire call f(step) inside the windows of its wait on
// key ("busy": after the busy answer, before the watch; "watching": after
// the watch is registered, before the key is read again), until the
// returned func removes it.
func SetAcquireHook(key string, f func(step string)) (remove func()) {
	acquireHooks.Store(key, f)
	return func() { acquireHooks.Delete(key) }
}
