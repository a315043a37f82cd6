package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestInfo_String(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	tests := []struct {
		name string
		bi   debug.BuildInfo
		set  string
		want string
	}{
		{"tagged", debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "", "v1.2.3"},
		{"link time wins", debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v9", "v9"},
		{"revision", debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", "d0393b83c73dc3a7b4656031b58c673f14ec7586", "vcs.time", "2026-12-01T11:40:00Z", "vcs.modified", "false")},
			"", "devel d0393b83c73d (2026-12-01T11:40:00Z)"},
		{"dirty", debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", "d0393b83c73dc3a7b4656031b58c673f14ec7586", "vcs.time", "2026-12-01T11:40:00Z", "vcs.modified", "true")},
			"", "devel d0393b83c73d-dirty (2026-12-01T11:40:00Z)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(&tt.bi, tt.set).String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	bare := fromBuildInfo(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "")
	if s := bare.String(); s == "(devel)" || !strings.HasPrefix(s, "devel (no module version") || bare.Short() != "devel" {
		t.Errorf("unstamped: %q, short %q", s, bare.Short())
	}
}

// A binary go build makes in a git work tree carries its revision, and
// says -dirty when the tree has changes: built for real, in a throwaway
// repository.
func TestRead_BuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	src, err := os.ReadFile("buildinfo.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod":                 "module example.com/v\n\ngo 1.26\n",
		"buildinfo/buildinfo.go": string(src),
		"main.go":                "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/v/buildinfo\"\n)\n\nfunc main() { fmt.Print(buildinfo.Read(\"\").String()) }\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "v")
	rev := git("rev-parse", "HEAD")
	build := func() string {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "v")
		cmd := exec.Command("go", "build", "-o", bin, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v %s", err, out)
		}
		out, err := exec.Command(bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	// go build stamps the module with a pseudo-version of the revision;
	// either way the revision is named.
	if got := build(); !strings.Contains(got, rev[:12]) || strings.Contains(got, "dirty") || got == "(devel)" {
		t.Errorf("clean build: %q (revision %s)", got, rev)
	}
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(files["main.go"]+"\n// changed\n"), 0o644)
	if got := build(); !strings.Contains(got, rev[:12]) || !strings.Contains(got, "dirty") {
		t.Errorf("modified build: %q (revision %s)", got, rev)
	}
}
