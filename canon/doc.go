// Package canon is parley's canonical JSON: one strict, single-pass parser
// and serializer over []byte for two formats.
//
//   - AMD, the restricted profile of the artifact draft (protocol 0.1).
//     Every string and member name is put in Unicode NFC, members are sorted
//     by the unsigned bytes of their UTF-8 names, numbers are integers in
//     -(2^53-1)..2^53-1 written without fraction or exponent, and strings
//     use the short escapes for " \ \b \f \n \r \t, lowercase \u00xx for
//     the other C0 controls, and raw UTF-8 for everything else. Artifact ids
//     are "sha256:" and the lowercase hex SHA-256 of this form with the
//     top-level artifact_id member removed.
//   - JCS, RFC 8785 with the profile bounds of the binding-moment envelope
//     (EP-CANONICALIZATION-v1): no NFC, members sorted by UTF-16 code units,
//     numbers that are integers by value (1.0 is written 1) of magnitude at
//     most 2^53-1.
//
// Both reject rather than repair: a byte-order mark, invalid UTF-8 (overlong
// forms and encoded surrogates included), raw control characters in
// strings, duplicate member names after escape decoding, unpaired surrogate
// escapes, NaN and Infinity, integers out of range, nesting deeper than the
// limit (64 by default) and input larger than the limit (1 MiB by default).
// AMD also rejects distinct member names that are equal after NFC, any
// fraction or exponent token, and strings with a run of more than 30
// non-starters (combining marks): x/text keeps such runs stream-safe by
// inserting U+034F, other NFC implementations do not, and an id must not
// depend on which one computed it. -0 is accepted and written 0; noncharacters
// are accepted.
//
// Every rejection is an *Error with one of the five upstream classes
// (malformed_input, unsupported_value, normalization_collision,
// invalid_artifact_identifier_syntax, artifact_identifier_mismatch), a
// finer stable code (Codes lists them) and the byte offset where the
// problem was found. Where a document breaks several rules, the one the
// upstream reference verifier reports is reported (docs/ERRORS.md,
// "Precedence"): invalid UTF-8 anywhere, then a byte-order mark, then the
// faults met while parsing in document order (each object's member names
// when it closes, member by member), then unpaired surrogates in string
// values and non-starter runs in document order, then a top level that is
// not an object.
//
// Invariants, checked by the tests and the fuzz targets:
//
//	ID(x) == ID(Canonicalize(x))
//	Canonicalize(Canonicalize(x)) == Canonicalize(x)
//
// A Canonicalizer keeps its buffers, so in steady state it does not
// allocate per document; it is not safe for concurrent use. The
// package-level functions take one from a pool. Memory is bounded by a small
// multiple of the input, which the size limit bounds in turn; work is linear
// in the input apart from sorting each object's members.
//
// NFC uses golang.org/x/text/unicode/norm. Its Unicode version
// (UnicodeVersion) depends on the Go toolchain; ids of text that uses code
// points assigned after it may change with it, which is why engine version
// reports it. Strings made only of code points that NFC leaves alone
// wherever they stand take a fast path that never calls the normalizer;
// other strings are normalized segment by segment from the first code point
// NFC may change, and a Canonicalizer remembers the normalized form of the
// short segments it has met.
//
// ID and Verify first try whether the input is already canonical in a plain
// shape (no whitespace, no escapes, no code point NFC may change, names in
// order, integers): then the input is its own canonical form, checked by
// one scan that writes nothing, and only the SHA-256 remains. Anything else
// goes to the full parser, which decides, errors included; the tests judge
// every input both ways.
package canon
