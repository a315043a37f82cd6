// The artifact model of protocol 0.1 (docs/WIRE.md, "The artifact model"):
// sealing a draft into an artifact with its id, and opening received bytes
// (the id verified, every semantic rule checked).

import { artifactId, canonicalizeValue, verifyId, ID_PATTERN } from "./canon.js";

export const PROTOCOL_VERSION = "0.1";

export type ArtifactType = "CLAIM" | "EVIDENCE" | "OBJECTION" | "REVISION" | "DECISION" | "FAILURE" | "TERMINATION";
export const ARTIFACT_TYPES: readonly ArtifactType[] = ["CLAIM", "EVIDENCE", "OBJECTION", "REVISION", "DECISION", "FAILURE", "TERMINATION"];
export type Relation = "supports" | "objects-to" | "revises" | "supersedes" | "considers" | "decides";
export const RELATIONS: readonly Relation[] = ["supports", "objects-to", "revises", "supersedes", "considers", "decides"];
export const PROVENANCE_CLASSES = ["TRACE_VERIFIED_OBSERVATION", "EXTERNAL_EVIDENCE", "MODEL_GENERATED_ANALYSIS", "HYPOTHESIS"] as const;
export const DISPOSITIONS = ["sustained", "overruled", "addressed", "withdrawn", "deferred"] as const;
export const TERMINATION_STATES = ["completed", "suspended", "cancelled", "deadlock", "exhausted"] as const;

export interface Reference {
  artifact_id: string;
  relation?: Relation;
}

/** What a participant writes: the artifact before it is sealed. */
export interface Draft {
  artifact_type: ArtifactType;
  payload: Record<string, unknown>;
  references?: Reference[];
  extensions?: Record<string, unknown>;
}

/** A sealed artifact: its id, its canonical bytes (what is published) and its parsed form. */
export interface Artifact {
  id: string;
  bytes: Buffer;
  artifact_type: ArtifactType;
  payload: Record<string, any>;
  references: Reference[];
  extensions?: Record<string, any>;
}

export type SemanticClass = "unsupported_version" | "invalid_artifact";

/** A refusal of the artifact semantics, with the JSON pointer of the offending member. */
export class ArtifactError extends Error {
  readonly errorClass: SemanticClass;
  readonly code: string;
  readonly path: string;
  constructor(code: string, path: string, detail = "") {
    super(`${code} at ${path}${detail ? ": " + detail : ""}`);
    this.name = "ArtifactError";
    this.code = code;
    this.path = path;
    this.errorClass = code.startsWith("version.") ? "unsupported_version" : "invalid_artifact";
  }
}

const TOP = new Set(["protocol_version", "artifact_id", "artifact_type", "payload", "references", "extensions"]);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const has = (o: Record<string, unknown>, k: string) => Object.prototype.hasOwnProperty.call(o, k);

// White space as Go's unicode.IsSpace has it.
const SPACE = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;

/** A text: a string with a character that is not white space. */
export function isText(v: unknown): v is string {
  return typeof v === "string" && !SPACE.test(v);
}

function text(p: Record<string, unknown>, name: string, base: string): void {
  if (!has(p, name)) throw new ArtifactError(`semantic.missing_${base}`, `/payload/${name}`);
  if (!isText(p[name])) throw new ArtifactError(`semantic.invalid_${base}`, `/payload/${name}`);
}

function oneOf(p: Record<string, unknown>, name: string, base: string, allowed: readonly string[]): void {
  if (!has(p, name)) throw new ArtifactError(`semantic.missing_${base}`, `/payload/${name}`);
  if (typeof p[name] !== "string" || !allowed.includes(p[name] as string)) throw new ArtifactError(`semantic.invalid_${base}`, `/payload/${name}`);
}

function bool(p: Record<string, unknown>, name: string): void {
  if (!has(p, name)) throw new ArtifactError(`semantic.missing_${name}`, `/payload/${name}`);
  if (typeof p[name] !== "boolean") throw new ArtifactError(`semantic.invalid_${name}`, `/payload/${name}`);
}

const isId = (v: unknown): v is string => typeof v === "string" && ID_PATTERN.test(v);

/**
 * Checks the semantic rules of protocol 0.1 on a parsed artifact (its id is
 * checked by the canonical profile, before). Throws an ArtifactError.
 */
export function validate(a: unknown): void {
  if (!isObject(a)) throw new ArtifactError("artifact.wrong_type", "", "not an object");
  // The version before any other rule.
  if (!has(a, "protocol_version")) throw new ArtifactError("version.missing", "/protocol_version");
  const v = a.protocol_version;
  if (typeof v !== "string") throw new ArtifactError("version.not_string", "/protocol_version");
  // MAJOR.MINOR, each of 1 to 9 digits; only "0.1" itself is supported.
  const m = /^([0-9]{1,9})\.([0-9]{1,9})$/.exec(v);
  if (!m) throw new ArtifactError("version.malformed", "/protocol_version", JSON.stringify(v));
  if (v !== PROTOCOL_VERSION) {
    if (/[1-9]/.test(m[1])) throw new ArtifactError("version.unsupported_major", "/protocol_version", v);
    throw new ArtifactError("version.unsupported_minor", "/protocol_version", v);
  }
  // The envelope before the payload.
  for (const k of Object.keys(a)) if (!TOP.has(k)) throw new ArtifactError("artifact.unknown_member", "/" + k);
  for (const k of ["artifact_type", "payload", "references"]) {
    if (!has(a, k)) throw new ArtifactError("artifact.missing_member", "/" + k);
  }
  if (typeof a.artifact_type !== "string") throw new ArtifactError("artifact.wrong_type", "/artifact_type");
  if (!isObject(a.payload)) throw new ArtifactError("artifact.wrong_type", "/payload");
  if (!Array.isArray(a.references)) throw new ArtifactError("artifact.wrong_type", "/references");
  if (has(a, "extensions") && !isObject(a.extensions)) throw new ArtifactError("artifact.wrong_type", "/extensions");
  const type = a.artifact_type as ArtifactType;
  if (!ARTIFACT_TYPES.includes(type)) throw new ArtifactError("artifact.unknown_type", "/artifact_type", String(type));
  if (isObject(a.extensions)) {
    for (const k of Object.keys(a.extensions)) {
      const dot = k.indexOf(".");
      if (dot <= 0 || k.endsWith(".")) throw new ArtifactError("extension.not_namespaced", "/extensions/" + k);
    }
  }
  const refs = a.references as unknown[];
  const seen = new Set<string>();
  const rels = new Set<string>();
  refs.forEach((r, i) => {
    const path = `/references/${i}`;
    if (!isObject(r)) throw new ArtifactError("reference.not_object", path);
    for (const k of Object.keys(r)) if (k !== "artifact_id" && k !== "relation") throw new ArtifactError("reference.unknown_member", `${path}/${k}`);
    if (!has(r, "artifact_id")) throw new ArtifactError("reference.missing_id", `${path}/artifact_id`);
    if (!isId(r.artifact_id)) throw new ArtifactError("reference.invalid_id", `${path}/artifact_id`);
    let rel = "";
    if (has(r, "relation")) {
      if (typeof r.relation !== "string" || !RELATIONS.includes(r.relation as Relation)) {
        throw new ArtifactError("reference.unknown_relation", `${path}/relation`);
      }
      rel = r.relation;
    }
    const key = r.artifact_id + "\n" + rel;
    if (seen.has(key)) throw new ArtifactError("reference.duplicate", path);
    seen.add(key);
    rels.add(rel);
  });
  const p = a.payload as Record<string, unknown>;
  const relation = (...names: string[]) => names.some((n) => rels.has(n));
  switch (type) {
    case "CLAIM":
      text(p, "statement", "statement");
      break;
    case "EVIDENCE":
      text(p, "content", "content");
      oneOf(p, "provenance_class", "provenance_class", PROVENANCE_CLASSES);
      if (!relation("supports")) throw new ArtifactError("semantic.missing_supports", "/references");
      break;
    case "OBJECTION":
      text(p, "statement", "statement");
      bool(p, "blocking");
      if (!relation("objects-to")) throw new ArtifactError("semantic.missing_objects_to", "/references");
      break;
    case "REVISION":
      text(p, "statement", "statement");
      if (!relation("revises", "supersedes")) throw new ArtifactError("semantic.missing_revises", "/references");
      break;
    case "DECISION": {
      text(p, "outcome", "outcome");
      oneOf(p, "status", "status", ["provisional", "final"]);
      if (!has(p, "objection_dispositions")) throw new ArtifactError("semantic.missing_objection_dispositions", "/payload/objection_dispositions");
      const ds = p.objection_dispositions;
      if (!Array.isArray(ds)) throw new ArtifactError("semantic.invalid_objection_dispositions", "/payload/objection_dispositions");
      const disposed = new Set<string>();
      ds.forEach((d, i) => {
        const path = `/payload/objection_dispositions/${i}`;
        const ok =
          isObject(d) &&
          isId(d.objection) &&
          typeof d.disposition === "string" &&
          (DISPOSITIONS as readonly string[]).includes(d.disposition) &&
          isText(d.rationale) &&
          (!has(d, "by") || (Array.isArray(d.by) && d.by.every(isId)));
        if (!ok) throw new ArtifactError("semantic.invalid_disposition", path);
        const o = (d as Record<string, string>).objection;
        if (disposed.has(o)) throw new ArtifactError("semantic.duplicate_disposition", path);
        disposed.add(o);
      });
      if (!has(p, "unresolved_issues")) throw new ArtifactError("semantic.missing_unresolved_issues", "/payload/unresolved_issues");
      const us = p.unresolved_issues;
      if (!Array.isArray(us)) throw new ArtifactError("semantic.invalid_unresolved_issues", "/payload/unresolved_issues");
      us.forEach((u, i) => {
        if (!isObject(u) || !isText(u.description) || (has(u, "objection") && !isId(u.objection))) {
          throw new ArtifactError("semantic.invalid_unresolved_issue", `/payload/unresolved_issues/${i}`);
        }
      });
      break;
    }
    case "FAILURE":
      text(p, "code", "code");
      text(p, "description", "description");
      bool(p, "retryable");
      break;
    case "TERMINATION": {
      oneOf(p, "state", "state", TERMINATION_STATES);
      const state = p.state as string;
      if (state === "completed" && !relation("decides")) throw new ArtifactError("semantic.missing_decides", "/references");
      if (has(p, "unresolved_objections")) {
        const uo = p.unresolved_objections;
        if (!Array.isArray(uo) || !uo.every(isId)) throw new ArtifactError("semantic.invalid_unresolved_objections", "/payload/unresolved_objections");
        if (state !== "deadlock" && state !== "exhausted") {
          throw new ArtifactError("semantic.unexpected_unresolved_objections", "/payload/unresolved_objections");
        }
        for (const o of uo) {
          if (!seen.has(o + "\nconsiders")) throw new ArtifactError("semantic.unreferenced_unresolved_objection", "/payload/unresolved_objections");
        }
      }
      break;
    }
  }
}

/** What a reference's target must be, for relation applicability. */
export interface Target {
  id: string;
  artifact_type: ArtifactType;
  /** A DECISION whose status is final. */
  final_decision?: boolean;
}

/** Checks that a relation of src may target target (done once the target is known). */
export function checkRelation(src: Artifact, relation: Relation, target: Target, sameDeliberation: boolean): void {
  const t = target.artifact_type;
  let ok = true;
  switch (relation) {
    case "supports":
      ok = ["CLAIM", "REVISION", "OBJECTION", "EVIDENCE", "DECISION"].includes(t);
      break;
    case "objects-to":
      ok = t !== "TERMINATION";
      break;
    case "revises":
    case "supersedes":
      ok = ["CLAIM", "REVISION", "EVIDENCE", "OBJECTION", "DECISION"].includes(t);
      if (ok && !sameDeliberation) throw new ArtifactError("relation.cross_deliberation", "/references", `${relation} ${target.id}`);
      break;
    case "decides":
      ok = ["DECISION", "CLAIM", "REVISION"].includes(t);
      if (ok && src.artifact_type === "TERMINATION" && src.payload.state === "completed" && !target.final_decision) {
        throw new ArtifactError("relation.completed_needs_final_decision", "/references", target.id);
      }
      break;
  }
  if (!ok) throw new ArtifactError("relation.inapplicable", "/references", `${relation} cannot target ${t}`);
}

function artifactOf(id: string, bytes: Buffer, v: Record<string, any>): Artifact {
  const a: Artifact = { id, bytes, artifact_type: v.artifact_type, payload: v.payload, references: v.references };
  if (v.extensions !== undefined) a.extensions = v.extensions;
  return a;
}

/**
 * Seals a draft: builds the artifact of protocol 0.1, computes its id and
 * returns it with its canonical bytes (artifact_id first), after checking
 * every rule an artifact must meet on its own. Throws a CanonError for what
 * the canonical profile refuses (a fraction, an unsafe integer, a lone
 * surrogate…) and an ArtifactError for a broken semantic rule.
 */
export function seal(d: Draft): Artifact {
  const body: Record<string, unknown> = {
    protocol_version: PROTOCOL_VERSION,
    artifact_type: d.artifact_type,
    payload: d.payload,
    references: d.references ?? [],
  };
  if (d.extensions !== undefined) body.extensions = d.extensions;
  const draft = canonicalizeValue(body);
  const { id, value } = artifactId(draft);
  const v = value as Record<string, any>;
  validate({ ...v, artifact_id: id });
  v.artifact_id = id;
  const bytes = canonicalizeValue(v);
  return artifactOf(id, bytes, v);
}

/**
 * Opens received bytes: canonicalizes them, verifies the artifact_id
 * (CanonError) and the semantic rules (ArtifactError). The bytes need not
 * be canonical; the artifact returned carries the canonical ones.
 */
export function open(bytes: Uint8Array | string): Artifact {
  const { id, canonical, value } = verifyId(bytes);
  validate(value);
  return artifactOf(id, canonical, value as Record<string, any>);
}
