package relay

import "github.com/parley-engine/parley/internal/textsafe"

// inert makes text that carries participants' words safe to print on a
// terminal or in a report (internal/textsafe): control characters, the
// bidirectional controls and the other invisible format characters are
// written as visible \x.. or \u.... escapes, as are bytes that are not
// UTF-8; newlines stay when keepNL.
func inert(s string, keepNL bool) string {
	if keepNL {
		return textsafe.Text(s)
	}
	return textsafe.Line(s)
}
