#!/usr/bin/env python3
"""Writes semantic.json, parley's published artifact-semantics vectors.

Each vector is an artifact written here by hand with the class and code
parley must report (or none, for a valid edge case). The artifact_id of
each is computed by reference.py, so that a semantic vector fails only on
its semantic rule, never on its identifier. Run from this folder:

    python3 generate_semantic.py
"""

import json
import reference as ref

H = lambda c: "sha256:" + c * 64  # placeholder target ids
A, B, C, D = H("a"), H("b"), H("c"), H("d")

V = []


def art(typ, payload, refs=(), version="0.1", ext=None, extra=None, drop=()):
    a = {"protocol_version": version, "artifact_type": typ, "payload": payload,
         "references": [r if isinstance(r, (dict, str)) else {"artifact_id": r[0], "relation": r[1]} if r[1] else {"artifact_id": r[0]} for r in refs]}
    if ext is not None:
        a["extensions"] = ext
    if extra:
        a.update(extra)
    for k in drop:
        del a[k]
    return a


def vec(name, artifact, code=None, note=""):
    V.append((name, artifact, code, note))


CLASS = {"version": "unsupported_version"}

# --- valid edge cases ------------------------------------------------------------
vec("valid-claim", art("CLAIM", {"statement": "The cache halves latency."}))
vec("valid-claim-extra-payload", art("CLAIM", {"statement": "x", "confidence": 3, "notes": ["kept", "ignored"]}), note="payload members beyond the required ones are kept and ignored")
vec("valid-claim-unicode-statement", art("CLAIM", {"statement": "\u00c5ngstr\u00f6m \u6570\u636e \U0001F600"}))
vec("valid-claim-reference-no-relation", art("CLAIM", {"statement": "x"}, [(A, None)]), note="a relation is optional")
vec("valid-claim-same-target-two-relations", art("CLAIM", {"statement": "x"}, [(A, "supports"), (A, "considers")]), note="(target, relation) pairs must differ, targets need not")
vec("valid-claim-extensions", art("CLAIM", {"statement": "x"}, ext={"parley.round": 3, "org.example.tag": {"k": [1]}}))
vec("valid-claim-empty-extensions", art("CLAIM", {"statement": "x"}, ext={}))
vec("valid-evidence", art("EVIDENCE", {"content": "p99 fell from 80 to 41 ms", "provenance_class": "TRACE_VERIFIED_OBSERVATION"}, [(A, "supports")]))
vec("valid-evidence-each-class-external", art("EVIDENCE", {"content": "x", "provenance_class": "EXTERNAL_EVIDENCE"}, [(A, "supports")]))
vec("valid-evidence-each-class-model", art("EVIDENCE", {"content": "x", "provenance_class": "MODEL_GENERATED_ANALYSIS"}, [(A, "supports")]))
vec("valid-evidence-each-class-hypothesis", art("EVIDENCE", {"content": "x", "provenance_class": "HYPOTHESIS"}, [(A, "supports"), (B, "considers")]))
vec("valid-objection-blocking", art("OBJECTION", {"statement": "The sample is too small.", "blocking": True}, [(A, "objects-to")]))
vec("valid-objection-nonblocking", art("OBJECTION", {"statement": "Style.", "blocking": False}, [(A, "objects-to"), (B, "objects-to")]))
vec("valid-revision-revises", art("REVISION", {"statement": "Narrowed."}, [(A, "revises")]))
vec("valid-revision-supersedes", art("REVISION", {"statement": "Replaced."}, [(A, "supersedes")]))
vec("valid-decision-final", art("DECISION", {"outcome": "Adopt the cache.", "status": "final",
    "objection_dispositions": [{"objection": B, "disposition": "addressed", "rationale": "More samples.", "by": [C]}],
    "unresolved_issues": []}, [(A, "decides"), (B, "considers")]))
vec("valid-decision-provisional-deferred", art("DECISION", {"outcome": "Adopt for now.", "status": "provisional",
    "objection_dispositions": [{"objection": B, "disposition": "deferred", "rationale": "Later."}],
    "unresolved_issues": [{"description": "Cost unknown.", "objection": B}, {"description": "Rollout plan."}]}, [(A, "decides")]))
vec("valid-decision-empty-lists", art("DECISION", {"outcome": "No change.", "status": "final", "objection_dispositions": [], "unresolved_issues": []}))
vec("valid-decision-all-kinds", art("DECISION", {"outcome": "o", "status": "final", "objection_dispositions": [
    {"objection": A, "disposition": "sustained", "rationale": "r"}, {"objection": B, "disposition": "overruled", "rationale": "r"},
    {"objection": C, "disposition": "withdrawn", "rationale": "r"}, {"objection": D, "disposition": "addressed", "rationale": "r", "by": []}],
    "unresolved_issues": []}))
vec("valid-failure", art("FAILURE", {"code": "limit.artifact_size", "description": "Artifact over 1 MiB.", "retryable": False}))
vec("valid-termination-completed", art("TERMINATION", {"state": "completed"}, [(A, "decides")]))
vec("valid-termination-suspended", art("TERMINATION", {"state": "suspended", "reason": "operator"}))
vec("valid-termination-cancelled", art("TERMINATION", {"state": "cancelled"}))
vec("valid-termination-deadlock", art("TERMINATION", {"state": "deadlock", "unresolved_objections": [A, B]}, [(A, "considers"), (B, "considers")]))
vec("valid-termination-exhausted", art("TERMINATION", {"state": "exhausted", "unresolved_objections": []}))
vec("valid-noncanonical-spelling", None, note="whitespace and member order do not matter: the id is over the canonical form")

# --- envelope ---------------------------------------------------------------------------
vec("envelope-unknown-member", art("CLAIM", {"statement": "x"}, extra={"model": "gpt"}), "artifact.unknown_member", "extension data belongs in extensions")
vec("envelope-missing-type", art("CLAIM", {"statement": "x"}, drop=["artifact_type"]), "artifact.missing_member")
vec("envelope-missing-payload", art("CLAIM", {"statement": "x"}, drop=["payload"]), "artifact.missing_member")
vec("envelope-missing-references", art("CLAIM", {"statement": "x"}, drop=["references"]), "artifact.missing_member")
vec("envelope-type-not-string", art("CLAIM", {"statement": "x"}, extra={"artifact_type": 1}), "artifact.wrong_type")
vec("envelope-payload-not-object", art("CLAIM", ["x"]), "artifact.wrong_type")
vec("envelope-references-not-array", art("CLAIM", {"statement": "x"}, extra={"references": {}}), "artifact.wrong_type")
vec("envelope-extensions-not-object", art("CLAIM", {"statement": "x"}, ext=[1]), "artifact.wrong_type")
vec("envelope-unknown-type", art("OPINION", {"statement": "x"}), "artifact.unknown_type")
vec("envelope-type-lowercase", art("claim", {"statement": "x"}), "artifact.unknown_type")

# --- versions -----------------------------------------------------------------------------
vec("version-missing", art("CLAIM", {"statement": "x"}, drop=["protocol_version"]), "version.missing")
vec("version-number", art("CLAIM", {"statement": "x"}, version=1), "version.not_string")
vec("version-minor", art("CLAIM", {"statement": "x"}, version="0.2"), "version.unsupported_minor", "no inferred minor compatibility")
vec("version-minor-zero", art("CLAIM", {"statement": "x"}, version="0.0"), "version.unsupported_minor")
vec("version-major", art("CLAIM", {"statement": "x"}, version="1.0"), "version.unsupported_major")
vec("version-malformed", art("CLAIM", {"statement": "x"}, version="0.1.0"), "version.malformed")
vec("version-empty", art("CLAIM", {"statement": "x"}, version=""), "version.malformed")
vec("version-v-prefix", art("CLAIM", {"statement": "x"}, version="v0.1"), "version.malformed")

# --- extensions -----------------------------------------------------------------------------
vec("extension-not-namespaced", art("CLAIM", {"statement": "x"}, ext={"round": 1}), "extension.not_namespaced")
vec("extension-leading-dot", art("CLAIM", {"statement": "x"}, ext={".round": 1}), "extension.not_namespaced")
vec("extension-trailing-dot", art("CLAIM", {"statement": "x"}, ext={"parley.": 1}), "extension.not_namespaced")

# --- references -----------------------------------------------------------------------------
vec("reference-not-object", art("CLAIM", {"statement": "x"}, [A]), "reference.not_object")
vec("reference-unknown-member", art("CLAIM", {"statement": "x"}, [{"artifact_id": A, "weight": 1}]), "reference.unknown_member")
vec("reference-missing-id", art("CLAIM", {"statement": "x"}, [{"relation": "supports"}]), "reference.missing_id")
vec("reference-id-not-string", art("CLAIM", {"statement": "x"}, [{"artifact_id": 7}]), "reference.invalid_id")
vec("reference-id-uppercase", art("CLAIM", {"statement": "x"}, [(A.upper().replace("SHA256", "sha256"), "supports")]), "reference.invalid_id")
vec("reference-id-short", art("CLAIM", {"statement": "x"}, [(A[:-1], "supports")]), "reference.invalid_id")
vec("reference-unknown-relation", art("CLAIM", {"statement": "x"}, [(A, "refutes")]), "reference.unknown_relation")
vec("reference-relation-case", art("CLAIM", {"statement": "x"}, [(A, "Supports")]), "reference.unknown_relation")
vec("reference-relation-empty", art("CLAIM", {"statement": "x"}, [{"artifact_id": A, "relation": ""}]), "reference.unknown_relation", "an absent relation is written by leaving the member out")
vec("reference-relation-null", art("CLAIM", {"statement": "x"}, [{"artifact_id": A, "relation": None}]), "reference.unknown_relation")
vec("reference-duplicate", art("CLAIM", {"statement": "x"}, [(A, "supports"), (A, "supports")]), "reference.duplicate")
vec("reference-duplicate-no-relation", art("CLAIM", {"statement": "x"}, [(A, None), (A, None)]), "reference.duplicate")

# --- payloads ---------------------------------------------------------------------------------
vec("claim-missing-statement", art("CLAIM", {}), "semantic.missing_statement")
vec("claim-empty-statement", art("CLAIM", {"statement": ""}), "semantic.invalid_statement")
vec("claim-blank-statement", art("CLAIM", {"statement": " \t\n\u3000"}), "semantic.invalid_statement", "only spaces (U+3000 included)")
vec("claim-statement-not-string", art("CLAIM", {"statement": ["x"]}), "semantic.invalid_statement")
vec("evidence-missing-content", art("EVIDENCE", {"provenance_class": "HYPOTHESIS"}, [(A, "supports")]), "semantic.missing_content")
vec("evidence-blank-content", art("EVIDENCE", {"content": " ", "provenance_class": "HYPOTHESIS"}, [(A, "supports")]), "semantic.invalid_content")
vec("evidence-missing-class", art("EVIDENCE", {"content": "x"}, [(A, "supports")]), "semantic.missing_provenance_class")
vec("evidence-unknown-class", art("EVIDENCE", {"content": "x", "provenance_class": "OBSERVATION"}, [(A, "supports")]), "semantic.invalid_provenance_class")
vec("evidence-class-lowercase", art("EVIDENCE", {"content": "x", "provenance_class": "hypothesis"}, [(A, "supports")]), "semantic.invalid_provenance_class")
vec("evidence-no-supports", art("EVIDENCE", {"content": "x", "provenance_class": "HYPOTHESIS"}, [(A, "considers")]), "semantic.missing_supports")
vec("objection-missing-blocking", art("OBJECTION", {"statement": "x"}, [(A, "objects-to")]), "semantic.missing_blocking")
vec("objection-blocking-string", art("OBJECTION", {"statement": "x", "blocking": "true"}, [(A, "objects-to")]), "semantic.invalid_blocking")
vec("objection-blocking-number", art("OBJECTION", {"statement": "x", "blocking": 1}, [(A, "objects-to")]), "semantic.invalid_blocking")
vec("objection-no-objects-to", art("OBJECTION", {"statement": "x", "blocking": True}, [(A, "considers")]), "semantic.missing_objects_to")
vec("objection-missing-statement", art("OBJECTION", {"blocking": True}, [(A, "objects-to")]), "semantic.missing_statement")
vec("revision-no-revises", art("REVISION", {"statement": "x"}, [(A, "supports")]), "semantic.missing_revises")
vec("revision-blank", art("REVISION", {"statement": ""}, [(A, "revises")]), "semantic.invalid_statement")
DEC = lambda **kw: {**{"outcome": "o", "status": "final", "objection_dispositions": [], "unresolved_issues": []}, **kw}
vec("decision-missing-outcome", art("DECISION", {k: v for k, v in DEC().items() if k != "outcome"}), "semantic.missing_outcome")
vec("decision-blank-outcome", art("DECISION", DEC(outcome="  ")), "semantic.invalid_outcome")
vec("decision-missing-status", art("DECISION", {k: v for k, v in DEC().items() if k != "status"}), "semantic.missing_status")
vec("decision-bad-status", art("DECISION", DEC(status="closed")), "semantic.invalid_status")
vec("decision-missing-dispositions", art("DECISION", {k: v for k, v in DEC().items() if k != "objection_dispositions"}), "semantic.missing_objection_dispositions")
vec("decision-dispositions-not-array", art("DECISION", DEC(objection_dispositions={})), "semantic.invalid_objection_dispositions")
vec("decision-disposition-not-object", art("DECISION", DEC(objection_dispositions=[A])), "semantic.invalid_disposition")
vec("decision-disposition-bad-id", art("DECISION", DEC(objection_dispositions=[{"objection": "x", "disposition": "addressed", "rationale": "r"}])), "semantic.invalid_disposition")
vec("decision-disposition-unknown-kind", art("DECISION", DEC(objection_dispositions=[{"objection": A, "disposition": "ignored", "rationale": "r"}])), "semantic.invalid_disposition")
vec("decision-disposition-no-rationale", art("DECISION", DEC(objection_dispositions=[{"objection": A, "disposition": "addressed"}])), "semantic.invalid_disposition")
vec("decision-disposition-bad-by", art("DECISION", DEC(objection_dispositions=[{"objection": A, "disposition": "addressed", "rationale": "r", "by": [1]}])), "semantic.invalid_disposition")
vec("decision-duplicate-disposition", art("DECISION", DEC(objection_dispositions=[{"objection": A, "disposition": "addressed", "rationale": "r"}, {"objection": A, "disposition": "overruled", "rationale": "r"}])), "semantic.duplicate_disposition")
vec("decision-missing-unresolved", art("DECISION", {k: v for k, v in DEC().items() if k != "unresolved_issues"}), "semantic.missing_unresolved_issues")
vec("decision-unresolved-not-array", art("DECISION", DEC(unresolved_issues="none")), "semantic.invalid_unresolved_issues")
vec("decision-unresolved-string-entry", art("DECISION", DEC(unresolved_issues=["cost"])), "semantic.invalid_unresolved_issue")
vec("decision-unresolved-bad-objection", art("DECISION", DEC(unresolved_issues=[{"description": "d", "objection": "x"}])), "semantic.invalid_unresolved_issue")
vec("failure-missing-code", art("FAILURE", {"description": "d", "retryable": True}), "semantic.missing_code")
vec("failure-blank-code", art("FAILURE", {"code": "", "description": "d", "retryable": True}), "semantic.invalid_code")
vec("failure-description-number", art("FAILURE", {"code": "c", "description": 5, "retryable": True}), "semantic.invalid_description")
vec("failure-missing-description", art("FAILURE", {"code": "c", "retryable": True}), "semantic.missing_description")
vec("failure-missing-retryable", art("FAILURE", {"code": "c", "description": "d"}), "semantic.missing_retryable")
vec("failure-retryable-string", art("FAILURE", {"code": "c", "description": "d", "retryable": "no"}), "semantic.invalid_retryable")
vec("termination-missing-state", art("TERMINATION", {}), "semantic.missing_state")
vec("termination-bad-state", art("TERMINATION", {"state": "done"}), "semantic.invalid_state")
vec("termination-completed-no-decides", art("TERMINATION", {"state": "completed"}, [(A, "considers")]), "semantic.missing_decides")
vec("termination-unresolved-not-array", art("TERMINATION", {"state": "deadlock", "unresolved_objections": A}, [(A, "considers")]), "semantic.invalid_unresolved_objections")
vec("termination-unresolved-bad-id", art("TERMINATION", {"state": "deadlock", "unresolved_objections": ["x"]}), "semantic.invalid_unresolved_objections")
vec("termination-unresolved-unreferenced", art("TERMINATION", {"state": "exhausted", "unresolved_objections": [A, B]}, [(A, "considers")]), "semantic.unreferenced_unresolved_objection")
vec("termination-unresolved-on-cancel", art("TERMINATION", {"state": "cancelled", "unresolved_objections": []}), "semantic.unexpected_unresolved_objections")

# --- relation applicability (checked once the target is known) ---------------------------------
R = []


def rel(name, source, relation, target, same=True, code=None):
    R.append((name, source, relation, target, same, code))


claim = art("CLAIM", {"statement": "t"})
term = art("TERMINATION", {"state": "cancelled"})
fail = art("FAILURE", {"code": "c", "description": "d", "retryable": False})
final = art("DECISION", DEC())
prov = art("DECISION", DEC(status="provisional"))
ev = lambda t: art("EVIDENCE", {"content": "x", "provenance_class": "HYPOTHESIS"}, [(t, "supports")])
rel("supports-claim", ev(A), "supports", claim)
rel("supports-failure", ev(A), "supports", fail, code="relation.inapplicable")
rel("supports-termination", ev(A), "supports", term, code="relation.inapplicable")
rel("objects-to-failure", art("OBJECTION", {"statement": "s", "blocking": True}, [(A, "objects-to")]), "objects-to", fail)
rel("objects-to-termination", art("OBJECTION", {"statement": "s", "blocking": True}, [(A, "objects-to")]), "objects-to", term, code="relation.inapplicable")
rel("revises-claim", art("REVISION", {"statement": "s"}, [(A, "revises")]), "revises", claim)
rel("revises-failure", art("REVISION", {"statement": "s"}, [(A, "revises")]), "revises", fail, code="relation.inapplicable")
rel("supersedes-other-deliberation", art("REVISION", {"statement": "s"}, [(A, "supersedes")]), "supersedes", claim, same=False, code="relation.cross_deliberation")
rel("decides-claim", art("DECISION", DEC()), "decides", claim)
rel("decides-failure", art("DECISION", DEC()), "decides", fail, code="relation.inapplicable")
rel("considers-termination", art("CLAIM", {"statement": "s"}), "considers", term)
rel("completed-decides-final", art("TERMINATION", {"state": "completed"}, [(A, "decides")]), "decides", final)
rel("completed-decides-provisional", art("TERMINATION", {"state": "completed"}, [(A, "decides")]), "decides", prov, code="relation.completed_needs_final_decision")
rel("completed-decides-claim", art("TERMINATION", {"state": "completed"}, [(A, "decides")]), "decides", claim, code="relation.completed_needs_final_decision")


def seal(a):
    data = json.dumps(a, ensure_ascii=False).encode("utf-8")
    aid = ref.artifact_id(data)
    return {"artifact_id": aid, **a}


def class_of(code):
    return "unsupported_version" if code.startswith("version.") else "invalid_artifact"


out = []
for name, a, code, note in V:
    e = {"name": name}
    if note:
        e["note"] = note
    if a is None:  # the one non-canonical spelling
        base = art("CLAIM", {"statement": "spelled loosely", "z": [1, 2]}, [(A, "supports")])
        s = seal(base)
        e["input"] = "{\n  \"references\" : [ { \"relation\" : \"supports\" , \"artifact_id\" : \"%s\" } ],\n  \"payload\" : { \"z\" : [ 1 , 2 ] , \"statement\" : \"spelled loosely\" } ,\n  \"artifact_type\" : \"CLAIM\" ,\n  \"artifact_id\" : \"%s\" ,\n  \"protocol_version\" : \"0.1\"\n}\n" % (A, s["artifact_id"])
        e["artifact_id"] = s["artifact_id"]
    else:
        s = seal(a)
        e["input"] = json.dumps(s, ensure_ascii=False)
        if not code:
            e["artifact_id"] = s["artifact_id"]
    if code:
        e["error_class"] = class_of(code)
        e["code"] = code
    out.append(e)

rels = []
for name, source, relation, target, same, code in R:
    e = {"name": name, "source": json.dumps(seal(source), ensure_ascii=False), "relation": relation,
         "target": json.dumps(seal(target), ensure_ascii=False), "same_deliberation": same}
    if code:
        e["error_class"] = "invalid_artifact"
        e["code"] = code
    rels.append(e)

names = [e["name"] for e in out] + [e["name"] for e in rels]
assert len(names) == len(set(names)), "duplicate names"
with open("semantic.json", "w", encoding="utf-8") as f:
    json.dump({"suite": "parley-semantic-v1", "count": len(out), "vectors": out,
               "relation_count": len(rels), "relations": rels}, f, ensure_ascii=False, indent=1)
    f.write("\n")
print("wrote %d artifact vectors and %d relation vectors" % (len(out), len(rels)))
