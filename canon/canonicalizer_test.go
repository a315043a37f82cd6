package canon_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/parley-engine/parley/canon"
)

func TestCanonicalizer_Canonicalize(t *testing.T) {
	tests := []struct {
		name    string
		p       canon.Profile
		in      string
		want    string
		wantErr *canon.Error
		offset  int64
	}{
		{name: "sorted", p: canon.AMD, in: `{"b":1,"a":[true,false,null]}`, want: `{"a":[true,false,null],"b":1}`},
		{name: "whitespace", p: canon.AMD, in: " \t\r\n{ \"a\" :\n1 } \n", want: `{"a":1}`},
		{name: "nested sort", p: canon.AMD, in: `{"z":{"y":1,"x":2},"a":0}`, want: `{"a":0,"z":{"x":2,"y":1}}`},
		{name: "empty containers", p: canon.AMD, in: `{"a":{},"b":[],"c":[{}]}`, want: `{"a":{},"b":[],"c":[{}]}`},
		{name: "minus zero", p: canon.AMD, in: `{"a":-0}`, want: `{"a":0}`},
		{name: "negative", p: canon.AMD, in: `{"a":-42}`, want: `{"a":-42}`},
		{name: "solidus unescaped", p: canon.AMD, in: `{"a":"\/"}`, want: `{"a":"/"}`},
		{name: "escape spellings", p: canon.AMD, in: `{"a":"\u0041\u00e9\t\u001F\u007f"}`, want: "{\"a\":\"Aé\\t\\u001f\x7f\"}"},
		{name: "nfc value", p: canon.AMD, in: "{\"a\":\"e\u0301\"}", want: `{"a":"é"}`},
		{name: "nfc escaped", p: canon.AMD, in: `{"a":"e\u0301"}`, want: `{"a":"é"}`},
		{name: "nfc name reorders", p: canon.AMD, in: "{\"\u00e9\":1,\"e\u0301x\":2}", want: `{"é":1,"éx":2}`},
		{name: "no nfc under jcs", p: canon.JCS, in: "{\"a\":\"e\u0301\"}", want: "{\"a\":\"e\u0301\"}"},
		{name: "jcs fraction by value", p: canon.JCS, in: `[1.0,1e2,-0.0,100e-2,0.5e1]`, want: `[1,100,0,1,5]`},
		{name: "jcs utf16 order", p: canon.JCS, in: "{\"\uff61\":1,\"\U0001F600\":2}", want: "{\"\U0001F600\":2,\"\uff61\":1}"},
		{name: "amd utf8 order", p: canon.AMD, in: "{\"\U0001F600\":2,\"\uff61\":1}", want: "{\"\uff61\":1,\"\U0001F600\":2}"},
		{name: "top-level array", p: canon.AMD, in: `[1,"a"]`, want: `[1,"a"]`},
		{name: "max int", p: canon.AMD, in: `[9007199254740991,-9007199254740991]`, want: `[9007199254740991,-9007199254740991]`},
		{name: "noncharacter kept", p: canon.AMD, in: `{"a":"\ufdd0\uffff"}`, want: "{\"a\":\"\ufdd0\uffff\"}"},
		{name: "nested artifact_id kept", p: canon.AMD, in: `{"p":{"artifact_id":1}}`, want: `{"p":{"artifact_id":1}}`},

		{name: "empty", p: canon.AMD, in: ``, wantErr: canon.ErrEmpty, offset: 0},
		{name: "only space", p: canon.AMD, in: `  `, wantErr: canon.ErrUnexpectedEnd, offset: 2},
		{name: "bom", p: canon.AMD, in: "\uFEFF{}", wantErr: canon.ErrBOM, offset: 0},
		{name: "trailing", p: canon.AMD, in: `{} {}`, wantErr: canon.ErrTrailingData, offset: 3},
		{name: "trailing comma", p: canon.AMD, in: `{"a":1,}`, wantErr: canon.ErrSyntax, offset: 7},
		{name: "missing colon", p: canon.AMD, in: `{"a" 1}`, wantErr: canon.ErrSyntax, offset: 5},
		{name: "unquoted name", p: canon.AMD, in: `{a:1}`, wantErr: canon.ErrSyntax, offset: 1},
		{name: "unterminated", p: canon.AMD, in: `{"a":"x`, wantErr: canon.ErrUnexpectedEnd, offset: 7},
		{name: "bad literal", p: canon.AMD, in: `{"a":tru}`, wantErr: canon.ErrSyntax, offset: 8},
		{name: "cut literal", p: canon.AMD, in: `{"a":nul`, wantErr: canon.ErrUnexpectedEnd, offset: 8},
		{name: "raw newline", p: canon.AMD, in: "{\"a\":\"x\ny\"}", wantErr: canon.ErrControlChar, offset: 7},
		{name: "raw tab", p: canon.JCS, in: "\"\t\"", wantErr: canon.ErrControlChar, offset: 1},
		{name: "raw control before a long run", p: canon.AMD, in: "\"\x16" + strings.Repeat("0", 40) + "\"", wantErr: canon.ErrControlChar, offset: 1},
		{name: "raw control inside a long run", p: canon.JCS, in: "\"" + strings.Repeat("0", 21) + "\x7f\x1f" + strings.Repeat("0", 40) + "\"", wantErr: canon.ErrControlChar, offset: 23},
		{name: "raw control after a decomposed letter", p: canon.AMD, in: "\"e\u0301" + strings.Repeat("0", 21) + "\x01" + strings.Repeat("0", 40) + "\"", wantErr: canon.ErrControlChar, offset: 25},
		{name: "invalid utf8 after a decomposed letter", p: canon.AMD, in: "\"e\u0301" + strings.Repeat("0", 21) + "\xe0\x80\x80" + strings.Repeat("0", 40) + "\"", wantErr: canon.ErrInvalidUTF8, offset: 25},
		{name: "bad escape", p: canon.AMD, in: `{"a":"\x"}`, wantErr: canon.ErrInvalidEscape, offset: 6},
		{name: "short unicode escape", p: canon.AMD, in: `{"a":"\u12"}`, wantErr: canon.ErrInvalidEscape, offset: 6},
		{name: "invalid utf8", p: canon.AMD, in: "{\"a\":\"\xff\"}", wantErr: canon.ErrInvalidUTF8, offset: 6},
		{name: "overlong utf8", p: canon.AMD, in: "{\"a\":\"\xc0\xaf\"}", wantErr: canon.ErrInvalidUTF8, offset: 6},
		{name: "utf8 surrogate", p: canon.AMD, in: "{\"a\":\"\xed\xa0\x80\"}", wantErr: canon.ErrInvalidUTF8, offset: 6},
		{name: "invalid utf8 outside string", p: canon.AMD, in: "{\"a\":\xff}", wantErr: canon.ErrInvalidUTF8, offset: 5},
		{name: "lone high", p: canon.AMD, in: `{"a":"\ud800"}`, wantErr: canon.ErrLoneSurrogate, offset: 6},
		{name: "lone low", p: canon.AMD, in: `{"a":"\udc00x"}`, wantErr: canon.ErrLoneSurrogate, offset: 6},
		{name: "reversed pair", p: canon.JCS, in: `"\udc00\ud800"`, wantErr: canon.ErrLoneSurrogate, offset: 1},
		{name: "high then escape", p: canon.JCS, in: `"\ud800\u0041"`, wantErr: canon.ErrLoneSurrogate, offset: 7},
		{name: "duplicate", p: canon.AMD, in: `{"a":1,"b":2,"a":3}`, wantErr: canon.ErrDuplicateName, offset: 13},
		{name: "duplicate by escape", p: canon.JCS, in: `{"a":1,"\u0061":2}`, wantErr: canon.ErrDuplicateName, offset: 7},
		{name: "duplicate nested", p: canon.AMD, in: `{"o":{"k":1,"k":2}}`, wantErr: canon.ErrDuplicateName, offset: 12},
		{name: "nfc collision", p: canon.AMD, in: "{\"\u00e9\":1,\"e\u0301\":2}", wantErr: canon.ErrNFCCollision, offset: 8},
		{name: "nfc distinct under jcs", p: canon.JCS, in: "{\"\u00e9\":1,\"e\u0301\":2}", want: "{\"e\u0301\":2,\"\u00e9\":1}"},
		{name: "fraction", p: canon.AMD, in: `{"a":1.5}`, wantErr: canon.ErrFraction, offset: 5},
		{name: "fraction zero", p: canon.AMD, in: `{"a":1.0}`, wantErr: canon.ErrFraction, offset: 5},
		{name: "exponent", p: canon.AMD, in: `{"a":1e2}`, wantErr: canon.ErrExponent, offset: 5},
		{name: "jcs non-integer", p: canon.JCS, in: `[1.5]`, wantErr: canon.ErrNonInteger, offset: 1},
		{name: "jcs tiny", p: canon.JCS, in: `[1e-999999999999999]`, wantErr: canon.ErrNonInteger, offset: 1},
		{name: "jcs huge", p: canon.JCS, in: `[1e999999999999999]`, wantErr: canon.ErrIntegerRange, offset: 1},
		{name: "jcs zero huge exponent", p: canon.JCS, in: `[0e999999999999999]`, want: `[0]`},
		{name: "out of range", p: canon.AMD, in: `{"a":9007199254740992}`, wantErr: canon.ErrIntegerRange, offset: 5},
		{name: "out of range negative", p: canon.AMD, in: `{"a":-9007199254740992}`, wantErr: canon.ErrIntegerRange, offset: 5},
		{name: "too many digits", p: canon.AMD, in: `{"a":` + strings.Repeat("9", 5000) + `}`, wantErr: canon.ErrIntegerDigits, offset: 5},
		{name: "leading zero", p: canon.AMD, in: `{"a":01}`, wantErr: canon.ErrInvalidNumber, offset: 6},
		{name: "plus sign", p: canon.AMD, in: `{"a":+1}`, wantErr: canon.ErrSyntax, offset: 5},
		{name: "bare minus", p: canon.AMD, in: `{"a":-}`, wantErr: canon.ErrInvalidNumber, offset: 6},
		{name: "dot without digits", p: canon.AMD, in: `{"a":1.}`, wantErr: canon.ErrInvalidNumber, offset: 7},
		{name: "NaN", p: canon.AMD, in: `{"a":NaN}`, wantErr: canon.ErrNonFinite, offset: 5},
		{name: "Infinity", p: canon.JCS, in: `[-Infinity]`, wantErr: canon.ErrNonFinite, offset: 1},
		{name: "30 marks", p: canon.AMD, in: "{\"a\":\"a" + strings.Repeat("\u0301", 30) + "\"}", want: "{\"a\":\"\u00e1" + strings.Repeat("\u0301", 29) + "\"}"},
		{name: "31 marks", p: canon.AMD, in: "{\"a\":\"a" + strings.Repeat("\u0301", 31) + "\"}", wantErr: canon.ErrNonstarterRun, offset: 5},
		{name: "31 marks escaped", p: canon.AMD, in: `{"a":"b` + strings.Repeat(`\u0323`, 31) + `"}`, wantErr: canon.ErrNonstarterRun, offset: 5},
		{name: "31 marks under jcs", p: canon.JCS, in: "[\"a" + strings.Repeat("\u0301", 31) + "\"]", want: "[\"a" + strings.Repeat("\u0301", 31) + "\"]"},
		{name: "depth 64 ok", p: canon.AMD, in: strings.Repeat("[", 64) + strings.Repeat("]", 64), want: strings.Repeat("[", 64) + strings.Repeat("]", 64)},
		{name: "depth 65", p: canon.AMD, in: strings.Repeat("[", 65) + strings.Repeat("]", 65), wantErr: canon.ErrDepth, offset: 64},
		{name: "deep unterminated", p: canon.AMD, in: strings.Repeat("[", 100000), wantErr: canon.ErrDepth, offset: 64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := canon.Canonicalize(tc.p, []byte(tc.in))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %s", err, tc.wantErr.Code)
				}
				var ce *canon.Error
				errors.As(err, &ce)
				if ce.Class != tc.wantErr.Class || ce.Offset != tc.offset {
					t.Errorf("class %s offset %d, want %s at %d", ce.Class, ce.Offset, tc.wantErr.Class, tc.offset)
				}
				if got != nil {
					t.Errorf("output %q on error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestCanonicalizer_Limits(t *testing.T) {
	c := canon.New(canon.AMD, canon.WithMaxDepth(2), canon.WithMaxSize(16), canon.WithMaxIntegerDigits(3))
	for _, tc := range []struct {
		in      string
		wantErr *canon.Error
	}{
		{`{"a":[1]}`, nil},
		{`{"a":[[1]]}`, canon.ErrDepth},
		{`{"a":"0123456789ab"}`, canon.ErrSize},
		{`{"a":999}`, nil},
		{`{"a":1000}`, canon.ErrIntegerDigits},
	} {
		_, err := c.Canonicalize([]byte(tc.in))
		if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: err = %v, want %v", tc.in, err, tc.wantErr)
		}
	}
	// Out-of-range options fall back to the defaults or the ceiling.
	deep := strings.Repeat("[", canon.MaxDepthCeiling+1) + strings.Repeat("]", canon.MaxDepthCeiling+1)
	if _, err := canon.New(canon.JCS, canon.WithMaxDepth(1<<30), canon.WithMaxSize(1<<20)).Canonicalize([]byte(deep)); !errors.Is(err, canon.ErrDepth) {
		t.Errorf("depth ceiling: %v", err)
	}
	if _, err := canon.New(canon.JCS, canon.WithMaxDepth(0)).Canonicalize([]byte(strings.Repeat("[", 65) + strings.Repeat("]", 65))); !errors.Is(err, canon.ErrDepth) {
		t.Errorf("depth default: %v", err)
	}
}

func TestCanonicalizer_ID(t *testing.T) {
	body := `{"b":2,"a":1}`
	want, err := canon.ID([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	// The top-level artifact_id is removed wherever it sorts and whatever
	// its value; the result is the id of the body alone.
	for _, in := range []string{
		`{"artifact_id":"x","a":1,"b":2}`,
		`{"a":1,"artifact_id":{"n":[1]},"b":2}`,
		`{"b":2,"a":1,"artifact_id":null}`,
		`{"b":2,"a":1,"artifact_id":"` + want.String() + `"}`,
	} {
		got, err := canon.ID([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	only, _ := canon.ID([]byte(`{"artifact_id":1}`))
	empty, _ := canon.ID([]byte(`{}`))
	if only != empty {
		t.Error("an object with only artifact_id must hash as {}")
	}
	nested, _ := canon.ID([]byte(`{"a":{"artifact_id":1}}`))
	bare, _ := canon.ID([]byte(`{"a":{}}`))
	if nested == bare {
		t.Error("nested artifact_id removed")
	}
	if _, err := canon.ID([]byte(`[1]`)); !errors.Is(err, canon.ErrTopLevel) {
		t.Errorf("array: %v", err)
	}
	// Verify.
	ok := `{"a":1,"b":2,"artifact_id":"` + want.String() + `"}`
	if got, err := canon.Verify([]byte(ok)); err != nil || got != want {
		t.Errorf("verify: %s %v", got, err)
	}
	for _, tc := range []struct {
		in   string
		want *canon.Error
	}{
		{`{"a":1,"b":2}`, canon.ErrIDMissing},
		{`{"a":1,"b":2,"artifact_id":7}`, canon.ErrIDNotString},
		{`{"a":1,"b":2,"artifact_id":"` + strings.ToUpper(want.String()) + `"}`, canon.ErrIDSyntax},
		{`{"a":1,"b":2,"artifact_id":"` + want.String()[:70] + `"}`, canon.ErrIDSyntax},
		{`{"a":1,"b":3,"artifact_id":"` + want.String() + `"}`, canon.ErrIDMismatch},
		{`[]`, canon.ErrTopLevel},
	} {
		if _, err := canon.Verify([]byte(tc.in)); !errors.Is(err, tc.want) {
			t.Errorf("verify %s: %v, want %s", tc.in, err, tc.want.Code)
		}
	}
}

func TestDigest_Text(t *testing.T) {
	d, _ := canon.ID([]byte(`{}`))
	s := d.String()
	if !canon.ValidID(s) {
		t.Fatalf("%s not valid", s)
	}
	back, ok := canon.ParseDigest(s)
	if !ok || back != d {
		t.Fatal("round trip")
	}
	for _, bad := range []string{"", "sha256:", s[:70], s + "0", "SHA256:" + s[7:], strings.ToUpper(s), "sha256:" + strings.Repeat("g", 64)} {
		if canon.ValidID(bad) {
			t.Errorf("%q valid", bad)
		}
	}
	var u canon.Digest
	if err := u.UnmarshalText([]byte("nope")); !errors.Is(err, canon.ErrIDSyntax) {
		t.Errorf("unmarshal: %v", err)
	}
}

// ID(x) == ID(Canonicalize(x)), and canonicalization is idempotent.
func TestCanonicalizer_Idempotent(t *testing.T) {
	for _, d := range benchCorpus(64, 2) {
		c1, err := canon.Canonicalize(canon.AMD, d)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := canon.Canonicalize(canon.AMD, c1)
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("not idempotent: %v", err)
		}
		id1, _ := canon.ID(d)
		id2, _ := canon.ID(c1)
		if id1 != id2 {
			t.Fatal("ID(x) != ID(Canonicalize(x))")
		}
	}
}

// A warmed-up Canonicalizer does not allocate per document.
func TestCanonicalizer_NoAllocs(t *testing.T) {
	docs := benchCorpus(32, 2)
	c := canon.New(canon.AMD)
	j := canon.New(canon.JCS)
	run := func() {
		for _, d := range docs {
			if _, _, err := c.ID(d); err != nil {
				t.Fatal(err)
			}
			if _, _, err := j.Digest(d); err != nil {
				t.Fatal(err)
			}
		}
	}
	run()
	if n := testing.AllocsPerRun(20, run); n != 0 {
		t.Errorf("%v allocations per run of %d documents", n, len(docs))
	}
}

func TestError_Format(t *testing.T) {
	_, err := canon.Canonicalize(canon.AMD, []byte(`{"a":1,"a":2}`))
	if got := err.Error(); got != `canon: duplicate object member name: "a" (json.duplicate_name at byte 7)` {
		t.Errorf("message %q", got)
	}
	seen := map[string]bool{}
	for _, e := range canon.Codes {
		if seen[e.Code] {
			t.Errorf("code %s twice", e.Code)
		}
		seen[e.Code] = true
		if e.Class == "" || !strings.Contains(e.Code, ".") {
			t.Errorf("bad sentinel %+v", e)
		}
	}
}

// Where a document breaks several rules, the fault upstream reports first
// is reported (docs/ERRORS.md, "Precedence").
func TestCanonicalizer_Precedence(t *testing.T) {
	run31 := "a" + strings.Repeat("\u0301", 31)
	deep := strings.Repeat("[", 70) + strings.Repeat("]", 70)
	tests := []struct {
		name    string
		p       canon.Profile
		in      string
		wantErr *canon.Error
		offset  int64
	}{
		{"duplicate before a surrogate in a value", canon.AMD, `{"a":"\ud800","a":2}`, canon.ErrDuplicateName, 14},
		{"duplicate before a surrogate in a value, jcs", canon.JCS, `{"a":"\ud800","a":2}`, canon.ErrDuplicateName, 14},
		{"invalid utf-8 anywhere first", canon.AMD, "{\"f\":\"\\ud800\",\"f\":-9007199254740992,\"f\":1.5,\"f\":\"\xff\"}", canon.ErrInvalidUTF8, 49},
		{"invalid utf-8 after a fraction", canon.AMD, "{\"a\":1.5,\"b\":\"\xff\"}", canon.ErrInvalidUTF8, 14},
		{"invalid utf-8 after a syntax error", canon.AMD, "{\"a\":tru,\"b\":\"\xc0\xaf\"}", canon.ErrInvalidUTF8, 14},
		{"invalid utf-8 after the depth limit", canon.AMD, `{"a":` + deep + ",\"b\":\"\xff\"}", canon.ErrInvalidUTF8, 151},
		{"invalid utf-8 before a bom", canon.AMD, "\uFEFF{\"a\":\"\xff\"}", canon.ErrInvalidUTF8, 9},
		{"bom before syntax", canon.AMD, "\uFEFF{", canon.ErrBOM, 0},
		{"fraction before a broken exponent", canon.AMD, `{"a":1.5e}`, canon.ErrFraction, 5},
		{"broken exponent without a fraction", canon.AMD, `{"a":1e}`, canon.ErrInvalidNumber, 7},
		{"range before a broken fraction", canon.AMD, `{"a":9007199254740992.}`, canon.ErrIntegerRange, 5},
		{"digit limit before a broken exponent", canon.AMD, `{"a":10000000000000000e}`, canon.ErrIntegerDigits, 5},
		{"broken exponent under jcs", canon.JCS, `[1.5e]`, canon.ErrInvalidNumber, 5},
		{"fraction before the object closes", canon.AMD, `{"a":1,"a":2,"b":1.5}`, canon.ErrFraction, 17},
		{"inner object closes first", canon.AMD, "{\"\u00e9\":1,\"e\u0301\":{\"k\":1,\"k\":2}}", canon.ErrDuplicateName, 21},
		{"surrogate in a value after trailing data", canon.AMD, `{"a":"\ud800"} x`, canon.ErrTrailingData, 15},
		{"surrogate in a value before the top level", canon.AMD, `["\ud800"]`, canon.ErrLoneSurrogate, 2},
		{"surrogate values in document order", canon.AMD, `{"b":"\udc00","a":"\ud800"}`, canon.ErrLoneSurrogate, 6},
		{"syntax error after a surrogate in the same string", canon.AMD, `{"a":"\ud800\q"}`, canon.ErrInvalidEscape, 12},
		{"surrogate name at its first occurrence", canon.AMD, `{"\ud800":1,"\ud800":2}`, canon.ErrLoneSurrogate, 2},
		{"duplicate before a later surrogate name", canon.AMD, `{"a":1,"a":2,"\ud800":3}`, canon.ErrDuplicateName, 7},
		{"surrogate name before a later duplicate", canon.AMD, `{"\ud800":1,"a":1,"a":2}`, canon.ErrLoneSurrogate, 2},
		{"collision before a later surrogate name", canon.AMD, "{\"\u00e9\":1,\"e\u0301\":2,\"\\ud800\":3}", canon.ErrNFCCollision, 8},
		{"surrogate name before a value surrogate", canon.AMD, `{"a":"\ud800","\udc00":1}`, canon.ErrLoneSurrogate, 15},
		{"surrogate name when its object closes", canon.AMD, `{"\ud800":1.5}`, canon.ErrFraction, 10},
		{"depth where it is met", canon.AMD, `{"a":1,"a":` + deep + `}`, canon.ErrDepth, 74},
		{"duplicate before a non-starter run", canon.AMD, `{"s":"` + run31 + `","k":1,"k":2}`, canon.ErrDuplicateName, 77},
		{"non-starter run names are duplicates", canon.AMD, `{"` + run31 + `":1,"` + run31 + `":2}`, canon.ErrDuplicateName, 69},
		{"non-starter run before a later surrogate", canon.AMD, `{"s":"` + run31 + `","t":"\ud800"}`, canon.ErrNonstarterRun, 5},
		{"surrogate before a later non-starter run", canon.AMD, `{"t":"\ud800","s":"` + run31 + `"}`, canon.ErrLoneSurrogate, 6},
		{"non-starter run before the top level", canon.AMD, `["` + run31 + `"]`, canon.ErrNonstarterRun, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := canon.New(tc.p).Digest([]byte(tc.in))
			if tc.p == canon.AMD {
				_, err = canon.ID([]byte(tc.in))
			}
			var ce *canon.Error
			if !errors.As(err, &ce) || !errors.Is(err, tc.wantErr) || ce.Offset != tc.offset {
				t.Fatalf("err = %v, want %s at %d", err, tc.wantErr.Code, tc.offset)
			}
			if want := model([]byte(tc.in), modelOpts{limits: true, id: true}); tc.p == canon.AMD && !agrees(outcome(err), want) {
				t.Errorf("the model says %s", describe(want))
			}
		})
	}
}
