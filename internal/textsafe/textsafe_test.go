package textsafe_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parley-engine/parley/internal/textsafe"
)

func TestLine(t *testing.T) {
	for _, tc := range []struct{ name, in, want, wantText string }{
		{"plain", "Adopt the cache?", "Adopt the cache?", ""},
		{"rtl letters stay", "שלום مرحبا", "שלום مرحبا", ""},
		{"emoji and accents stay", "café ❤️ 日本", "café ❤️ 日本", ""},
		{"override", "Adopt \u202edetelpmoc :sutats", `Adopt \u202edetelpmoc :sutats`, ""},
		{"isolates and marks", "\u2066a\u2069\u2067b\u2068c\u200e\u200f\u061c", `\u2066a\u2069\u2067b\u2068c\u200e\u200f\u061c`, ""},
		{"embeddings", "\u202a\u202b\u202c\u202d", `\u202a\u202b\u202c\u202d`, ""},
		{"escape sequence", "clear \x1b[2J", `clear \x1b[2J`, ""},
		{"carriage return", "a\rb", `a\x0db`, ""},
		{"newline", "a\nb", `a\x0ab`, "a\nb"},
		{"tab", "a\tb", `a\x09b`, ""},
		{"C1 and DEL", "\u009b31m\x7f", `\u009b31m\x7f`, ""},
		{"zero width", "pay\u200bpal\u200c\u200d\u2060\ufeff", `pay\u200bpal\u200c\u200d\u2060\ufeff`, ""},
		{"soft hyphen", "a\u00adb", `a\u00adb`, ""},
		{"separators", "a\u2028b\u2029", `a\u2028b\u2029`, ""},
		{"tags", "x\U000e0041\U000e007f", `x\U000e0041\U000e007f`, ""},
		{"fillers", "\u3164\u115f", `\u3164\u115f`, ""},
		{"invalid UTF-8", "a\xffb\xc0", `a\xffb\xc0`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := textsafe.Line(tc.in); got != tc.want {
				t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.want)
			}
			wantText := tc.wantText
			if wantText == "" {
				wantText = tc.want
			}
			if got := textsafe.Text(tc.in); got != wantText {
				t.Errorf("Text(%q) = %q, want %q", tc.in, got, wantText)
			}
		})
	}
}

func TestJSON(t *testing.T) {
	v := map[string]string{"title": "Adopt \u202edetelpmoc :sutats \x1b[2J \u0085 \U000e0041 \u200b ok"}
	b, _ := json.Marshal(v)
	got := textsafe.JSON(b)
	for _, r := range string(got) {
		if textsafe.Unsafe(r) {
			t.Fatalf("%s holds %U", got, r)
		}
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || back["title"] != v["title"] {
		t.Fatalf("%s decodes to %q (%v)", got, back["title"], err)
	}
	plain := []byte(`{"a":"b"}`)
	if got := textsafe.JSON(plain); !bytes.Equal(got, plain) {
		t.Errorf("%s", got)
	}
}

// safe reports whether s could reach a screen: valid UTF-8 with no unsafe
// character (a newline allowed when keepNL).
func safe(s string, keepNL bool) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if textsafe.Unsafe(r) && !(keepNL && r == '\n') {
			return false
		}
	}
	return true
}

func FuzzLine(f *testing.F) {
	for _, s := range []string{"", "plain", "a\u202eb", "\x1b[2J", "\xff\xfe", "\U000e0041", "שלום\u2066x\u2069", "a\nb\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, x := textsafe.Line(s), textsafe.Text(s)
		if !safe(l, false) {
			t.Fatalf("Line(%q) = %q", s, l)
		}
		if !safe(x, true) {
			t.Fatalf("Text(%q) = %q", s, x)
		}
		if textsafe.Line(l) != l || textsafe.Text(x) != x {
			t.Fatalf("not idempotent on %q", s)
		}
		if safe(s, false) && l != s {
			t.Fatalf("Line changed safe text %q to %q", s, l)
		}
		if strings.Count(l, "\n") != 0 {
			t.Fatalf("Line kept a newline: %q", l)
		}
		b, _ := json.Marshal(s)
		j := textsafe.JSON(b)
		if !safe(string(j), false) {
			t.Fatalf("JSON(%s) = %s", b, j)
		}
		var back, want string
		json.Unmarshal(b, &want)
		if err := json.Unmarshal(j, &back); err != nil || back != want {
			t.Fatalf("JSON(%s) = %s decodes to %q, want %q (%v)", b, j, back, want, err)
		}
	})
}
