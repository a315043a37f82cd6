#!/usr/bin/env python3
"""Writes canonical.json, parley's published canonical-profile vectors.

Each vector's input and expected error code are written here by hand; the
expected canonical bytes, artifact ids and digests of accepted inputs, and
the error class of rejected ones, are computed by reference.py, an
independent model of the profile. Run from this folder:

    python3 generate.py

The Go tests (canon/vectors_test.go) then hold parley to the file.
"""

import json
import reference as ref

V = []


def vec(name, inp, code=None, op="id", profile="amd", note="", cls=None, repeat=None):
    V.append(dict(name=name, inp=inp, code=code, op=op, profile=profile,
                  note=note, cls=cls, repeat=repeat))


def b(s):
    return s.encode("utf-8") if isinstance(s, str) else s


CLASS = {
    "json": "malformed_input", "number": "unsupported_value",
    "string": "unsupported_value", "value": "unsupported_value",
    "limit": "unsupported_value", "nfc": "normalization_collision",
    "id.missing": "invalid_artifact_identifier_syntax",
    "id.not_string": "invalid_artifact_identifier_syntax",
    "id.syntax": "invalid_artifact_identifier_syntax",
    "id.mismatch": "artifact_identifier_mismatch",
}


def class_of(code):
    return CLASS.get(code) or CLASS[code.split(".")[0]]


# --- member order and whitespace -------------------------------------------
vec("order-two", '{"b":2,"a":1}', note="unsorted members")
vec("order-reverse-alphabet", '{"e":5,"d":4,"c":3,"b":2,"a":1}')
vec("order-prefix", '{"ab":1,"a":2,"abc":3,"":4}', note="a name sorts after its prefix; the empty name first")
vec("order-case", '{"a":1,"B":2,"b":3,"A":4}', note="uppercase before lowercase (byte order)")
vec("order-digits-punct", '{"_":1,"1":2,"-":3,"~":4,"0":5}')
vec("order-nested", '{"z":{"b":{"y":1,"x":2},"a":3},"a":[{"d":1,"c":2}]}', note="every level is sorted")
vec("order-utf8-bytes", '{"\u00e9":1,"z":2,"\u00c0":3,"\u4e2d":4}', note="U+00C0 < U+00E9 < U+4E2D, all after ASCII")
vec("order-supplementary-after-bmp", '{"\U0001F600":1,"\uff61":2}', note="UTF-8 byte order: U+FF61 before U+1F600 (JCS orders them the other way)")
vec("order-escaped-name", '{"\\u0062":1,"a":2}', note="names are compared after escape decoding")
vec("whitespace-everywhere", ' \t\r\n{ \t"b" \n: [ 1 ,\r2 ] ,\n"a"\t:\r{ } } \n ')
vec("whitespace-crlf-lines", '{\r\n  "a": 1,\r\n  "b": "x"\r\n}\r\n')
vec("empty-object", "{}")
vec("empty-containers", '{"a":[],"b":{},"c":[[],{}]}')
vec("array-order-kept", '{"a":[3,1,2,"b","a"]}', note="arrays keep their order")
vec("literals", '{"f":false,"n":null,"t":true}')

# --- NFC ---------------------------------------------------------------------
vec("nfc-value-combining", '{"s":"e\u0301"}', note="e + U+0301 composes to U+00E9")
vec("nfc-value-escaped-combining", '{"s":"e\\u0301"}', note="the same, spelled with an escape")
vec("nfc-value-already", '{"s":"\u00e9"}')
vec("nfc-value-hangul", '{"s":"\u1100\u1161\u11a8"}', note="conjoining jamo compose to U+AC01")
vec("nfc-value-reorder", '{"s":"a\u0323\u0307"}', note="a + dot below + dot above: composes to U+1EA1 U+0307")
vec("nfc-value-reorder-marks", '{"s":"q\u0307\u0323"}', note="canonical reordering of marks after a base that does not compose")
vec("nfc-value-singleton", '{"s":"\u212b"}', note="ANGSTROM SIGN is a singleton: NFC gives U+00C5")
vec("nfc-value-exclusion", '{"s":"\ufb33"}', note="a composition exclusion: NFC gives U+05D3 U+05BC")
vec("nfc-value-leading-mark", '{"s":"\u0301x"}', note="a string may begin with a combining mark")
vec("nfc-name-combining", '{"e\u0301":1}', note="member names are normalized too")
vec("nfc-name-escaped", '{"e\\u0301t\\u00e9":1}')
vec("nfc-name-reorders", '{"\u00c5b":1,"A\u030aa":2}', note="NFC changes the name's sort position")
vec("nfc-name-singleton-order", '{"\u212b":1,"B":2}', note="U+212B becomes U+00C5 and sorts after B")
vec("nfc-nested-name", '{"o":{"A\u030a":[{"\u1100\u1161":1}]}}')
vec("nfc-nonstarter-run-30", '{"s":"a' + "\u0301" * 30 + '"}', note="30 combining marks: plain NFC")
vec("nfc-nonstarter-run-31", '{"s":"a' + "\u0301" * 31 + '"}', code="string.nonstarter_run",
    note="parley's rule: more than 30 non-starters in a row are refused, because NFC implementations differ on them (x/text inserts U+034F to stay stream-safe)")
vec("nfc-collision", '{"\u00e9":1,"e\u0301":2}', code="nfc.collision", note="distinct names, equal after NFC")
vec("nfc-collision-escaped", '{"\\u00e9":1,"e\\u0301":2}', code="nfc.collision")
vec("nfc-collision-singleton", '{"\u00c5":1,"\u212b":2}', code="nfc.collision")
vec("nfc-collision-nested", '{"a":{"x\u0323\u0307":1,"x\u0307\u0323":2}}', code="nfc.collision", note="mark order differs, NFC equal")

# --- non-BMP -------------------------------------------------------------------
vec("nonbmp-raw", '{"s":"\U0001F600"}')
vec("nonbmp-escaped-pair", '{"s":"\\ud83d\\ude00"}', note="an escaped pair is written raw")
vec("nonbmp-escaped-pair-upper", '{"s":"\\uD83D\\uDE00"}', note="escape hex digits may be uppercase")
vec("nonbmp-name", '{"\U0001D11E":1,"a":2}')
vec("nonbmp-duplicate-by-escape", '{"\U0001F600":1,"\\ud83d\\ude00":2}', code="json.duplicate_name", note="a raw character and its escaped pair are the same name")
vec("nonbmp-plane16", '{"s":"\U0010FFFF"}', note="the last code point")
vec("nonbmp-mixed", '{"s":"a\U0001F44D\u00e9\U00020000z"}')

# --- escaped versus raw spellings ----------------------------------------------
vec("escape-solidus", '{"s":"a\\/b"}', note="solidus is never escaped")
vec("escape-quote-backslash", '{"s":"\\"\\\\"}')
vec("escape-unicode-ascii", '{"s":"\\u0041\\u007a"}', note="escaped ASCII is written raw")
vec("escape-unicode-latin", '{"s":"\\u00e9\\u00E9"}')
vec("escape-unicode-quote", '{"s":"\\u0022\\u005c"}', note="quote and backslash written as \\u are short-escaped")
vec("escape-short-from-long", '{"s":"\\u0008\\u0009\\u000a\\u000c\\u000d"}', note="the five short escapes")
vec("escape-short-kept", '{"s":"\\b\\t\\n\\f\\r"}')
vec("escape-in-name", '{"\\n":1,"\\"":2,"\\\\":3}', note="escaped names sort by their decoded bytes")
vec("escape-nonchar", '{"s":"\\ufdd0\\ufffe\\uffff"}', note="noncharacters are admitted and written raw")
vec("escape-bom-inside", '{"s":"\\ufeff"}', note="U+FEFF inside a string is admitted and written raw")
vec("escape-bidi", '{"s":"\\u202ex\\u202c"}', note="bidi controls are written raw")

# --- every C0 control, DEL, U+2028/2029 ------------------------------------------
for c in range(0x20):
    vec("control-u%04x" % c, '{"s":"\\u%04x"}' % c, note="U+%04X escaped in, canonical escape out" % c)
vec("control-del", '{"s":"\\u007f"}', note="DEL is not a control for the profile: written raw")
vec("control-del-raw", '{"s":"\x7f"}')
vec("control-u2028-u2029", '{"s":"\\u2028\\u2029"}', note="line and paragraph separators are written raw")
vec("control-u2028-raw", '{"s":"\u2028"}')
vec("control-raw-nul", b'{"s":"\x00"}', code="json.control_character", note="raw control characters are malformed")
vec("control-raw-newline", '{"s":"a\nb"}', code="json.control_character")
vec("control-raw-tab", '{"s":"\t"}', code="json.control_character")
vec("control-raw-us", b'{"s":"\x1f"}', code="json.control_character")

# --- artifact_id ----------------------------------------------------------------
vec("id-top-level-stripped", '{"artifact_id":"sha256:' + "0" * 64 + '","a":1}', note="calculate removes the top-level artifact_id whatever its value")
vec("id-top-level-any-value", '{"a":1,"artifact_id":[1,{"x":2}]}')
vec("id-top-level-only-member", '{"artifact_id":"x"}', note="hashes as {}")
vec("id-nested-kept", '{"p":{"artifact_id":"sha256:' + "1" * 64 + '"}}', note="a nested artifact_id is not removed")
vec("id-nested-in-array", '{"references":[{"artifact_id":"sha256:' + "2" * 64 + '"}]}')
vec("id-top-level-not-object", "[1,2]", code="value.top_level_not_object")
vec("id-top-level-string", '"x"', code="value.top_level_not_object")
vec("canonicalize-top-level-array", '[{"b":1,"a":2}]', op="canonicalize", note="canonical bytes exist for any value; ids need an object")

# --- numbers ---------------------------------------------------------------------
vec("number-zero", '{"n":0}')
vec("number-minus-zero", '{"n":-0}', note="-0 is written 0")
vec("number-negative", '{"n":-17}')
vec("number-max", '{"n":9007199254740991}')
vec("number-min", '{"n":-9007199254740991}')
vec("number-over-max", '{"n":9007199254740992}', code="number.out_of_range")
vec("number-under-min", '{"n":-9007199254740992}', code="number.out_of_range")
vec("number-16-digits-over", '{"n":9999999999999999}', code="number.out_of_range")
vec("number-17-digits", '{"n":10000000000000000}', code="limit.integer_digits", note="more than 16 digits is refused before conversion")
vec("number-5000-digits", '{"n":' + "7" * 5000 + '}', code="limit.integer_digits")
vec("number-fraction", '{"n":1.5}', code="number.fraction")
vec("number-fraction-zero", '{"n":1.0}', code="number.fraction", note="integer-valued fractions are refused by syntax")
vec("number-minus-zero-fraction", '{"n":-0.0}', code="number.fraction")
vec("number-exponent", '{"n":1e2}', code="number.exponent")
vec("number-exponent-upper", '{"n":1E2}', code="number.exponent")
vec("number-exponent-zero", '{"n":0e0}', code="number.exponent")
vec("number-nan", '{"n":NaN}', code="number.non_finite")
vec("number-infinity", '{"n":Infinity}', code="number.non_finite")
vec("number-minus-infinity", '{"n":-Infinity}', code="number.non_finite")
vec("number-leading-zero", '{"n":01}', code="json.invalid_number")
vec("number-plus", '{"n":+1}', code="json.syntax")
vec("number-bare-minus", '{"n":-}', code="json.invalid_number")
vec("number-trailing-dot", '{"n":1.}', code="json.invalid_number")
vec("number-leading-dot", '{"n":.5}', code="json.syntax")
vec("number-hex", '{"n":0x10}', code="json.syntax")

# --- malformed input ---------------------------------------------------------------
vec("malformed-empty", "", code="json.empty")
vec("malformed-whitespace-only", " \n", code="json.unexpected_end")
vec("malformed-bom", b"\xef\xbb\xbf{}", code="json.bom")
vec("malformed-utf8-lone-continuation", b'{"s":"\x80"}', code="json.invalid_utf8")
vec("malformed-utf8-overlong", b'{"s":"\xc0\xaf"}', code="json.invalid_utf8")
vec("malformed-utf8-truncated", b'{"s":"\xe2\x82"}', code="json.invalid_utf8")
vec("malformed-utf8-surrogate", b'{"s":"\xed\xa0\x80"}', code="json.invalid_utf8", note="CESU-8: a surrogate encoded in UTF-8")
vec("malformed-utf8-above-max", b'{"s":"\xf4\x90\x80\x80"}', code="json.invalid_utf8")
vec("malformed-utf8-in-name", b'{"\xff":1}', code="json.invalid_utf8")
vec("malformed-utf8-latin1", b'{"s":"caf\xe9"}', code="json.invalid_utf8")
vec("malformed-duplicate", '{"a":1,"a":1}', code="json.duplicate_name")
vec("malformed-duplicate-escape", '{"a":1,"\\u0061":2}', code="json.duplicate_name")
vec("malformed-duplicate-nested", '{"o":[{"k":1,"k":2}]}', code="json.duplicate_name")
vec("malformed-trailing-comma", '{"a":1,}', code="json.syntax")
vec("malformed-trailing-data", '{"a":1}x', code="json.trailing_data")
vec("malformed-two-values", '{} {}', code="json.trailing_data")
vec("malformed-unterminated-object", '{"a":1', code="json.unexpected_end")
vec("malformed-unterminated-string", '{"a":"x', code="json.unexpected_end")
vec("malformed-single-quotes", "{'a':1}", code="json.syntax")
vec("malformed-comment", '{"a":1/*c*/}', code="json.syntax")
vec("malformed-bad-escape", '{"s":"\\x41"}', code="json.invalid_escape")
vec("malformed-short-unicode-escape", '{"s":"\\u41"}', code="json.invalid_escape")
vec("malformed-literal-case", '{"a":True}', code="json.syntax")

# --- unpaired surrogates -------------------------------------------------------------
vec("surrogate-lone-high", '{"s":"\\ud800"}', code="string.unpaired_surrogate")
vec("surrogate-lone-low", '{"s":"\\udc00"}', code="string.unpaired_surrogate")
vec("surrogate-reversed", '{"s":"\\udc00\\ud800"}', code="string.unpaired_surrogate")
vec("surrogate-high-then-ascii", '{"s":"\\ud800\\u0041"}', code="string.unpaired_surrogate")
vec("surrogate-high-then-raw", '{"s":"\\ud83d\u00e9"}', code="string.unpaired_surrogate")
vec("surrogate-in-name", '{"\\udfff":1}', code="string.unpaired_surrogate")

# --- limits -------------------------------------------------------------------------
vec("limit-depth-64", None, repeat=("{\"a\":", "{\"a\":", 63, "1" + "}" * 64), note="64 nested objects: the deepest admitted")
vec("limit-depth-65", None, code="limit.depth", repeat=("{\"a\":", "{\"a\":", 64, "1" + "}" * 65))
vec("limit-depth-65-arrays", None, code="limit.depth", repeat=('{"a":', "[", 64, "]" * 64 + "}"), note="an object holding 64 nested arrays")
vec("limit-depth-100000", None, code="limit.depth", repeat=('{"a":', "[", 100000, ""), note="refused at depth 65, without reading on")
vec("limit-size-at-limit", None, repeat=('{"s":"', "a", 1048576 - 8, '"}'), note="exactly 1 MiB, the default size limit")
vec("limit-size-over", None, code="limit.size", repeat=('{"s":"', "a", 1048576 - 7, '"}'), note="one byte over 1 MiB")

# --- verify -----------------------------------------------------------------------------
GOOD = ref.artifact_id(b'{"a":1}')
vec("verify-ok", '{"a":1,"artifact_id":"%s"}' % GOOD, op="verify")
vec("verify-ok-noncanonical-spelling", '{ "artifact_id" : "%s" ,\n "a" : 1 }' % GOOD, op="verify")
vec("verify-missing", '{"a":1}', code="id.missing", op="verify")
vec("verify-nested-only", '{"a":{"artifact_id":"%s"}}' % GOOD, code="id.missing", op="verify", note="only the top-level member counts")
vec("verify-not-string", '{"a":1,"artifact_id":42}', code="id.not_string", op="verify")
vec("verify-null", '{"a":1,"artifact_id":null}', code="id.not_string", op="verify")
vec("verify-uppercase-hex", '{"a":1,"artifact_id":"%s"}' % GOOD.upper().replace("SHA256", "sha256"), code="id.syntax", op="verify")
vec("verify-uppercase-prefix", '{"a":1,"artifact_id":"SHA256:%s"}' % GOOD[7:], code="id.syntax", op="verify")
vec("verify-short", '{"a":1,"artifact_id":"%s"}' % GOOD[:-1], code="id.syntax", op="verify")
vec("verify-other-algorithm", '{"a":1,"artifact_id":"sha512:%s"}' % GOOD[7:], code="id.syntax", op="verify")
vec("verify-mismatch", '{"a":2,"artifact_id":"%s"}' % GOOD, code="id.mismatch", op="verify")
vec("verify-profile-error-first", '{"a":1.5,"artifact_id":"%s"}' % GOOD, code="number.fraction", op="verify", note="the profile is checked before the identifier")

# --- JCS ------------------------------------------------------------------------------------
vec("jcs-utf16-order", '{"\uff61":true,"\U0001F600":1}', op="canonicalize", profile="jcs", note="U+1F600 (D83D DE00) before U+FF61")
vec("jcs-no-nfc", '{"s":"e\u0301","\u212b":1}', op="canonicalize", profile="jcs")
vec("jcs-nfc-distinct-names", '{"\u00e9":1,"e\u0301":2}', op="canonicalize", profile="jcs", note="no collision without NFC")
vec("jcs-integer-by-value", '[1.0,1e2,-0.0,100e-2,0.5e1,1.000e+1]', op="canonicalize", profile="jcs")
vec("jcs-top-level-scalar", '"x"', op="canonicalize", profile="jcs")
vec("jcs-non-integer", '[0.5]', code="number.non_integer", op="canonicalize", profile="jcs")
vec("jcs-non-integer-long", '[1.0000000000000000000001]', code="number.non_integer", op="canonicalize", profile="jcs")
vec("jcs-out-of-range", '[9007199254740992]', code="number.out_of_range", op="canonicalize", profile="jcs")
vec("jcs-out-of-range-exponent", '[1e21]', code="number.out_of_range", op="canonicalize", profile="jcs")
vec("jcs-huge-exponent", '[1e999999999999]', code="number.out_of_range", op="canonicalize", profile="jcs")
vec("jcs-zero-huge-exponent", '[0e999999999999]', op="canonicalize", profile="jcs")
vec("jcs-duplicate", '{"a":1,"\\u0061":2}', code="json.duplicate_name", op="canonicalize", profile="jcs")


def expand(v):
    if v["repeat"]:
        p, r, n, s = v["repeat"]
        return (p + r * n + s).encode("utf-8")
    return b(v["inp"])


out = []
for v in V:
    data = expand(v)
    e = {"name": v["name"], "profile": v["profile"], "operation": v["op"]}
    if v["note"]:
        e["note"] = v["note"]
    if v["repeat"]:
        p, r, n, s = v["repeat"]
        e["input_repeat"] = {"prefix": p, "unit": r, "count": n, "suffix": s}
    else:
        try:
            text = data.decode("utf-8")
            e["input"] = text
        except UnicodeDecodeError:
            e["input_hex"] = data.hex()
    try:
        if v["code"] == "limit.size":
            raise ref.Reject("unsupported_value", "size")  # the model has no size limit
        if v["code"] == "string.nonstarter_run":
            raise ref.Reject("unsupported_value", "nonstarter run")  # the model's NFC has no such limit
        if v["code"] == "limit.depth" and v["repeat"] and v["repeat"][2] > 1000:
            raise ref.Reject("unsupported_value", "depth")  # too deep for Python's recursion
        if v["profile"] == "jcs":
            c = ref.canonical(data, "jcs")
            got = {"canonical": c.decode("utf-8"), "digest": ref.digest(data)}
        elif v["op"] == "canonicalize":
            got = {"canonical": ref.canonical(data, "amd").decode("utf-8")}
        else:
            got = {"canonical": ref.canonical(data, "amd").decode("utf-8"),
                   "artifact_id": ref.artifact_id(data)}
            if v["op"] == "verify":
                tree = json.loads(data.decode("utf-8"))
                aid = tree.get("artifact_id")
                import re
                if "artifact_id" not in tree:
                    raise ref.Reject("invalid_artifact_identifier_syntax", "missing")
                if not isinstance(aid, str) or not re.fullmatch(r"sha256:[0-9a-f]{64}", aid):
                    raise ref.Reject("invalid_artifact_identifier_syntax", "syntax")
                if aid != got["artifact_id"]:
                    raise ref.Reject("artifact_identifier_mismatch", "mismatch")
    except ref.Reject as r:
        if not v["code"]:
            raise SystemExit("%s: the reference rejects (%s) a vector marked valid" % (v["name"], r))
        if class_of(v["code"]) != r.error_class:
            raise SystemExit("%s: code %s has class %s, the reference says %s (%s)" % (
                v["name"], v["code"], class_of(v["code"]), r.error_class, r))
        e["error_class"] = r.error_class
        e["code"] = v["code"]
    else:
        if v["code"]:
            raise SystemExit("%s: the reference accepts a vector marked %s" % (v["name"], v["code"]))
        if v["repeat"] and len(got["canonical"]) > 4096:
            got["canonical_sha256"] = __import__("hashlib").sha256(got.pop("canonical").encode()).hexdigest()
        e.update(got)
    out.append(e)

names = [e["name"] for e in out]
assert len(names) == len(set(names)), "duplicate names"
with open("canonical.json", "w", encoding="utf-8") as f:
    json.dump({"suite": "parley-canonical-v1", "count": len(out), "vectors": out},
              f, ensure_ascii=False, indent=1)
    f.write("\n")
print("wrote %d vectors" % len(out))
