// Package gittest makes small git repositories for tests with the real
// git binary (the substrate.git.log re-verifier runs it too).
package gittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Require skips the test when git is not installed, or fails it when
// PARLEY_REQUIRE_GIT is set (CI installs git).
func Require(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("PARLEY_REQUIRE_GIT") != "" {
			t.Fatal("git is required (PARLEY_REQUIRE_GIT) and not installed")
		}
		t.Skip("git is not installed")
	}
}

// Git runs git in dir with a fixed identity and no user or system
// configuration, and returns its trimmed output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.org", "GIT_COMMITTER_NAME=a",
		"GIT_COMMITTER_EMAIL=a@example.org", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Write writes a file under dir.
func Write(t testing.TB, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Init makes dir a repository on branch main.
func Init(t testing.TB, dir string) {
	t.Helper()
	Require(t)
	Git(t, dir, "init", "-q", "-b", "main")
}

// Commit commits every change in dir and returns the commit id.
func Commit(t testing.TB, dir, message string) string {
	t.Helper()
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "-q", "-m", message)
	return Git(t, dir, "rev-parse", "HEAD")
}

// Changelog makes dir a repository with a committed CHANGELOG.md that has
// an entry dated 2026-05-25, and returns the commit.
func Changelog(t testing.TB, dir string) string {
	t.Helper()
	Init(t, dir)
	Write(t, dir, "CHANGELOG.md", "# Changelog\n\n## 2026-05-25\n- first entry\n")
	return Commit(t, dir, "first entry")
}
