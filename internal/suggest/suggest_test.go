package suggest

import (
	"errors"
	"flag"
	"io"
	"testing"
)

func TestClosest(t *testing.T) {
	cmds := []string{"serve", "open", "publish", "control", "watch", "export", "import", "audit", "id", "canon"}
	for _, c := range []struct{ in, want string }{
		{"pubish", "publish"},
		{"publsih", "publish"},
		{"serv", "serve"},
		{"servee", "serve"},
		{"wacth", "watch"},
		{"Audit", "audit"},
		{"exprt", "export"},
		{"zzzzzz", ""},
		{"x", ""},
		{"", ""},
		{"deliberation", ""},
	} {
		if got := Closest(c.in, cmds); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestFlagError(t *testing.T) {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("deliberation", "", "")
	fs.String("as", "", "")
	fs.Duration("timeout", 0, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--deliberaton", "x"}, "unknown flag --deliberaton: did you mean --deliberation?"},
		{[]string{"-timout=1s"}, "unknown flag --timout: did you mean --timeout?"},
		{[]string{"--wholly-else"}, "unknown flag --wholly-else"},
		{[]string{"--timeout", "soon"}, `invalid value "soon" for flag -timeout: parse error`},
	} {
		err := fs.Parse(c.args)
		if err == nil || errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%v: %v", c.args, err)
		}
		if got := FlagError(fs, err); got != c.want {
			t.Errorf("%v: %q, want %q", c.args, got, c.want)
		}
	}
}
