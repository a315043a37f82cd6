package wire

// StreamName is the one stream that holds every deliberation.
const StreamName = "PARLEY"

// StreamSubjects are the subjects the stream holds: artifacts and control
// messages. They are the only stored subjects of parley.<deliberation>.…;
// the query service's parley.api.* and the binding announcements stay out
// of it.
var StreamSubjects = []string{"parley.*.art.*", "parley.*.ctl"}

// Headers an import sets on every message it republishes, so that the
// deliberation folds as it did and an export of it gives back the original
// recording. Anyone can set a header, so they mean something only on the
// importer's own subject, parley.<deliberation>.art._import
// (ImportSubject), which only an importer's credentials may publish on;
// on every other message the engine and export ignore them
// (docs/AUTHORITY.md).
const (
	// OriginalSubjectHeader: the subject the message had in the
	// recording (its deliberation rewritten to the one imported into).
	OriginalSubjectHeader  = "Parley-Original-Subject"
	OriginalPositionHeader = "Parley-Original-Position"
	OriginalTimeHeader     = "Parley-Original-Time"
	// ImportEndHeader ("true") marks the importer's message that ends the
	// import of a deliberation (an empty message with no original
	// subject, published once the whole recording is in the stream).
	ImportEndHeader = "Parley-Import-End"
)

// ImportToken is the reserved participant token an import publishes as:
// parley.<deliberation>.art._import carries every message of a recording,
// whatever its original subject.
const ImportToken = "_import"

// ImportSubject is the subject an import publishes deliberation id's
// messages on.
func ImportSubject(id string) string { return ArtifactSubject(id, ImportToken) }

// MicroPrefix is the subject prefix of the query API's NATS micro service
// (parley.api.deliberation, parley.api.outcome, …).
const MicroPrefix = "parley.api"
