// Package projector folds the PARLEY stream into per-deliberation state.
//
// Apply(msg) is a pure fold: a message is its stream position, subject and
// bytes; the same messages in the same order always give the same state,
// and a message at or before the current position is ignored, so a
// redelivery after a restart changes nothing. No NATS, no clock, no
// goroutines: the runner (package service) owns those.
//
// Per deliberation the projection keeps the DAG of admitted artifacts
// (position, participant, type, references; bodies stay in the stream),
// its tips, the rejections with code and
// position (the most recent MaxKept in detail, every one counted by code),
// the late artifacts that arrived after a terminal TERMINATION, the open
// blocking objections (no DECISION has given them a public disposition),
// the decisions and terminations, per-participant and per-type counts, and
// the status: open, suspended, or one of the terminal completed,
// cancelled, deadlock, exhausted.
//
// What Apply enforces: routing (parley.<uuid>.art.<token>,
// parley.<uuid>.ctl), that the deliberation was opened, the charter's
// participant list, the artifact profile and semantics (events.Validate),
// relation applicability once targets are known (events.CheckRelation),
// and permanent idempotency: an artifact already in the deliberation is an
// artifact.duplicate rejection, whatever the stream's dedupe window did.
//
// And authority: a TERMINATION is admitted only from the supervisor or a
// terminator the charter names, and only when the record at its position
// justifies it; an artifact from _supervisor only when the supervisor's
// rules (Options.Rules, termination.Rules) call for it there. Anything else
// is a rejection with its own code (termination.unauthorized,
// termination.unjustified, supervisor.unjustified) and changes nothing.
// An artifact takes effect at its own position or not at all: one whose
// references are not all in the DAG is refused (reference.unavailable),
// never held pending, so nothing enters a record after it was judged. A
// message's time is its stream time, or, for an importer's message
// (parley.<deliberation>.art._import, Msg.Import), the earlier original
// time it carries, never earlier than its deliberation's previous message
// (EffectiveTime); until the importer ends an import, nobody else's
// message counts in the deliberation (deliberation.importing). A
// binding moment is resolved only by the principal the charter names
// (Deliberation.Principal): a resolution from anyone else, or a decision
// of a provisional DECISION that asks the principal other than the
// principal's resolution of it, is binding.not_principal (binding.go;
// Deliberation.BindingMoments lists the moments as the fold judged them).
//
// StateDigest is a SHA-256 over a canonical rendering of a deliberation's
// projection; the same stream prefix gives the same digest, live or
// replayed, and after a snapshot round trip (WriteSnapshot, ReadSnapshot).
//
// Nodes are stored without pointers (references in a per-deliberation
// arena, the few payloads the fold needs later in a side table), so a
// projection of a million artifacts costs the garbage collector almost
// nothing and about 135 bytes per artifact (BenchmarkProjectionMemory).
package projector
