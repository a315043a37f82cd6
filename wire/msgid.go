package wire

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
)

// MsgIDs makes the Nats-Msg-Ids of one publisher.
//
// The stream's dedupe window keeps the first message stored under an id and
// acknowledges every later one as a duplicate without storing it. An id
// another participant can compute is therefore a weapon: store junk under
// the id of bob's next artifact, or of the orchestrator's next round, and
// bob's publish "succeeds" while his artifact never enters the record. So
// every id is a keyed hash: hex(HMAC-SHA256(key, what identifies the
// message))[:32], under a 256-bit key drawn at random when the publisher
// starts and never sent anywhere. Readers of the stream see the ids of
// stored messages (they are headers), but an id reveals nothing of the
// key, so nobody can compute the id of a message not yet published. The
// same publisher gets the same id for the same message, so the window
// still absorbs its own retries; permanent idempotency (an identical
// artifact resubmitted by anyone, at any time) is the projector's.
type MsgIDs struct {
	key [32]byte
}

// NewMsgIDs returns the ids of a new publisher, with a fresh random key.
func NewMsgIDs() *MsgIDs {
	m := &MsgIDs{}
	if _, err := rand.Read(m.key[:]); err != nil {
		// crypto/rand never fails on the platforms Go supports.
		panic("wire: no randomness for a dedupe key: " + err.Error())
	}
	return m
}

// For returns the id of the message identified by parts (joined with NUL,
// so that no two different part lists give the same input).
func (m *MsgIDs) For(parts ...string) string {
	h := hmac.New(sha256.New, m.key[:])
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// Artifact returns the id of artifact artifactID published on subject.
func (m *MsgIDs) Artifact(subject, artifactID string) string {
	return m.For("artifact", subject, artifactID)
}

// Control returns the id of a control message on subject; what identifies
// it among the publisher's control messages ("open", "round-3").
func (m *MsgIDs) Control(subject, what string) string { return m.For("control", subject, what) }
