package canon

// SetFast turns the fast path of ID and Verify on or off, for tests that
// judge every input both ways; it returns the previous setting.
func SetFast(on bool) (was bool) {
	was = !fastOff
	fastOff = !on
	return was
}

// Fast reports whether the fast path takes src.
func (c *Canonicalizer) Fast(src []byte) bool { return c.fast(src) }
