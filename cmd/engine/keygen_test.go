package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-engine/parley/signing"
)

// engine keygen writes a user seed whose public key is the line it prints;
// the file is the owner's only and never overwritten.
func TestRun_Keygen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "alice.nk")
	code, out, errs := run(t, "", "keygen", "--out", path)
	if code != 0 || out != "" {
		t.Fatalf("keygen: exit %d %q %q", code, out, errs)
	}
	pub := strings.TrimSuffix(errs, "\n")
	if !signing.ValidKey(pub) || strings.Contains(pub, "\n") {
		t.Fatalf("public key line %q", errs)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("seed file: %v %v", fi, err)
	}
	kp, err := readSigningKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := kp.PublicKey(); got != pub {
		t.Fatalf("the seed's key is %s, keygen printed %s", got, pub)
	}
	before, _ := os.ReadFile(path)
	if code, _, errs := run(t, "", "keygen", "--out", path); code != exitUsage || !strings.Contains(errs, "exists") {
		t.Errorf("overwrite: exit %d %q", code, errs)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("keygen overwrote a key")
	}

	// Without --out the seed goes to standard output.
	code, out, errs = run(t, "", "keygen")
	if code != 0 {
		t.Fatalf("keygen to stdout: exit %d %q", code, errs)
	}
	kp, err = signing.KeyPair(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("stdout %q: %v", out, err)
	}
	if got, _ := kp.PublicKey(); got+"\n" != errs {
		t.Errorf("the seed's key is %s, keygen printed %q", got, errs)
	}
	if code, _, _ := run(t, "", "keygen", "extra"); code != exitUsage {
		t.Errorf("an argument: exit %d", code)
	}
}

// A charter binds the key keygen printed; engine publish --key with the
// file keygen wrote signs as that key: the engine admits the artifact.
func TestRun_KeygenPublish(t *testing.T) {
	_, natsArg := liveEngine(t)
	with := func(args ...string) []string { return append(append([]string{args[0]}, natsArg...), args[1:]...) }
	dir := t.TempDir()
	seed := filepath.Join(dir, "alice.nk")
	code, _, errs := run(t, "", "keygen", "--out", seed)
	if code != 0 {
		t.Fatalf("keygen: exit %d %q", code, errs)
	}
	pub := strings.TrimSpace(errs)
	charter := filepath.Join(dir, "charter.json")
	os.WriteFile(charter, []byte(`{"title":"signed","participants":["alice"],"keys":{"alice":"`+pub+`"},"require_signatures":true}`), 0o644)
	code, out, errs := run(t, "", with("open", "--charter", charter)...)
	if code != 0 {
		t.Fatalf("open: exit %d %q %q", code, out, errs)
	}
	d := decodeLine(t, out).Deliberation
	claim := `{"protocol_version":"0.1","artifact_type":"CLAIM","payload":{"statement":"signed with a generated key"},"references":[]}`
	if code, out, errs := run(t, claim, with("publish", "--deliberation", d, "--as", "alice", "--key", seed, "-")...); code != 0 || decodeLine(t, out).Outcome != "accepted" {
		t.Fatalf("publish --key: exit %d %q %q", code, out, errs)
	}
	// Another generated key is not the bound one.
	other := filepath.Join(dir, "other.nk")
	if code, _, _ := run(t, "", "keygen", "--out", other); code != 0 {
		t.Fatal("keygen")
	}
	code, _, errs = run(t, strings.Replace(claim, "generated", "another", 1), with("publish", "--deliberation", d, "--as", "alice", "--key", other, "-")...)
	if l := decodeLine(t, errs); code != 1 || l.Code != "signature.wrong_key" {
		t.Errorf("another key: exit %d %q", code, errs)
	}
}
