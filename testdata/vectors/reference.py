"""Independent reference model of parley's two canonical formats.

Used only to produce the expected outputs of the published vectors
(generate.py); parley's Go code never runs it. It is deliberately written
in a different language and style from the Go implementation: Python's json
module does the parsing, unicodedata does NFC, and the profile rules are
applied to the parsed value afterwards.
"""

import hashlib
import json
import unicodedata
from decimal import Decimal, InvalidOperation

MAX = 2**53 - 1
MAX_DEPTH = 64


class Reject(Exception):
    def __init__(self, error_class, why):
        super().__init__(why)
        self.error_class = error_class


class Num:
    """A number token kept as text until the profile decides."""

    def __init__(self, text):
        self.text = text


def _pairs(pairs):
    seen = set()
    for name, _ in pairs:
        if name in seen:
            raise Reject("malformed_input", "duplicate name %r" % name)
        seen.add(name)
    return ("obj", pairs)


def _constant(c):
    raise Reject("unsupported_value", "non-finite %s" % c)


def parse(data: bytes):
    if data.startswith(b"\xef\xbb\xbf"):
        raise Reject("malformed_input", "bom")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Reject("malformed_input", "utf-8")
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_int=Num,
                          parse_float=Num, parse_constant=_constant)
    except json.JSONDecodeError as e:
        raise Reject("malformed_input", str(e))


def _check_str(s):
    for ch in s:
        if 0xD800 <= ord(ch) <= 0xDFFF:
            raise Reject("unsupported_value", "lone surrogate")
    return s


def _amd_number(text):
    if any(c in text for c in ".eE"):
        raise Reject("unsupported_value", "fraction or exponent")
    digits = text.lstrip("-")
    if len(digits) > 16:
        raise Reject("unsupported_value", "too many digits")
    v = int(text)
    if abs(v) > MAX:
        raise Reject("unsupported_value", "range")
    return v


def _jcs_number(text):
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise Reject("malformed_input", "number")
    if d != 0 and d.adjusted() > 16:
        raise Reject("unsupported_value", "range")
    if d != d.to_integral_value():
        raise Reject("unsupported_value", "non-integer")
    v = int(d)
    if abs(v) > MAX:
        raise Reject("unsupported_value", "range")
    return v


def normalize(value, profile, depth=0):
    """Apply the profile to a parsed value; return a plain tree."""
    if isinstance(value, tuple):  # object
        if depth + 1 > MAX_DEPTH:
            raise Reject("unsupported_value", "depth")
        out = {}
        raw = {}
        for name, v in value[1]:
            name = _check_str(name)
            key = unicodedata.normalize("NFC", name) if profile == "amd" else name
            if key in out:
                cls = "normalization_collision" if raw[key] != name else "malformed_input"
                raise Reject(cls, "collision %r" % key)
            raw[key] = name
            out[key] = normalize(v, profile, depth + 1)
        return out
    if isinstance(value, list):
        if depth + 1 > MAX_DEPTH:
            raise Reject("unsupported_value", "depth")
        return [normalize(v, profile, depth + 1) for v in value]
    if isinstance(value, str):
        s = _check_str(value)
        return unicodedata.normalize("NFC", s) if profile == "amd" else s
    if isinstance(value, Num):
        return _amd_number(value.text) if profile == "amd" else _jcs_number(value.text)
    return value  # None, True, False


_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f",
          "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(s):
    out = []
    for ch in s:
        if ch in _SHORT:
            out.append(_SHORT[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def serialize(v, profile):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list):
        return "[" + ",".join(serialize(x, profile) for x in v) + "]"
    if profile == "amd":
        keys = sorted(v, key=lambda k: k.encode("utf-8"))
    else:
        keys = sorted(v, key=lambda k: k.encode("utf-16-be"))
    return "{" + ",".join(_string(k) + ":" + serialize(v[k], profile) for k in keys) + "}"


def canonical(data: bytes, profile: str) -> bytes:
    return serialize(normalize(parse(data), profile), profile).encode("utf-8")


def artifact_id(data: bytes) -> str:
    tree = normalize(parse(data), "amd")
    if not isinstance(tree, dict):
        raise Reject("unsupported_value", "top level not an object")
    tree.pop("artifact_id", None)
    return "sha256:" + hashlib.sha256(serialize(tree, "amd").encode("utf-8")).hexdigest()


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(canonical(data, "jcs")).hexdigest()
