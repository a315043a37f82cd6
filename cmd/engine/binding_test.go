package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// engine binding check and verify over the parley vectors' example.
func TestRun_Binding(t *testing.T) {
	var envs struct {
		Vectors []struct {
			Name  string
			Input json.RawMessage
		}
	}
	var ress struct {
		Vectors []struct {
			Name   string
			Input  json.RawMessage
			Verify struct{ Action json.RawMessage }
		}
	}
	for p, v := range map[string]any{"../../binding/testdata/envelopes.json": &envs, "../../binding/testdata/resolutions.json": &ress} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		json.Unmarshal(b, v)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o644)
		return p
	}
	env := write("env.json", envs.Vectors[0].Input)
	tool := write("tool.json", []byte(`{"content":[{"type":"text","text":"x"}],"binding_moment":`+string(envs.Vectors[0].Input)+`}`))
	bad := write("bad.json", envs.Vectors[1].Input) // missing synopsis
	opt := write("res.json", ress.Vectors[0].Input)
	act0 := write("a0.json", ress.Vectors[0].Verify.Action)
	act1 := write("a1.json", ress.Vectors[1].Verify.Action)
	decl := write("decl.json", []byte(`{"binding_moment_resolution":{"envelope_digest":"sha256:0db384ab1b682c115d79babfefa91f014ad80c007d00c79119d748f32be232d1","resolution":"declined"}}`))
	const digest = "sha256:0db384ab1b682c115d79babfefa91f014ad80c007d00c79119d748f32be232d1"
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"binding", "check", env}, 0, `{"ok":true,"envelope_digest":"` + digest + `","findings":[]}`},
		{[]string{"binding", "check", tool}, 0, `{"ok":true,"envelope_digest":"` + digest + `","findings":[]}`},
		{[]string{"binding", "check", bad}, 1, `"findings":[{"code":"envelope.missing_member","message":"binding_moment has no synopsis"}]`},
		{[]string{"binding", "verify", "--envelope", env, "--resolution", opt, "--action", act0}, 0, `{"ok":true,"resolution":"option","authority":true,"findings":[]}`},
		{[]string{"binding", "verify", "--envelope", tool, "--resolution", opt, "--action", act1}, 0, `"authority":false,"findings":[{"code":"resolution.action_mismatch"`},
		{[]string{"binding", "verify", "--envelope", env, "--resolution", decl, "--action", act0}, 0, `{"ok":true,"resolution":"declined","authority":false,"findings":[{"code":"resolution.not_authority"`},
		{[]string{"binding", "verify", "--envelope", bad, "--resolution", decl}, 1, `{"ok":false,"authority":false,"findings":[{"code":"envelope.missing_member"`},
		{[]string{"binding", "verify", "--envelope", env, "--resolution", env}, 1, `"code":"resolution.malformed"`},
		{[]string{"binding", "verify", "--envelope", env}, 2, ``},
		{[]string{"binding", "check", filepath.Join(dir, "none.json")}, 2, ``},
		{[]string{"binding"}, 2, ``},
	} {
		code, out, errOut := run(t, "", c.args...)
		if code != c.code || !strings.Contains(out, c.out) {
			t.Errorf("%v: exit %d, %q %q", c.args[1:], code, out, errOut)
		}
	}
}
