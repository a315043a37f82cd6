package natsconn

import (
	"crypto/rand"
	"encoding/hex"
	"slices"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/wire"
)

// The users of the embedded default (engine serve without --nats-config or
// --nats). The engine draws their passwords at each start.
const (
	// ParticipantUser may publish artifacts under any token but the
	// reserved ones, and control messages, and read what participants
	// read. Its password is in the data directory (ParticipantSecretFile,
	// kept across restarts) and in its credentials file: whoever can read
	// the data directory may write to the record.
	ParticipantUser = "participant"
	// ReaderUser is who a client without credentials is: it may read what
	// participants read (the query service, ordered consumers of the
	// stream, the announcements of binding moments) and publish nothing
	// the stream keeps, so that an anonymous client can make the engine
	// and its server hold nothing past its connection (docs/SECURITY.md).
	// With Config.AnonymousWrites a client without credentials is
	// ParticipantUser instead.
	ReaderUser = "reader"
	// EngineUser is the engine's own, in-process connection: the
	// supervisor, the principals' resolutions, the query service, the
	// projection's snapshots when they are kept in JetStream (the only
	// user who may read or write the snapshot bucket).
	EngineUser = "engine"
	// OperatorUser may publish on every parley subject (engine import
	// republishes recordings on the importer's subject,
	// parley.<deliberation>.art._import, which no other user may publish
	// on), but not delete, purge or update the stream. Its password
	// is in the data directory's credentials file.
	OperatorUser = "operator"
)

// streamAdmin are the JetStream API subjects that could erase or
// reconfigure the record, the stream named stream. No user of the
// embedded default may publish on them (deploy/nats.conf keeps them for
// its admin).
func streamAdmin(stream string) []string {
	return []string{
		"$JS.API.STREAM.DELETE." + stream,
		"$JS.API.STREAM.PURGE." + stream,
		"$JS.API.STREAM.UPDATE." + stream,
		"$JS.API.STREAM.MSG.DELETE." + stream,
	}
}

// participantReads are the subjects a participant publishes on to read:
// the query service, micro discovery, stream info, and what a
// ledger.Reader publishes (consumers of the stream created by name and
// deleted, flow control: the participant blocks of deploy/nats.conf).
//
// Not pulls, nor direct gets: each answers on the reply subject its
// requester names, which the server does not check against the
// requester's permissions. A participant who may pull has the server
// publish, and the stream store, onto any stream subject (the
// principal's, the supervisor's, the importer's, the control subject):
// the status of an empty pull as an empty message, a copy of any stored
// message under its own subject (an orchestrator's old suspend, again). A
// direct get would publish any bytes a participant stored. Participants
// read the stream with ordered push consumers, which the server never
// lets deliver onto a subject of the stream, and single messages through
// the query API (parley.api.artifact, parley.api.outcome).
func participantReads(l ledger.Layout) []string {
	out := append(queryReads(), l.ReaderSubjects()...)
	for _, name := range l.Streams()[1:] {
		// The other streams' info: a client's catch-up reads each one's
		// last sequence.
		out = append(out, "$JS.API.STREAM.INFO."+name)
	}
	return out
}

// queryReads are the reads of a client without credentials: the query
// service, micro discovery and stream info, each a request the engine or
// the server answers and forgets. Not the stream's consumers: a consumer
// lives in the server until it is deleted or idle, and delivers the whole
// stream, so a client that may create them may make the server hold as
// many as it likes (docs/OPERATIONS.md, "Hostile clients"). Those who read
// the stream itself hold the participant's password.
func queryReads() []string {
	out := []string{
		wire.MicroPrefix + ".>",
		"$SRV.>",
		"$JS.API.INFO",
	}
	// Every layout's first stream's info: a client that was told
	// nothing finds the record's layout by asking (ledger.Locate).
	return append(out, ledger.InfoSubjects()...)
}

// artPermission is the publish permission of the artifacts of token
// (a wildcard, *, for every token) in every deliberation: on the
// subject as published, or, partitioned, on its mapped form, since the
// server checks permissions on the mapped subject (docs/SCALING.md).
func artPermission(l ledger.Layout, token string) string {
	if l.Partitioned() {
		return partition.ParticipantPermission(token)
	}
	return wire.ArtifactSubject("*", token)
}

// ctlPermission is the publish permission of the control subjects of
// every deliberation, as artPermission.
func ctlPermission(l ledger.Layout) string {
	if l.Partitioned() {
		return partition.ControlPermission
	}
	return wire.ControlSubject("*")
}

// LeaseSubjects are the subjects of the partition leases' bucket
// (lease.DefaultBucket, engine serve --leases): only the engine may write
// there. A participant who could would take partitions from the engines
// and leave their deliberations unsupervised.
const LeaseSubjects = "$KV.PARLEY_LEASES.>"

// EngineAPISubjects are the query subjects of each engine alone
// (parley.api.engine.<name>.<endpoint>, engine serve --own-streams), to
// which an engine forwards the reads of another's streams.
const EngineAPISubjects = "parley.api.engine.>"

// ReservedTokens are the participant tokens the embedded default refuses
// to clients without credentials: the supervisor's and those the engine
// publishes principals' resolutions as. NATS permissions cannot match a
// token prefix, so every other _x token stays publishable; the projector
// refuses those (subject.invalid_participant rejections, on the record).
func ReservedTokens(principals []string) []string {
	out := []string{wire.SupervisorToken, wire.CheckpointToken, wire.PrincipalToken}
	for _, p := range principals {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// embeddedUsers returns the authorization of the embedded default for
// the record's layout: the reader (every client without credentials), the
// participant, the engine and the operator, with the passwords given.
// principals are the participants the HTTP tokens stand for. Partitioned,
// the permissions of artifact and control subjects are on their mapped
// forms, and nobody may publish on the subject a publish straight to a
// mapped subject is mapped to (partition.Refused). bucket is the object
// store of the projection's snapshots, which only the engine may write or
// read (whoever could write it could forge the projection an engine
// restores).
func embeddedUsers(l ledger.Layout, enginePassword, operatorPassword, participantPassword string, principals []string, bucket string) []*server.User {
	reserved := ReservedTokens(principals)
	reads := participantReads(l)
	var admin, acks []string
	for _, name := range l.Streams() {
		admin = append(admin, streamAdmin(name)...)
		acks = append(acks, "$JS.ACK."+name+".>")
	}
	// The importer's subject: only the operator publishes there (engine
	// import), not the engine itself.
	deny := []string{artPermission(l, wire.ImportToken)}
	var engineArt []string
	for _, t := range reserved {
		deny = append(deny, artPermission(l, t))
		engineArt = append(engineArt, artPermission(l, t))
	}
	if l.Partitioned() {
		deny = append(deny, partition.Refused)
		admin = append(admin, partition.Refused)
	}
	participant := &server.Permissions{
		Publish: &server.SubjectPermission{
			Allow: append([]string{artPermission(l, "*"), ctlPermission(l)}, reads...),
			Deny:  deny,
		},
		// Replies, and the announcements of binding moments (what GET
		// .../bindings reads from the record anyway).
		Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>", wire.BindingSubject("*")}},
	}
	// The reader publishes only to ask: nothing it sends is stored, and
	// nothing it asks for outlives the answer.
	reader := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: queryReads()},
		Subscribe: participant.Subscribe,
	}
	engine := &server.Permissions{
		Publish: &server.SubjectPermission{
			// The cancel a principal's decline implies goes with it, in
			// one atomic batch. The acknowledgement subjects of the stream's
			// deliveries: a message delivered with a reply subject the
			// client may not publish to is tracked, one entry a message, for
			// the response permission below, and the server's pruning of
			// those entries cost the engine's projection about 1 us a
			// message (its consumer acknowledges nothing).
			Allow: append(append(engineArt, wire.BindingSubject("*"), ctlPermission(l), "$JS.API.>", "$JS.FC.>", "_INBOX.>", "$SRV.>", LeaseSubjects, EngineAPISubjects), acks...),
			Deny:  admin,
		},
		// The stream's advisories and the API audit: the engine watches
		// its stream (package health).
		Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>", wire.MicroPrefix + ".>", "$SRV.>", "$JS.EVENT.ADVISORY.>"}},
		Response:  &server.ResponsePermission{MaxMsgs: server.DEFAULT_ALLOW_RESPONSE_MAX_MSGS, Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION},
	}
	if bucket != "" {
		// The snapshot bucket's chunks and metas (its API calls are
		// $JS.API ones, above).
		engine.Publish.Allow = append(engine.Publish.Allow, "$O."+bucket+".>")
	}
	operator := &server.Permissions{
		Publish: &server.SubjectPermission{
			Allow: []string{wire.SubjectPrefix + ">", "$JS.API.>", "$JS.FC.>", "$SRV.>"},
			Deny:  admin,
		},
		Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>", wire.SubjectPrefix + ">"}},
	}
	return []*server.User{
		{Username: ReaderUser, Password: secret(), Permissions: reader},
		{Username: ParticipantUser, Password: participantPassword, Permissions: participant},
		{Username: EngineUser, Password: enginePassword, Permissions: engine},
		{Username: OperatorUser, Password: operatorPassword, Permissions: operator},
	}
}

// secret returns 256 random bits in hex.
func secret() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
