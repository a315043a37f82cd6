package partition

import (
	"strconv"
	"strings"
)

// Mapping is one subject mapping of the server's configuration: what a
// publish on From is stored as.
type Mapping struct {
	From, To string
}

// Mappings are the subject mappings the server needs, in the order
// MappingBlock writes them. Their sources do not overlap (they differ in
// their number of tokens), so their order does not matter to the server.
func Mappings() []Mapping {
	n := strconv.Itoa(Count)
	part := "{{partition(" + n + ",1)}}"
	return []Mapping{
		{From: "parley.*.art.*", To: Prefix + part + ".{{wildcard(1)}}.art.{{wildcard(2)}}"},
		{From: "parley.*.ctl", To: Prefix + part + ".{{wildcard(1)}}.ctl"},
		// A publish straight to a mapped subject goes nowhere: only the
		// server's mapping puts messages under parley.p.
		{From: Prefix + "*.*.art.*", To: Refused},
		{From: Prefix + "*.*.ctl", To: Refused},
	}
}

// MappingBlock is the nats-server configuration block that installs
// Mappings, indented by indent: at the top level of a configuration file
// for the global account (an embedded server without accounts), or inside
// an account's block (deploy/nats.conf's PARLEY account).
func MappingBlock(indent string) string {
	var b strings.Builder
	b.WriteString(indent + "mappings {\n")
	for _, m := range Mappings() {
		b.WriteString(indent + "  " + strconv.Quote(m.From) + ": " + strconv.Quote(m.To) + "\n")
	}
	b.WriteString(indent + "}\n")
	return b.String()
}

// ParticipantPermission is the publish permission a participant's user
// needs for its artifacts under the mapping: the server checks
// permissions on the mapped subject, parley.p.<n>.<d>.art.<token>.
func ParticipantPermission(token string) string {
	return Prefix + "*.*.art." + token
}

// ControlPermission is the publish permission of an orchestrator's
// control messages under the mapping.
const ControlPermission = Prefix + "*.*.ctl"
