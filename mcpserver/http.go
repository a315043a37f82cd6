package mcpserver

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MinTokenLen is the shortest bearer token HTTPHandler accepts.
const MinTokenLen = 16

// CodeUnauthorized is the code of the 401 answer to a request without the
// server's bearer token (docs/ERRORS.md).
const CodeUnauthorized = "unauthorized"

// ErrShortToken is returned by HTTPHandler for a token shorter than
// MinTokenLen.
var ErrShortToken = errors.New("mcpserver: a bearer token needs at least 16 characters")

// NewToken draws a bearer token: 256 random bits in hex.
func NewToken() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// HTTPHandler serves srv over streamable HTTP, to requests that carry
// "Authorization: Bearer <token>" only. The server publishes with the NATS
// credentials it was started with: without the token, any local process
// that reaches the port would publish as those credentials' user. A
// request without the token, or with another, is answered 401 with
// {"code":"unauthorized","error":…} and reaches no tool. The token is
// compared by its SHA-256 in constant time.
func HTTPHandler(srv *mcp.Server, token string) (http.Handler, error) {
	if len(token) < MinTokenLen {
		return nil, ErrShortToken
	}
	want := sha256.Sum256([]byte(token))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="parley mcp"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"code": CodeUnauthorized,
				"error": "this needs the MCP server's bearer token: Authorization: Bearer <token> (engine mcp --http writes it to its --token-file)"})
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}

// IsLoopback reports whether addr (host:port, as net.Listen takes it)
// names a loopback host only: 127.0.0.0/8, ::1 or localhost. An empty host
// (":8081") listens on every interface and is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
