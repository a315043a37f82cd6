package wire

import "strings"

// A participant may make the NATS server itself deliver stream messages
// onto a subject of its choosing: a push consumer's deliver subject, the
// reply subject of a pull request or of any JetStream API request. The
// server does not check that subject against the participant's
// permissions, so such a message arrives on a subject only the engine may
// publish on (a binding announcement) or that the engine serves (the query
// API) as if someone entitled had sent it. A receiver tells them apart:
// every JetStream delivery carries a reply subject under
// JSAckPrefix, every flow-control request one under JSFlowControlPrefix,
// and every heartbeat or pull status a Status header; no client may set
// either reply prefix (the server refuses it).
const (
	JSAckPrefix         = "$JS.ACK."
	JSFlowControlPrefix = "$JS.FC."
	// StatusHeader is the header of a JetStream status message (a
	// heartbeat, flow control, a pull request's end), as nats.go parses
	// it.
	StatusHeader = "Status"
)

// ServerDelivery reports whether a message with this reply subject and
// this value of the Status header is the server's delivery of stream
// messages (or its status) rather than a message a client published.
func ServerDelivery(reply, status string) bool {
	return status != "" || strings.HasPrefix(reply, JSAckPrefix) || strings.HasPrefix(reply, JSFlowControlPrefix)
}

// AnswerableReply reports whether a responder may answer on reply: not on
// a parley subject (a stream subject would store the answer as an
// artifact or a control message of its token, a binding subject would
// announce it) nor on a $ subject (the JetStream and system APIs, which
// would take the answer for a request of the responder's own). Whoever
// sends a request chooses its reply subject, and the server does not
// check it against the requester's permissions: the answer is published
// with the responder's.
func AnswerableReply(reply string) bool {
	return reply != "" && !strings.HasPrefix(reply, SubjectPrefix) && !strings.HasPrefix(reply, "$")
}
