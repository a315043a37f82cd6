package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/web"
	"github.com/parley-engine/parley/wire"
)

// Token is a secret of the HTTP API and the participant it stands for:
// a principal's resolution sent with it is published as that participant.
type Token struct {
	Secret      string
	Participant string
}

// MinTokenLen is the shortest secret ParseToken accepts.
const MinTokenLen = 16

// ParseToken reads SECRET (standing for wire.PrincipalToken) or
// SECRET=PARTICIPANT. A secret has at least MinTokenLen printable
// ASCII characters, none of them a space, '=', ',', ';', '"' or '\' (it
// goes in a list, and in a cookie; openssl rand -hex 32 makes one).
func ParseToken(s string) (Token, error) {
	t := Token{Secret: s, Participant: wire.PrincipalToken}
	if sec, p, ok := strings.Cut(s, "="); ok {
		t.Secret, t.Participant = sec, p
	}
	if len(t.Secret) < MinTokenLen {
		return t, fmt.Errorf("service: an HTTP token needs at least %d characters", MinTokenLen)
	}
	for i := 0; i < len(t.Secret); i++ {
		if c := t.Secret[i]; c <= ' ' || c > '~' || strings.IndexByte(`,;"\`, c) >= 0 {
			return t, errors.New(`service: an HTTP token is printable ASCII without spaces, '=', ',', ';', '"' or '\'`)
		}
	}
	if !wire.ValidToken(t.Participant) {
		return t, fmt.Errorf("service: HTTP token: %q is not a participant token", t.Participant)
	}
	return t, nil
}

// Auth authenticates the HTTP API's requests: every write needs a
// token, and so does every read when protectReads (the API listens beyond
// loopback and reads were not made public). /healthz and /metrics are
// always open. A token comes as "Authorization: Bearer <token>", or, for a
// browser, in a cookie the engine sets when a GET carries ?token=.
type Auth struct {
	tokens       []authToken
	protectReads bool
	// loopback: the API listens on loopback only; an unauthenticated
	// request must then name a loopback host (a page of another site that
	// resolves its own name to 127.0.0.1 reads nothing).
	loopback bool
	cookie   string
}

type authToken struct {
	sum         [sha256.Size]byte
	participant string
}

// NewAuth returns the authentication of an API listening on ln with
// tokens; publicReads: reads need no token even beyond loopback.
func NewAuth(tokens []Token, ln net.Addr, publicReads bool) *Auth {
	a := &Auth{loopback: isLoopback(ln), cookie: "parley_token"}
	if ta, ok := ln.(*net.TCPAddr); ok {
		// Cookies are shared by every port of a host: one engine's must
		// not shadow another's.
		a.cookie += "_" + strconv.Itoa(ta.Port)
	}
	a.protectReads = !a.loopback && !publicReads
	for _, t := range tokens {
		a.tokens = append(a.tokens, authToken{sha256.Sum256([]byte(t.Secret)), t.Participant})
	}
	return a
}

func isLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// lookup returns the participant secret stands for. It compares the
// SHA-256 of secret with each token's in constant time, and looks at
// every token whatever it finds.
func (a *Auth) lookup(secret string) (string, bool) {
	sum := sha256.Sum256([]byte(secret))
	found := ""
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			found = t.participant
		}
	}
	return found, found != ""
}

type principalKey struct{}

// SignedIn reports whether the request carries a valid token (Auth.Wrap
// checked it).
func SignedIn(r *http.Request) bool {
	_, ok := principalOf(r.Context())
	return ok
}

// principalOf returns the participant the request's token stands for.
func principalOf(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(principalKey{}).(string)
	return p, ok
}

var errUnauthorized = &api.Error{Kind: api.KindUnauthorized, Code: api.CodeUnauthorized,
	Message: "this needs the engine's HTTP token: Authorization: Bearer <token> (engine serve writes it to <data>/credentials.json, http_token), or open the sign_in_url of that file"}

// Wrap authenticates the requests to next.
func (a *Auth) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/metrics" {
			next.ServeHTTP(w, r)
			return
		}
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		q := r.URL.Query()
		if read && q.Has("token") {
			// A browser signs in: the token becomes a cookie, and the
			// address loses it.
			if _, ok := a.lookup(q.Get("token")); !ok {
				a.refuse(w, r, errUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: a.cookie, Value: q.Get("token"), Path: "/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			q.Del("token")
			// Always a path of this server ("//host" would leave it).
			u := url.URL{Path: "/" + strings.TrimLeft(r.URL.Path, "/"), RawQuery: q.Encode()}
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Referrer-Policy", "no-referrer")
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
			return
		}
		participant, authed, viaCookie := "", false, false
		if h := r.Header.Get("Authorization"); h != "" {
			scheme, tok, _ := strings.Cut(h, " ")
			if !strings.EqualFold(scheme, "Bearer") {
				a.refuse(w, r, errUnauthorized)
				return
			}
			if participant, authed = a.lookup(strings.TrimSpace(tok)); !authed {
				a.refuse(w, r, errUnauthorized)
				return
			}
		} else if c, err := r.Cookie(a.cookie); err == nil {
			participant, authed = a.lookup(c.Value)
			viaCookie = authed
		}
		switch {
		case !read && !authed:
			a.refuse(w, r, errUnauthorized)
			return
		case !read && viaCookie:
			// A cookie goes with every request the browser makes, whoever
			// made the page: a write must come from the engine's own.
			if err := sameOrigin(r); err != nil {
				a.refuse(w, r, &api.Error{Kind: api.KindForbidden, Code: api.CodeForbidden, Message: err.Error()})
				return
			}
		case read && !authed && a.protectReads:
			a.refuse(w, r, errUnauthorized)
			return
		case !authed && a.loopback && !loopbackHost(r.Host):
			a.refuse(w, r, &api.Error{Kind: api.KindForbidden, Code: api.CodeForbidden,
				Message: "the API listens on loopback and is read without a token only under a loopback name, not " + strconv.Quote(r.Host)})
			return
		}
		if authed {
			r = r.WithContext(context.WithValue(r.Context(), principalKey{}, participant))
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin checks that a request comes from a page of this server: its
// Origin (or, without one, its Referer) is this host.
func sameOrigin(r *http.Request) error {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	want := scheme + "://" + r.Host
	if o := r.Header.Get("Origin"); o != "" {
		if o != want {
			return fmt.Errorf("cross-site request refused: it comes from %s, not %s", o, want)
		}
		return nil
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		u, err := url.Parse(ref)
		if err != nil || u.Scheme+"://"+u.Host != want {
			return fmt.Errorf("cross-site request refused: it comes from %s, not %s", ref, want)
		}
		return nil
	}
	return errors.New("cross-site request refused: a write authenticated by the cookie needs an Origin or Referer of this server")
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// refuse answers a refused request: JSON for the API, a page for a
// browser's /bind and explorer pages.
func (a *Auth) refuse(w http.ResponseWriter, r *http.Request, e *api.Error) {
	if e.Kind == api.KindUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="parley"`)
	}
	if web.IsBindPage(r.URL.Path) || web.IsPage(r.URL.Path) {
		web.Refuse(w, e.HTTPStatus(), e.Code, e.Message)
		return
	}
	writeJSON(w, e.HTTPStatus(), e)
}
