package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/parley-engine/parley/service"
)

// defaultDataDir is engine serve's --data default, where the other
// commands look for a running engine's credentials file.
const defaultDataDir = "./parley-data"

// engineCredentials reads the credentials file of the engine whose data
// directory is dir; with dir "", that of ./parley-data if there is one
// (nil, "", nil when there is none). It returns the file's path.
func engineCredentials(dir string) (*service.Credentials, string, error) {
	explicit := dir != ""
	if !explicit {
		dir = defaultDataDir
	}
	path := filepath.Join(dir, service.CredentialsFile)
	c, err := service.ReadCredentials(dir)
	if errors.Is(err, service.ErrNoCredentials) && !explicit {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return c, path, nil
}

// sameEndpoint reports whether two URLs name the same host and port (the
// scheme aside): a credentials file found by default is only ever sent to
// the engine that wrote it.
func sameEndpoint(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host != "" && strings.EqualFold(ua.Host, ub.Host)
}

// httpTokenFlags find the HTTP token of the commands that write through
// the engine's HTTP API (engine bind): --http-token, PARLEY_HTTP_TOKEN, or
// the credentials file (--data, or ./parley-data by default).
type httpTokenFlags struct {
	base, token, data string
	// why says, when resolve found no token, why not.
	why string
}

const defaultHTTP = "http://127.0.0.1:8080"

func (h *httpTokenFlags) register(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&h.base, "http", defaultHTTP, "the engine's HTTP address")
	fs.StringVar(&h.token, "http-token", "", "the engine's HTTP token (or PARLEY_HTTP_TOKEN; by default the one in the engine's credentials file)")
	fs.StringVar(&h.data, "data", "", "the engine's data directory, whose credentials.json holds its address and HTTP token (default ./parley-data when it has one)")
}

// resolve settles the base URL and the token. A token found by default (in
// ./parley-data) is used only for the engine that wrote it.
func (h *httpTokenFlags) resolve() error {
	h.base = strings.TrimRight(h.base, "/")
	if u, err := url.Parse(h.base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--http %q is not an http:// or https:// address (for example %s)", h.base, defaultHTTP)
	}
	if h.token == "" {
		h.token = os.Getenv("PARLEY_HTTP_TOKEN")
		// The variable engine serve reads may carry SECRET=PARTICIPANT
		// entries; the first one is the principal's.
		h.token, _, _ = strings.Cut(h.token, ",")
		h.token, _, _ = strings.Cut(strings.TrimSpace(h.token), "=")
	}
	if h.token != "" {
		return nil
	}
	c, path, err := engineCredentials(h.data)
	if err != nil {
		return err
	}
	if c == nil {
		h.why = "./parley-data holds no credentials.json (the engine runs with another --data)"
		return nil
	}
	if h.base == defaultHTTP && c.HTTPURL != "" {
		h.base = c.HTTPURL
	}
	if h.data == "" && !sameEndpoint(h.base, c.HTTPURL) {
		h.why = path + " is the credentials file of the engine at " + c.HTTPURL + ", not this one"
		return nil
	}
	if c.HTTPToken == "" {
		if h.data != "" {
			return fmt.Errorf("%s holds no HTTP token (the engine was given its tokens with --http-token): give --http-token or PARLEY_HTTP_TOKEN", path)
		}
		return nil
	}
	h.token = c.HTTPToken
	return nil
}
