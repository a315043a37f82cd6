package wire

// StreamName is the one stream that holds every deliberation.
const StreamName = "PARLEY"

// StreamSubjects are the subjects the stream holds: artifacts and control
// messages. They are the only stored subjects of parley.<deliberation>.…;
// the query service's parley.api.* and the binding announcements stay out
// of it.
var StreamSubjects = []string{"parley.*.art.*", "parley.*.ctl"}

// Headers an import sets on every message it republishes, so that an
// export of the imported deliberation gives back the original recording.
// Anyone can set a header: the fold believes a claimed time only within
// bounds (docs/AUTHORITY.md).
const (
	OriginalPositionHeader = "Parley-Original-Position"
	OriginalTimeHeader     = "Parley-Original-Time"
)

// MicroPrefix is the subject prefix of the query API's NATS micro service
// (parley.api.deliberation, parley.api.outcome, …).
const MicroPrefix = "parley.api"
