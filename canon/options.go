package canon

// Profile selects one of the two canonical formats parley speaks.
type Profile uint8

const (
	// AMD is the restricted canonical JSON profile of the artifact draft
	// (protocol 0.1): NFC on every string and member name, members sorted by
	// UTF-8 bytes, integers only (no fraction or exponent token). Artifact
	// identifiers are SHA-256 over this form.
	AMD Profile = iota + 1
	// JCS is RFC 8785 with the profile bounds of the binding-moment envelope
	// (EP-CANONICALIZATION-v1): no NFC, members sorted by UTF-16 code units,
	// numbers must be integers by value (1.0 is written 1).
	JCS
)

func (p Profile) String() string {
	switch p {
	case AMD:
		return "amd"
	case JCS:
		return "jcs"
	}
	return "unknown"
}

// Defaults of the limits (docs/ERRORS.md; seed 002 §6.3 for JCS).
const (
	DefaultMaxDepth         = 64
	DefaultMaxSize          = 1 << 20 // 1 MiB, the NATS default max_payload
	DefaultMaxIntegerDigits = 16      // len("9007199254740991")
	// MaxDepthCeiling bounds WithMaxDepth, so that a configuration cannot
	// turn the recursive parser into a stack-exhaustion vector.
	MaxDepthCeiling = 10000
)

type config struct {
	maxDepth     int
	maxSize      int
	maxIntDigits int
}

func defaultConfig() config {
	return config{maxDepth: DefaultMaxDepth, maxSize: DefaultMaxSize, maxIntDigits: DefaultMaxIntegerDigits}
}

// Option configures a Canonicalizer.
type Option func(*config)

// WithMaxDepth sets the deepest nesting of arrays and objects admitted; the
// top-level container is depth 1. Values below 1 mean the default; values
// above MaxDepthCeiling are clamped to it.
func WithMaxDepth(n int) Option {
	return func(c *config) {
		switch {
		case n < 1:
			c.maxDepth = DefaultMaxDepth
		case n > MaxDepthCeiling:
			c.maxDepth = MaxDepthCeiling
		default:
			c.maxDepth = n
		}
	}
}

// WithMaxSize sets the largest input, in bytes. Values below 1 mean the
// default.
func WithMaxSize(n int) Option {
	return func(c *config) {
		if n < 1 {
			n = DefaultMaxSize
		}
		c.maxSize = n
	}
}

// WithMaxIntegerDigits sets the longest integer literal (digits, without the
// sign) that is parsed at all; longer ones are rejected with
// limit.integer_digits without being converted. Only lowering the default
// changes anything: 17 digits are always out of range. Values outside
// 1..16 mean the default. AMD profile only: JCS number tokens are bounded by
// value (see the package documentation).
func WithMaxIntegerDigits(n int) Option {
	return func(c *config) {
		if n < 1 || n > DefaultMaxIntegerDigits {
			n = DefaultMaxIntegerDigits
		}
		c.maxIntDigits = n
	}
}
