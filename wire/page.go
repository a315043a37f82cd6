package wire

// The query API's listings come in pages: a request names how many items
// it wants (limit, DefaultPageLimit when it names none, at most
// MaxPageLimit) and where to go on from (the cursor a page gave), and a
// page that is not the last gives the cursor of the next one in the
// NextCursorHeader header (HTTP and the NATS micro service alike), and in
// the body's next_cursor where the body is an object. Cursors are opaque.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
	NextCursorHeader = "X-Next-Cursor"
)
