package httpapi_test

import (
	"strings"
	"testing"

	"github.com/parley-engine/parley/httpapi"
	"github.com/parley-engine/parley/wire"
)

// A token is a secret of at least MinTokenLen printable characters,
// without a space or what would break a list or a cookie, standing for
// the principal or for the participant after '='.
func TestParseToken(t *testing.T) {
	for _, bad := range []string{"short=principal", strings.Repeat("x", 20) + "=_supervisor", strings.Repeat("x", 20) + "=a b",
		strings.Repeat("x", 20) + ";x", strings.Repeat("x", 20) + " x", strings.Repeat("x", 20) + `"`} {
		if _, err := httpapi.ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) accepted", bad)
		}
	}
	ops := strings.Repeat("a", 24)
	if tok, err := httpapi.ParseToken(ops); err != nil || tok.Participant != wire.PrincipalToken || tok.Secret != ops {
		t.Errorf("ParseToken: %+v %v", tok, err)
	}
	if tok, err := httpapi.ParseToken(ops + "=carol"); err != nil || tok.Participant != "carol" || tok.Secret != ops {
		t.Errorf("ParseToken with a participant: %+v %v", tok, err)
	}
}
