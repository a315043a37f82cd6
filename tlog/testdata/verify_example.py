#!/usr/bin/env python3
"""An independent check of docs/VERIFY.md's worked example, written from
the document alone: Python's standard library and the `cryptography`
package's Ed25519. Run: python3 tlog/testdata/verify_example.py docs/VERIFY.md
"""
import base64, hashlib, re, struct, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

doc = open(sys.argv[1] if len(sys.argv) > 1 else "docs/VERIFY.md", encoding="utf-8").read()
ex = {m.group(1): m.group(2) for m in re.finditer(r"(?ms)^```text example:([a-z0-9-]+)\n(.*?)^```$", doc)}
sha = lambda b: hashlib.sha256(b).digest()

def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc

def nkey_public(s, prefix):
    raw = base64.b32decode(s + "=" * (-len(s) % 8))
    assert len(raw) == 35 and raw[0] == prefix, "kind"
    assert struct.unpack("<H", raw[-2:])[0] == crc16(raw[:-2]), "crc"
    return raw[1:33]

def field(ex_name, label):
    for line in ex[ex_name].splitlines():
        if line.startswith(label + " "):
            return line.split()[1]

D = "0f8c2a54-9e1b-4c6d-8a3f-5b7e9d1c2a40"
alice = nkey_public(field("participant-key", "public"), 0xA0)
engine = nkey_public(field("engine-key", "public"), 0x68)
art = ex["artifact"].splitlines()
ids = [art[1], art[3]]

# The signed message and the headers.
msg = b"\xff" + b"parley-artifact-signature-v1\n" + f"{D}\nalice\n{ids[0]}\n".encode()
assert msg.hex() == "".join(ex["signed-message"].split()), "signed message"
hdr = dict(l.split(": ", 1) for l in ex["headers"].splitlines())
sig = base64.urlsafe_b64decode(hdr["Parley-Signature"] + "==")
assert len(hdr["Parley-Signature"]) == 86 and len(sig) == 64
Ed25519PublicKey.from_public_bytes(alice).verify(sig, msg)

# Leaf 0, by hand.
t0 = 1767323045 * 10**9 + 6
subj = f"parley.{D}.art.alice".encode()
def leaf(t, subject, data, key, sig):
    f = lambda b: struct.pack(">I", len(b)) + b
    return b"parley-tlog-leaf-v1\n" + struct.pack(">q", t) + f(subject) + sha(data) + f(key) + f(sig)
leaf0 = leaf(t0, subj, art[0].encode(), hdr["Parley-Key"].encode(), hdr["Parley-Signature"].encode())
assert leaf0.hex() == "".join(ex["leaf-0"].split()), "leaf 0"

# Leaf hashes and RFC 6962 roots.
lh = [bytes.fromhex(l.split()[1]) for l in ex["leaf-hashes"].splitlines()]
assert lh[0] == sha(b"\x00" + leaf0)
def mth(hs):
    if not hs: return sha(b"")
    if len(hs) == 1: return hs[0]
    k = 1
    while k * 2 < len(hs): k *= 2
    return sha(b"\x01" + mth(hs[:k]) + mth(hs[k:]))
for line in ex["roots"].splitlines():
    n, h, b = line.split()
    assert mth(lh[:int(n)]).hex() == h and base64.b64encode(bytes.fromhex(h)).decode() == b, "root %s" % n

# The verifier key and the checkpoints.
origin = "parley." + D
keyhash = sha(origin.encode() + b"\n\x01" + engine)[:4]
vk = base64.b64encode(b"\x01" + engine).decode()
assert ex["verifier-key"].strip() == f"{origin}+{keyhash.hex()}+{vk}"
def open_checkpoint(note):
    text, sigs = note.split("\n\n", 1)
    text += "\n"
    ok = False
    for line in sigs.splitlines():
        assert line.startswith("\u2014 ")
        name, b = line[2:].split(" ")
        raw = base64.b64decode(b)
        if name == origin and raw[:4] == keyhash:
            Ed25519PublicKey.from_public_bytes(engine).verify(raw[4:], text.encode())
            ok = True
    assert ok, "no engine signature"
    o, size, root = text.splitlines()
    assert o == origin and str(int(size)) == size
    return int(size), base64.b64decode(root)
s2, r2 = open_checkpoint(ex["checkpoint-2"])
s3, r3 = open_checkpoint(ex["checkpoint-3"])
assert (s2, r2, s3, r3) == (2, mth(lh[:2]), 3, mth(lh))

# Consistency 2 -> 3 (RFC 9162 2.1.4.2).
def verify_consistency(n1, n2, r1, r2, proof):
    if n1 == n2: return r1 == r2 and not proof
    if n1 & (n1 - 1) == 0: proof = [r1] + proof
    fn, sn = n1 - 1, n2 - 1
    while fn & 1: fn >>= 1; sn >>= 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0: return False
        if fn & 1 or fn == sn:
            fr = sha(b"\x01" + c + fr); sr = sha(b"\x01" + c + sr)
            while not fn & 1 and fn != 0: fn >>= 1; sn >>= 1
        else:
            sr = sha(b"\x01" + sr + c)
        fn >>= 1; sn >>= 1
    return sn == 0 and fr == r1 and sr == r2
cons = [base64.b64decode(l) for l in ex["consistency-2-3"].splitlines()]
assert verify_consistency(2, 3, r2, r3, cons), "consistency"

# The receipt (RFC 9162 2.1.3.2).
rec = ex["receipt-1"]
head, note = rec.split("\n\n", 1)
lines = head.splitlines()
assert lines[0] == "c2sp.org/tlog-proof@v1" and lines[1].startswith("extra ") and lines[2].startswith("index ")
rleaf = base64.b64decode(lines[1][6:]); idx = int(lines[2][6:])
path = [base64.b64decode(l) for l in lines[3:]]
size, root = open_checkpoint(note)
def verify_inclusion(i, n, h, path, root):
    fn, sn, r = i, n - 1, h
    for p in path:
        if sn == 0: return False
        if fn & 1 or fn == sn:
            r = sha(b"\x01" + p + r)
            while not fn & 1 and fn != 0: fn >>= 1; sn >>= 1
        else:
            r = sha(b"\x01" + r + p)
        fn >>= 1; sn >>= 1
    return sn == 0 and r == root
assert verify_inclusion(idx, size, sha(b"\x00" + rleaf), path, root), "inclusion"
assert sha(b"\x00" + rleaf) == lh[1]
print("docs/VERIFY.md worked example: all checks pass")
