// Package buildinfo says which build of parley is running, from the
// module's build information (runtime/debug.ReadBuildInfo): the module
// version when the binary was built from a tagged module (go install
// …@v1.2.3), else the VCS revision and time go build stamps in a work
// tree, with "-dirty" when the tree had local changes (go build itself
// stamps a pseudo-version of the revision, "+dirty" when modified). go
// run, go test and -buildvcs=false stamp neither, and then it says so
// rather than print a bare "(devel)".
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Info is what a build says of itself.
type Info struct {
	// Version is the module version ("" when the build has none: a
	// development build).
	Version string `json:"version,omitempty"`
	// Revision and Time are the VCS revision and commit time, Modified
	// whether the work tree had local changes ("" and false when not
	// stamped).
	Revision string `json:"revision,omitempty"`
	Time     string `json:"revision_time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
}

// Read returns the running binary's build information; set, when not
// empty, is a version given at link time (-ldflags "-X …"), which wins.
func Read(set string) Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: set}
	}
	return fromBuildInfo(bi, set)
}

func fromBuildInfo(bi *debug.BuildInfo, set string) Info {
	var in Info
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		in.Version = v
	}
	if set != "" {
		in.Version = set
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the version for people: the module version; else "devel",
// the short revision with "-dirty" when modified, and its time; else a
// development build that says it carries no stamp.
func (in Info) String() string {
	switch {
	case in.Version != "":
		return in.Version
	case in.Revision != "":
		rev := in.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if in.Modified {
			rev += "-dirty"
		}
		s := "devel " + rev
		if in.Time != "" {
			s += " (" + in.Time + ")"
		}
		return s
	}
	return "devel (no module version or VCS revision in this build: go run, go test and -buildvcs=false stamp none; go build in the repository does)"
}

// Short is String without the explanation of an unstamped build.
func (in Info) Short() string {
	s := in.String()
	if i := strings.Index(s, " (no module version"); i >= 0 {
		return s[:i]
	}
	return s
}
