package canon_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/internal/jsontest"
)

// Inputs built to sit just inside or just outside what the fast path of
// ID and Verify takes. Each is judged with the fast path and with the full
// parser alone (judgeBothWays, judgeWith); want says whether the fast path
// must take it (fastYes), must turn it down (fastNo), or either (fastAny).

type fastWant int

const (
	fastAny fastWant = iota
	fastYes
	fastNo
)

type fastCase struct {
	in   string
	want fastWant
}

func runFastCases(t *testing.T, cases []fastCase) {
	t.Helper()
	defer canon.SetFast(true)
	for _, tc := range cases {
		took := judgeBothWays(t, []byte(tc.in))
		switch {
		case tc.want == fastYes && !took:
			t.Errorf("the fast path turned down %q", clip([]byte(tc.in)))
		case tc.want == fastNo && took:
			t.Errorf("the fast path took %q", clip([]byte(tc.in)))
		}
	}
}

// judgeWith is judgeBothWays for Canonicalizers built with opts: ID and
// Verify with the fast path and with the full parser alone must agree on
// the canonical bytes, the id and the error, an input the fast path takes
// must be its own canonical form, and the top-level members must be
// reported exactly when the fast path took the input.
func judgeWith(t *testing.T, data []byte, opts ...canon.Option) bool {
	t.Helper()
	defer canon.SetFast(true)
	full := canon.New(canon.AMD, opts...)
	quick := canon.New(canon.AMD, opts...)
	took := quick.Fast(data)
	for _, op := range []struct {
		name string
		fn   func(*canon.Canonicalizer, []byte) ([]byte, canon.Digest, error)
	}{{"ID", (*canon.Canonicalizer).ID}, {"Verify", (*canon.Canonicalizer).Verify}} {
		canon.SetFast(false)
		cf, idf, errf := op.fn(full, data)
		cf = bytes.Clone(cf)
		canon.SetFast(true)
		cq, idq, errq := op.fn(quick, data)
		if !sameError(errf, errq) || idf != idq || !bytes.Equal(cf, cq) {
			t.Fatalf("%s of %q: full parser %q %v %v, with the fast path %q %v %v", op.name, clip(data), clip(cf), idf, errf, clip(cq), idq, errq)
		}
		if took && (errf != nil && op.name == "ID" || !bytes.Equal(cf, data) && errf == nil) {
			t.Fatalf("the fast path took %q, which the full parser writes %q (%v)", clip(data), clip(cf), errf)
		}
		if took {
			checkTopMembers(t, data, quick.TopMembers())
		} else if quick.TopMembers() != nil {
			t.Fatalf("%s of %q: members without the fast path", op.name, clip(data))
		}
	}
	return took
}

func TestFastAttack_Numbers(t *testing.T) {
	cases := []fastCase{
		{`{"a":0}`, fastYes},
		{`{"a":-0}`, fastNo},
		{`{"a":[-0]}`, fastNo},
		{`{"a":{"b":-0}}`, fastNo},
		{`{"a":-1}`, fastYes},
		{`{"a":1}`, fastYes},
		{`{"a":00}`, fastNo},
		{`{"a":01}`, fastNo},
		{`{"a":-01}`, fastNo},
		{`{"a":-00}`, fastNo},
		{`{"a":0.0}`, fastNo},
		{`{"a":1.0}`, fastNo},
		{`{"a":-0.0}`, fastNo},
		{`{"a":1e0}`, fastNo},
		{`{"a":1E2}`, fastNo},
		{`{"a":0e0}`, fastNo},
		{`{"a":1e+0}`, fastNo},
		{`{"a":1.}`, fastNo},
		{`{"a":1e}`, fastNo},
		{`{"a":1.5e}`, fastNo},
		{`{"a":-}`, fastNo},
		{`{"a":--1}`, fastNo},
		{`{"a":+1}`, fastNo},
		{`{"a":.5}`, fastNo},
		{`{"a":-.5}`, fastNo},
		{`{"a":0x10}`, fastNo},
		{`{"a":9007199254740991}`, fastYes},
		{`{"a":-9007199254740991}`, fastYes},
		{`{"a":9007199254740992}`, fastNo},
		{`{"a":-9007199254740992}`, fastNo},
		{`{"a":9007199254740993}`, fastNo},
		{`{"a":9999999999999999}`, fastNo},
		{`{"a":1000000000000000}`, fastYes},
		{`{"a":10000000000000000}`, fastNo},
		{`{"a":-10000000000000000}`, fastNo},
		{`{"a":18446744073709551615}`, fastNo},
		{`{"a":18446744073709551616}`, fastNo},
		{`{"a":99999999999999999999999999999999999}`, fastNo},
		{`{"a":0000000000000000001}`, fastNo},
		{`{"a":[1,-1,0,9007199254740991,-9007199254740991]}`, fastYes},
		{`{"a":[0,]}`, fastNo},
		{`{"a":[01]}`, fastNo},
		{`{"a":[9007199254740992]}`, fastNo},
		{`{"a":1`, fastNo},
		{`{"a":-`, fastNo},
		{`{"a":0`, fastNo},
		{`{"a":-9`, fastNo},
	}
	// What may follow a number: only ',', '}' and ']' keep it plain.
	for _, after := range []string{" ", "\t", "\n", "\r", "/", "x", `"`, ":", "{", "[", "\x00", "\x7f", "\x80", "é", "-", "+", ".", "e", "E"} {
		for _, num := range []string{"0", "-1", "7", "9007199254740991"} {
			cases = append(cases, fastCase{`{"a":` + num + after + `}`, fastNo})
			cases = append(cases, fastCase{`{"a":[` + num + after + `]}`, fastNo})
			cases = append(cases, fastCase{`{"a":` + num + after + `,"b":1}`, fastNo})
		}
	}
	// Every length of integer, both signs, inside and outside the limits.
	for n := 1; n <= 20; n++ {
		for _, d := range []string{"1", "9"} {
			num := d + strings.Repeat("0", n-1)
			cases = append(cases, fastCase{`{"a":` + num + `}`, fastAny}, fastCase{`{"a":-` + num + `}`, fastAny})
			num = strings.Repeat(d, n)
			cases = append(cases, fastCase{`{"a":` + num + `}`, fastAny}, fastCase{`{"a":[-` + num + `]}`, fastAny})
		}
	}
	runFastCases(t, cases)
}

func TestFastAttack_Strings(t *testing.T) {
	cases := []fastCase{
		{`{"a":""}`, fastYes},
		{`{"a":"é"}`, fastYes},                    // U+00E9, precomposed
		{"{\"a\":\"e\u0301\"}", fastNo},           // decomposed: NFC changes it
		{"{\"a\":\"\u0301\"}", fastNo},            // a lone combining mark
		{"{\"a\":\"\u0301e\"}", fastNo},           // a combining mark first
		{`{"a":"\u00e9"}`, fastNo},                // an escape
		{`{"a":"\/"}`, fastNo},                    // an escape written as is
		{`{"a":"a\"b"}`, fastNo},                  // an escaped quote
		{`{"a":"a\\b"}`, fastNo},                  // an escaped backslash
		{"{\"a\":\"é\\\\\"}", fastNo},             // backslash after non-ASCII
		{"{\"a\":\"\u212b\"}", fastNo},            // ANGSTROM SIGN: NFC is U+00C5
		{"{\"a\":\"\u2126\"}", fastNo},            // OHM SIGN: NFC is U+03A9
		{"{\"a\":\"\uf900\"}", fastNo},            // CJK compatibility ideograph
		{"{\"a\":\"\u0958\"}", fastNo},            // composition exclusion
		{"{\"a\":\"\u0344\"}", fastNo},            // decomposes into two marks
		{"{\"a\":\"\uac00\"}", fastYes},           // Hangul syllable LV
		{"{\"a\":\"\u1100\u1161\"}", fastNo},      // Hangul L V: composes
		{"{\"a\":\"\uac00\u11a8\"}", fastNo},      // Hangul LV T: composes
		{"{\"a\":\"\u00c5\"}", fastYes},           // precomposed A-ring
		{"{\"a\":\"A\u030a\"}", fastNo},           // A + ring
		{"{\"a\":\"\x7f\"}", fastYes},             // DEL stands for itself
		{"{\"a\":\"\xc2\x80\xc2\x9f\"}", fastYes}, // C1 controls stand for themselves
		{"{\"a\":\"\xc2\x85\"}", fastYes},         // NEL
		{"{\"a\":\"\xef\xbb\xbf\"}", fastYes},     // U+FEFF inside a string
		{"{\"a\":\"\xef\xbf\xbe\xef\xbf\xbf\"}", fastAny},
		{"{\"a\":\"\xf0\x9f\x98\x80\"}", fastYes}, // U+1F600
		{"{\"a\":\"\xf0\xa0\x80\x80\"}", fastAny}, // U+20000, plane 2
		{"{\"a\":\"\xf0\xaf\xa0\x80\"}", fastNo},  // U+2F800, compatibility ideograph
		{"{\"a\":\"\xf0\xb0\x80\x80\"}", fastAny}, // U+30000, plane 3
		{"{\"a\":\"\xf1\x80\x80\x80\"}", fastNo},  // U+40000, plane 4
		{"{\"a\":\"\xf3\xa0\x80\x81\"}", fastNo},  // U+E0001 tag
		{"{\"a\":\"\xf3\xb0\x80\x80\"}", fastNo},  // U+F0000 private use
		{"{\"a\":\"\xf4\x8f\xbf\xbf\"}", fastNo},  // U+10FFFF
		{"{\"a\":\"\xee\x80\x80\"}", fastAny},     // U+E000 private use
		{"{\"a\":\"\x00\"}", fastNo},
		{"{\"a\":\"\x1f\"}", fastNo},
		{"{\"a\":\"\t\"}", fastNo},
		{"{\"a\":\"\n\"}", fastNo},
		{"{\"a\":\"abcdefg\x01\"}", fastNo},
		{"{\"a\":\"\xff\"}", fastNo},
		{"{\"a\":\"\xfe\"}", fastNo},
		{"{\"a\":\"\x80\"}", fastNo},
		{"{\"a\":\"\xbf\"}", fastNo},
		{"{\"a\":\"\xc0\x80\"}", fastNo},                 // overlong NUL
		{"{\"a\":\"\xc1\xbf\"}", fastNo},                 // overlong
		{"{\"a\":\"\xc2\"}", fastNo},                     // truncated
		{"{\"a\":\"\xc2\x20\"}", fastNo},                 // lead byte then ASCII
		{"{\"a\":\"\xc3\xc3\xa9\"}", fastNo},             // lead byte then lead byte
		{"{\"a\":\"\xe0\x80\x80\"}", fastNo},             // overlong
		{"{\"a\":\"\xe0\x9f\xbf\"}", fastNo},             // overlong
		{"{\"a\":\"\xe2\x82\"}", fastNo},                 // truncated
		{"{\"a\":\"\xe2\x82\xe2\x82\xac\"}", fastNo},     // truncated then valid
		{"{\"a\":\"\xe1\x80\x22\"}", fastNo},             // the quote as a third byte
		{"{\"a\":\"\xe1\x22\x80\"}", fastNo},             // the quote as a second byte
		{"{\"a\":\"\xc3\x22}", fastNo},                   // the quote as a continuation
		{"{\"a\":\"\xed\x9f\xbf\"}", fastAny},            // U+D7FF
		{"{\"a\":\"\xed\xa0\x80\"}", fastNo},             // U+D800 in UTF-8
		{"{\"a\":\"\xed\xb0\x80\"}", fastNo},             // U+DC00 in UTF-8
		{"{\"a\":\"\xed\xbf\xbf\"}", fastNo},             // U+DFFF in UTF-8
		{"{\"a\":\"\xed\xa0\xbd\xed\xb8\x80\"}", fastNo}, // CESU-8 pair
		{"{\"a\":\"\xf0\x80\x80\x80\"}", fastNo},         // overlong
		{"{\"a\":\"\xf0\x8f\xbf\xbf\"}", fastNo},         // overlong
		{"{\"a\":\"\xf4\x90\x80\x80\"}", fastNo},         // above U+10FFFF
		{"{\"a\":\"\xf5\x80\x80\x80\"}", fastNo},
		{"{\"a\":\"\xf8\x88\x80\x80\x80\"}", fastNo},
		{"{\"a\":\"\xf0\x9f\x98\"}", fastNo}, // truncated
		{`{"a":"abc`, fastNo},
		{"{\"a\":\"\xc3\xa9", fastNo},
		{"{\"a\":\"\xc3", fastNo},
		{`{"a":"abc\`, fastNo},
		{`{"a":"`, fastNo},
	}
	// Each byte of interest at each place around the word boundaries of
	// the scans (the eight-byte steps of fastString and the 8- and
	// 32-byte steps of scanPlain), in a value and in a name.
	for _, bad := range []struct {
		s    string
		want fastWant
	}{
		{`\`, fastNo}, {"\\n", fastNo}, {"\x00", fastNo}, {"\x1f", fastNo}, {"\x20", fastYes},
		{"\x7f", fastYes}, {"\x80", fastNo}, {"\xff", fastNo}, {"é", fastYes}, {"\u0301", fastNo},
		{"\xed\xa0\x80", fastNo}, {"\u212b", fastNo}, {"\xf0\x9f\x98\x80", fastYes}, {"\xc3", fastNo},
	} {
		for pre := 0; pre <= 40; pre++ {
			for _, post := range []int{0, 1, 7, 8, 9, 33} {
				s := strings.Repeat("x", pre) + bad.s + strings.Repeat("y", post)
				s2 := strings.Repeat("é", pre%5) + s
				cases = append(cases,
					fastCase{`{"a":"` + s + `"}`, bad.want},
					fastCase{`{"` + s + `":1}`, bad.want},
					fastCase{`{"a":"` + s2 + `"}`, bad.want},
					fastCase{`{"a":["` + s + `","` + s + `"]}`, bad.want})
			}
		}
	}
	runFastCases(t, cases)
}

func TestFastAttack_Names(t *testing.T) {
	cases := []fastCase{
		{`{"":1}`, fastYes},
		{`{"":1,"":2}`, fastNo},
		{`{"":1,"a":2}`, fastYes},
		{`{"a":1,"":2}`, fastNo},
		{`{"a":1,"a":2}`, fastNo},
		{`{"a":1,"b":2,"a":3}`, fastNo},
		{`{"a":1,"ab":2}`, fastYes},
		{`{"ab":1,"a":2}`, fastNo},
		{`{"a":1,"ab":2,"abc":3}`, fastYes},
		{`{"a":1,"abc":2,"ab":3}`, fastNo},
		{`{"b":1,"a":2}`, fastNo},
		{`{"A":1,"a":2}`, fastYes},
		{`{"a":1,"A":2}`, fastNo},
		{`{"a":1,"a ":2}`, fastYes},
		{`{"a ":1,"a":2}`, fastNo},
		{`{"a":1,"a\u0000":2}`, fastNo},
		{"{\"z\":1,\"é\":2}", fastYes},
		{"{\"é\":1,\"z\":2}", fastNo},
		{"{\"\x7f\":1,\"a\":2}", fastNo},
		{"{\"a\":1,\"\x7f\":2}", fastYes},
		{"{\"\x7f\":1,\"\xc2\x80\":2}", fastYes},
		{"{\"\xc2\x80\":1,\"\x7f\":2}", fastNo},
		// UTF-8 byte order, not UTF-16 order: U+FFFF before U+1F600,
		// U+E000 before U+10000.
		{"{\"\xef\xbf\xbf\":1,\"\xf0\x9f\x98\x80\":2}", fastAny},
		{"{\"\xf0\x9f\x98\x80\":1,\"\xef\xbf\xbf\":2}", fastNo},
		{"{\"\xee\x80\x80\":1,\"\xf0\x90\x80\x80\":2}", fastAny},
		{"{\"\xf0\x90\x80\x80\":1,\"\xee\x80\x80\":2}", fastNo},
		{"{\"\xef\xbc\xa1\":1,\"\xf0\x9f\x98\x80\":2}", fastYes},
		{"{\"\xf0\x9f\x98\x80\":1,\"\xef\xbc\xa1\":2}", fastNo},
		// A name and its NFC twin, and a name only NFC puts out of order.
		{"{\"\u00c5\":1,\"\u212b\":2}", fastNo},
		{"{\"\u212b\":1,\"\u00c5\":2}", fastNo},
		{"{\"A\u030a\":1,\"B\":2}", fastNo},
		{"{\"\u00c5\":1,\"\u00c5\":2}", fastNo},
		{"{\"é\":1,\"é\":2}", fastNo},
		{`{"a":1,"\u0061":2}`, fastNo},
		{`{"\u0061":1}`, fastNo},
		{`{"a"1}`, fastNo},
		{`{"a" :1}`, fastNo},
		{`{"a": 1}`, fastNo},
		{`{"a"`, fastNo},
		{`{"a":`, fastNo},
		{`{"a`, fastNo},
		{`{a:1}`, fastNo},
		{`{'a':1}`, fastNo},
		{"{\"\xff\":1}", fastNo},
		{"{\"\xed\xa0\x80\":1}", fastNo},
		{"{\"a\x00\":1}", fastNo},
		// Duplicates and order in nested objects.
		{`{"a":{"x":1,"x":2}}`, fastNo},
		{`{"a":{"y":1,"x":2}}`, fastNo},
		{`{"a":{"x":1,"y":2},"b":{"x":1,"y":2}}`, fastYes},
		{`{"a":[{"y":1,"x":2}]}`, fastNo},
		{`{"a":[{"x":1},{"x":1}]}`, fastYes},
		{`{"b":{"a":1},"a":1}`, fastNo},
		// The order across nesting levels is each object's own.
		{`{"b":{"z":1},"c":{"a":1}}`, fastYes},
	}
	runFastCases(t, cases)
}

func TestFastAttack_ArtifactID(t *testing.T) {
	zero := `"sha256:` + strings.Repeat("0", 64) + `"`
	cases := []fastCase{
		{`{"artifact_id":1}`, fastYes},
		{`{"artifact_id":-1}`, fastYes},
		{`{"artifact_id":null}`, fastYes},
		{`{"artifact_id":true}`, fastYes},
		{`{"artifact_id":{}}`, fastYes},
		{`{"artifact_id":[]}`, fastYes},
		{`{"artifact_id":""}`, fastYes},
		{`{"artifact_id":"x"}`, fastYes},
		{`{"artifact_id":` + zero + `}`, fastYes},
		{`{"artifact_id":"SHA256:` + strings.Repeat("0", 64) + `"}`, fastYes},
		{`{"artifact_id":"sha256:` + strings.Repeat("A", 64) + `"}`, fastYes},
		{`{"artifact_id":"sha256:` + strings.Repeat("0", 63) + `"}`, fastYes},
		{`{"artifact_id":"sha256:` + strings.Repeat("0", 65) + `"}`, fastYes},
		{`{"artifact_id":` + zero + `,"artifact_id":` + zero + `}`, fastNo},
		{`{"artifact_id":1,"artifact_id":2}`, fastNo},
		{`{"a":1,"artifact_id":1,"artifact_id":2}`, fastNo},
		{`{"a":{"artifact_id":` + zero + `}}`, fastYes},
		{`{"a":[{"artifact_id":` + zero + `}]}`, fastYes},
		{`{"a":{"artifact_id":1},"artifact_id":2}`, fastYes},
		{`{"artifact_i":1,"artifact_id":2,"artifact_idx":3}`, fastYes},
		{`{"artifact_i":1,"artifact_idx":3}`, fastYes},
		{`{"artifact_id ":1}`, fastYes},
		{`{"Artifact_id":1}`, fastYes},
		{`{"artifact_id":2,"artifact_i":1}`, fastNo},
		{`{"artifact_id":"x","b":1}`, fastYes},
		{`{"a":1,"artifact_id":"x"}`, fastYes},
		{`{"a":1,"artifact_id":"x","b":1}`, fastYes},
		{`{"artifact_id":"x","b":01}`, fastNo},
		{`{"artifact_id":"x","b" :1}`, fastNo},
		{`{"artifact_id" :"x"}`, fastNo},
		{`{"artifact_id": "x"}`, fastNo},
		{`{"artifact\u005fid":"x"}`, fastNo},
		{`{"artifact_id":"x"} `, fastNo},
		{jsontest.WithID(), fastYes},
		{jsontest.WithID(`"a":1`), fastYes},
		{jsontest.WithID(`"b":1`), fastYes},
		{jsontest.WithID(`"a":1`, `"b":[1,2,{"artifact_id":"x"}]`), fastYes},
		{jsontest.WithID(`"artifact_i":1`, `"artifact_idx":2`), fastYes},
		{jsontest.WithID(`"payload":{"statement":"é 数据 😀"}`, `"protocol_version":"0.1"`), fastYes},
	}
	// A valid id, then with one byte of the digest changed.
	v := jsontest.WithID(`"a":1`, `"z":2`)
	k := strings.Index(v, "sha256:") + 10
	for _, b := range []byte{'0', 'f', 'A', 'g', ' '} {
		m := []byte(v)
		m[k] = b
		cases = append(cases, fastCase{string(m), fastAny})
	}
	runFastCases(t, cases)
	// The valid ones verify both ways.
	defer canon.SetFast(true)
	for _, on := range []bool{true, false} {
		canon.SetFast(on)
		for _, in := range []string{jsontest.WithID(), jsontest.WithID(`"a":1`), jsontest.WithID(`"b":1`), jsontest.WithID(`"a":1`, `"z":2`)} {
			if _, err := canon.Verify([]byte(in)); err != nil {
				t.Fatalf("fast %v: %s: %v", on, in, err)
			}
		}
	}
}

func TestFastAttack_Structure(t *testing.T) {
	nest := func(open, close string, n int, inner string) string {
		return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
	}
	obj := func(n int, inner string) string { // n levels of {"a":...}
		return strings.Repeat(`{"a":`, n-1) + "{" + inner + "}" + strings.Repeat("}", n-1)
	}
	cases := []fastCase{
		{`{}`, fastYes},
		{`{} `, fastNo},
		{` {}`, fastNo},
		{"{}\n", fastNo},
		{"\xef\xbb\xbf{}", fastNo},
		{"\xef\xbb\xbf{\"a\":1}", fastNo},
		{`{}{}`, fastNo},
		{`{}}`, fastNo},
		{`{}x`, fastNo},
		{"{}\x00", fastNo},
		{`{"a":1}}`, fastNo},
		{`{"a":1},`, fastNo},
		{`[]`, fastNo},
		{`[{}]`, fastNo},
		{`"a"`, fastNo},
		{`1`, fastNo},
		{`null`, fastNo},
		{``, fastNo},
		{`{`, fastNo},
		{`}`, fastNo},
		{`{ }`, fastNo},
		{`{"a":1,}`, fastNo},
		{`{,}`, fastNo},
		{`{,"a":1}`, fastNo},
		{`{"a":1,,"b":2}`, fastNo},
		{`{"a":1 "b":2}`, fastNo},
		{`{"a":1;"b":2}`, fastNo},
		{`{"a":[1,]}`, fastNo},
		{`{"a":[,1]}`, fastNo},
		{`{"a":[1 ]}`, fastNo},
		{`{"a":[ 1]}`, fastNo},
		{`{"a":[}`, fastNo},
		{`{"a":[1}`, fastNo},
		{`{"a":{]}`, fastNo},
		{`{"a":[1]]}`, fastNo},
		{`{"a":[[]]}`, fastYes},
		{`{"a":[{}]}`, fastYes},
		{`{"a":[[],{},"",0,true,false,null]}`, fastYes},
		{`{"a":true,"b":false,"c":null}`, fastYes},
		{`{"a":tru}`, fastNo},
		{`{"a":t}`, fastNo},
		{`{"a":truex}`, fastNo},
		{`{"a":true1}`, fastNo},
		{`{"a":nul}`, fastNo},
		{`{"a":nulll}`, fastNo},
		{`{"a":True}`, fastNo},
		{`{"a":NULL}`, fastNo},
		{`{"a":NaN}`, fastNo},
		{`{"a":Infinity}`, fastNo},
		{`{"a":-Infinity}`, fastNo},
		{`{"a":undefined}`, fastNo},
		{`{"a":true`, fastNo},
		{`{"a":[true`, fastNo},
		{`{"a":[`, fastNo},
		{`{"a":{`, fastNo},
		{`{"a":{"b":1}`, fastNo},
		{"{\"a\":\x00}", fastNo},
		{"{\"a\":\xc3\xa9}", fastNo},
		{"{\"a\":\xff}", fastNo},
		{"{\"a\":1}\xff", fastNo},
		{"{\"a\":1,\xff}", fastNo},
	}
	// The depth limit: the top-level object is depth 1, 64 is admitted.
	for _, n := range []int{62, 63, 64, 65, 66, 100} {
		want := fastYes
		if n > canon.DefaultMaxDepth {
			want = fastNo
		}
		cases = append(cases,
			fastCase{obj(n, ""), want},
			fastCase{obj(n, `"b":1`), want},
			fastCase{`{"a":` + nest("[", "]", n-1, "") + "}", want},
			fastCase{`{"a":` + nest("[", "]", n-1, "1") + "}", want},
			fastCase{`{"a":` + nest("[", "]", n-2, "{}") + "}", want},
			fastCase{`{"a":` + nest(`[{"b":`, "}]", (n-1)/2, "0") + "}", fastAny},
		)
	}
	// A deep value inside the top level, then a later member.
	cases = append(cases,
		fastCase{`{"a":` + nest("[", "]", 63, "") + `,"b":1}`, fastYes},
		fastCase{`{"a":` + nest("[", "]", 64, "") + `,"b":1}`, fastNo},
		fastCase{`{"a":1,"b":` + nest("[", "]", 64, "") + `}`, fastNo},
	)
	runFastCases(t, cases)
}

// Every option changes a limit the fast path checks as well.
func TestFastAttack_Options(t *testing.T) {
	nestArr := func(n int) string { // top-level object, then n-1 arrays
		if n == 1 {
			return `{}`
		}
		return `{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + "}"
	}
	nestObj := func(n int) string {
		return strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1)
	}
	for _, d := range []int{-1, 0, 1, 2, 3, 5, 63, 64, 65, 200, canon.MaxDepthCeiling, canon.MaxDepthCeiling + 1} {
		limit := d
		switch {
		case d < 1:
			limit = canon.DefaultMaxDepth
		case d > canon.MaxDepthCeiling:
			limit = canon.MaxDepthCeiling
		}
		for _, n := range []int{1, 2, 3, 4, 6, 63, 64, 65, 66, 199, 200, 201, canon.MaxDepthCeiling, canon.MaxDepthCeiling + 1} {
			for _, in := range []string{nestArr(n), nestObj(n)} {
				took := judgeWith(t, []byte(in), canon.WithMaxDepth(d))
				if took != (n <= limit) {
					t.Errorf("WithMaxDepth(%d), depth %d: fast path took it: %v", d, n, took)
				}
			}
		}
	}
	for _, in := range []string{`{}`, `{"a":1}`, jsontest.WithID(`"a":[1,2,3]`), `{"a":"` + strings.Repeat("é", 40) + `"}`} {
		L := len(in)
		for _, size := range []int{-1, 0, 1, 2, L - 1, L, L + 1, 1 << 20} {
			took := judgeWith(t, []byte(in), canon.WithMaxSize(size))
			limit := size
			if size < 1 {
				limit = canon.DefaultMaxSize
			}
			if took != (L <= limit) {
				t.Errorf("WithMaxSize(%d), %d bytes: fast path took it: %v", size, L, took)
			}
		}
	}
	for _, digits := range []int{-1, 0, 1, 2, 5, 15, 16, 17, 100} {
		limit := digits
		if digits < 1 || digits > 16 {
			limit = 16
		}
		for n := 1; n <= 18; n++ {
			for _, num := range []string{"1" + strings.Repeat("0", n-1), "-" + strings.Repeat("9", n), strings.Repeat("9", n)} {
				in := `{"a":[` + num + `]}`
				took := judgeWith(t, []byte(in), canon.WithMaxIntegerDigits(digits))
				if took && n > limit {
					t.Errorf("WithMaxIntegerDigits(%d): fast path took %s", digits, in)
				}
			}
			judgeWith(t, []byte(`{"a":0}`), canon.WithMaxIntegerDigits(digits))
			judgeWith(t, []byte(`{"a":-0}`), canon.WithMaxIntegerDigits(digits))
		}
	}
	// All at once, and an option given twice (the last wins).
	in := []byte(jsontest.WithID(`"a":[[123]]`))
	for _, opts := range [][]canon.Option{
		{canon.WithMaxDepth(3), canon.WithMaxSize(len(in)), canon.WithMaxIntegerDigits(3)},
		{canon.WithMaxDepth(2), canon.WithMaxSize(len(in)), canon.WithMaxIntegerDigits(3)},
		{canon.WithMaxDepth(3), canon.WithMaxSize(len(in) - 1), canon.WithMaxIntegerDigits(3)},
		{canon.WithMaxDepth(3), canon.WithMaxSize(len(in)), canon.WithMaxIntegerDigits(2)},
		{canon.WithMaxDepth(2), canon.WithMaxDepth(3)},
		{canon.WithMaxDepth(3), canon.WithMaxDepth(2)},
		{canon.WithMaxIntegerDigits(2), canon.WithMaxIntegerDigits(0)},
	} {
		judgeWith(t, in, opts...)
	}
}

// The JCS profile never takes the fast path, even for input that is
// canonical under both profiles.
func TestFastAttack_JCSNeverFast(t *testing.T) {
	defer canon.SetFast(true)
	for _, in := range []string{`{}`, `{"a":1}`, jsontest.WithID(`"a":1`), `{"a":"é","b":[1,true,null]}`} {
		b := []byte(in)
		c := canon.New(canon.JCS)
		if c.Fast(b) {
			t.Fatalf("JCS: the fast path took %s", in)
		}
		canon.SetFast(false)
		cf, idf, errf := canon.New(canon.JCS).ID([]byte(in))
		cf = bytes.Clone(cf)
		canon.SetFast(true)
		cq, idq, errq := c.ID(b)
		if !sameError(errf, errq) || idf != idq || !bytes.Equal(cf, cq) {
			t.Fatalf("JCS ID of %s: %q %v %v, then %q %v %v", in, cf, idf, errf, cq, idq, errq)
		}
		if c.TopMembers() != nil {
			t.Fatalf("JCS: members after ID of %s", in)
		}
		if len(cq) > 0 && &cq[0] == &b[0] {
			t.Fatal("JCS: the input returned as its canonical form")
		}
	}
}

// reuseInputs mixes inputs the fast path takes with and without a
// top-level artifact_id, inputs it starts on and gives up (after it has
// seen an artifact_id), inputs the full parser reorders or rewrites, and
// errors.
func reuseInputs() []string {
	return []string{
		jsontest.WithID(`"a":1`),
		jsontest.WithID(`"b":[1,{"artifact_id":"x"}]`, `"z":"é"`),
		jsontest.WithID(),
		`{"a":1,"b":2}`,
		`{}`,
		`{"artifact_id":1}`,
		`{"artifact_id":"x","b" :1}`,
		`{"artifact_id":"x","b":01}`,
		`{"artifact_id":"x","b":-0}`,
		`{"b":1,"artifact_id":"x","a":2}`,
		` ` + jsontest.WithID(`"a":1`),
		`{"z":1,"artifact_id":"sha256:` + strings.Repeat("0", 64) + `","a":"e` + "\u0301" + `"}`,
		`{"a":"\u00e9","artifact_id":"y"}`,
		`[1,2]`,
		`"artifact_id"`,
		`{"a":`,
		``,
		"{\"a\":\"\xff\"}",
		`{"artifact_id":"x","artifact_id":"y"}`,
	}
}

// A Canonicalizer that has taken the fast path, given up on it, or run
// the full parser for another call answers every next call as a new one
// does: nothing of the previous input (the members, the artifact_id span,
// whether the fast path took it) carries over.
func TestFastAttack_ReuseAgreesWithFresh(t *testing.T) {
	ins := reuseInputs()
	ops := []struct {
		name string
		fn   func(*canon.Canonicalizer, []byte) ([]byte, canon.Digest, error)
	}{
		{"ID", (*canon.Canonicalizer).ID},
		{"Verify", (*canon.Canonicalizer).Verify},
		{"Canonicalize", func(c *canon.Canonicalizer, b []byte) ([]byte, canon.Digest, error) {
			out, err := c.Canonicalize(b)
			return out, canon.Digest{}, err
		}},
		{"Append", func(c *canon.Canonicalizer, b []byte) ([]byte, canon.Digest, error) {
			out, err := c.Append([]byte("prefix"), b)
			return out, canon.Digest{}, err
		}},
		{"Digest", (*canon.Canonicalizer).Digest},
		{"Fast", func(c *canon.Canonicalizer, b []byte) ([]byte, canon.Digest, error) {
			c.Fast(b)
			return nil, canon.Digest{}, nil
		}},
	}
	for _, first := range ins {
		for _, op1 := range ops {
			for _, second := range ins {
				for _, op2 := range ops[:2] {
					c := canon.New(canon.AMD)
					a := []byte(first)
					op1.fn(c, a)
					b := []byte(second)
					got, gid, gerr := op2.fn(c, b)
					got = bytes.Clone(got)
					gtop := c.TopMembers()
					fresh := canon.New(canon.AMD)
					want, wid, werr := op2.fn(fresh, []byte(second))
					wtop := fresh.TopMembers()
					if !sameError(gerr, werr) || gid != wid || !bytes.Equal(got, want) {
						t.Fatalf("%s(%q) then %s(%q): %q %v %v, a new Canonicalizer %q %v %v", op1.name, first, op2.name, second, got, gid, gerr, want, wid, werr)
					}
					if (gtop == nil) != (wtop == nil) && (len(gtop) != 0 || len(wtop) != 0) {
						t.Fatalf("%s(%q) then %s(%q): members %v, a new Canonicalizer %v", op1.name, first, op2.name, second, gtop, wtop)
					}
					for k := range max(len(gtop), len(wtop)) {
						if len(gtop) != len(wtop) || gtop[k] != wtop[k] {
							t.Fatalf("%s(%q) then %s(%q): members %v, a new Canonicalizer %v", op1.name, first, op2.name, second, gtop, wtop)
						}
					}
					if string(a) != first {
						t.Fatalf("%s(%q) then %s(%q): the first input was written to", op1.name, first, op2.name, second)
					}
				}
			}
		}
	}
}

// After a call that did not take the fast path, TopMembers is nil, whatever
// the call before it found.
func TestFastAttack_TopMembersNilAfterOtherCalls(t *testing.T) {
	taken := []byte(jsontest.WithID(`"a":1`, `"b":{"c":[1,2]}`))
	others := []struct {
		name string
		fn   func(*canon.Canonicalizer)
	}{
		{"Canonicalize", func(c *canon.Canonicalizer) { c.Canonicalize([]byte(`{"b":1,"a":2}`)) }},
		{"Canonicalize of a canonical input", func(c *canon.Canonicalizer) { c.Canonicalize(taken) }},
		{"Canonicalize error", func(c *canon.Canonicalizer) { c.Canonicalize([]byte(`{"a":`)) }},
		{"Append", func(c *canon.Canonicalizer) { c.Append(nil, taken) }},
		{"Digest", func(c *canon.Canonicalizer) { c.Digest(taken) }},
		{"ID falling back", func(c *canon.Canonicalizer) { c.ID([]byte(` {"a":1}`)) }},
		{"ID falling back after an artifact_id", func(c *canon.Canonicalizer) { c.ID([]byte(`{"artifact_id":"x","b" :1}`)) }},
		{"ID error", func(c *canon.Canonicalizer) { c.ID([]byte(`{"a":01}`)) }},
		{"ID of an array", func(c *canon.Canonicalizer) { c.ID([]byte(`[1]`)) }},
		{"ID of nothing", func(c *canon.Canonicalizer) { c.ID(nil) }},
		{"Verify falling back", func(c *canon.Canonicalizer) { c.Verify([]byte(`{"b":1,"a":2}`)) }},
		{"Fast declining", func(c *canon.Canonicalizer) { c.Fast([]byte(`{"a":-0}`)) }},
	}
	for _, o := range others {
		c := canon.New(canon.AMD)
		if _, _, err := c.ID(taken); err != nil {
			t.Fatal(err)
		}
		if c.TopMembers() == nil {
			t.Fatalf("no members after ID of %s", taken)
		}
		o.fn(c)
		if top := c.TopMembers(); top != nil {
			t.Fatalf("ID of a canonical input, then %s: TopMembers %v", o.name, top)
		}
	}
	// Under the disabled fast path as well.
	defer canon.SetFast(true)
	c := canon.New(canon.AMD)
	c.ID(taken)
	canon.SetFast(false)
	c.ID(taken)
	if top := c.TopMembers(); top != nil {
		t.Fatalf("ID without the fast path after ID with it: TopMembers %v", top)
	}
}

// The package-level functions draw Canonicalizers from a pool: any
// sequence of them answers as new Canonicalizers do.
func TestFastAttack_PoolSequence(t *testing.T) {
	ins := reuseInputs()
	for round := 0; round < 3; round++ {
		for k, in := range ins {
			b := []byte(in)
			var err1, err2 error
			var d1, d2 canon.Digest
			switch (k + round) % 3 {
			case 0:
				d1, err1 = canon.ID(b)
				_, d2, err2 = canon.New(canon.AMD).ID(b)
			case 1:
				d1, err1 = canon.Verify(b)
				_, d2, err2 = canon.New(canon.AMD).Verify(b)
			case 2:
				c1, e1 := canon.Canonicalize(canon.AMD, b)
				c2, e2 := canon.New(canon.AMD).Canonicalize(b)
				if !bytes.Equal(c1, c2) {
					t.Fatalf("Canonicalize(%q): %q, a new Canonicalizer %q", in, c1, c2)
				}
				err1, err2 = e1, e2
			}
			if d1 != d2 || !sameError(err1, err2) {
				t.Fatalf("%q: %v %v, a new Canonicalizer %v %v", in, d1, err1, d2, err2)
			}
		}
	}
}

// An empty top-level object has no members, however the Canonicalizer was
// used before.
func TestFastAttack_EmptyObjectMembers(t *testing.T) {
	c := canon.New(canon.AMD)
	for _, in := range []string{`{}`, jsontest.WithID(`"a":1`), `{}`} {
		if _, _, err := c.ID([]byte(in)); err != nil {
			t.Fatal(err)
		}
		if in == `{}` && len(c.TopMembers()) != 0 {
			t.Fatalf("members of {}: %v", c.TopMembers())
		}
	}
}

// FuzzFastPathOptions judges inputs both ways under limits drawn by the
// fuzzer (small ones, so that the inputs reach them).
func FuzzFastPathOptions(f *testing.F) {
	for _, in := range reuseInputs() {
		f.Add([]byte(in), uint8(2), uint8(3), uint16(len(in)))
	}
	f.Add([]byte(`{"a":[[1]],"b":{"c":123456}}`), uint8(3), uint8(6), uint16(29))
	f.Fuzz(func(t *testing.T, data []byte, depth, digits uint8, size uint16) {
		judgeWith(t, data, canon.WithMaxDepth(int(depth)), canon.WithMaxIntegerDigits(int(digits)), canon.WithMaxSize(int(size)))
	})
}

// FuzzFastPathReuse runs ID or Verify on one input and then on another with
// the same Canonicalizer: the second answer is a new Canonicalizer's.
func FuzzFastPathReuse(f *testing.F) {
	ins := reuseInputs()
	for k, a := range ins {
		f.Add([]byte(a), []byte(ins[(k+1)%len(ins)]), uint8(k))
	}
	f.Fuzz(func(t *testing.T, a, b []byte, ops uint8) {
		fns := []func(*canon.Canonicalizer, []byte) ([]byte, canon.Digest, error){
			(*canon.Canonicalizer).ID, (*canon.Canonicalizer).Verify, (*canon.Canonicalizer).Digest,
		}
		c := canon.New(canon.AMD)
		fns[int(ops)%3](c, a)
		second := fns[int(ops>>2)%2]
		got, gid, gerr := second(c, b)
		got = bytes.Clone(got)
		gtop := append([]canon.Member(nil), c.TopMembers()...)
		fresh := canon.New(canon.AMD)
		want, wid, werr := second(fresh, b)
		wtop := fresh.TopMembers()
		if !sameError(gerr, werr) || gid != wid || !bytes.Equal(got, want) || len(gtop) != len(wtop) {
			t.Fatalf("%q then %q: %q %v %v %v, a new Canonicalizer %q %v %v %v", clip(a), clip(b), clip(got), gid, gerr, gtop, clip(want), wid, werr, wtop)
		}
		for k := range gtop {
			if gtop[k] != wtop[k] {
				t.Fatalf("%q then %q: members %v, a new Canonicalizer %v", clip(a), clip(b), gtop, wtop)
			}
		}
	})
}
