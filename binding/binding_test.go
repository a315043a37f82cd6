package binding_test

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/parley-engine/parley/binding"
)

type envVector struct {
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
	InputRaw string          `json:"input_raw"`
	Valid    bool            `json:"valid"`
	Digest   string          `json:"envelope_digest"`
	Codes    []string        `json:"codes"`
}

func (v envVector) raw() []byte {
	if v.InputRaw != "" {
		return []byte(v.InputRaw)
	}
	return v.Input
}

func load(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatal(err)
	}
}

func codes(err error) []string {
	var m *binding.Malformed
	if !errors.As(err, &m) {
		return nil
	}
	var c []string
	for _, f := range m.Findings {
		if !slices.Contains(c, f.Code) {
			c = append(c, f.Code)
		}
	}
	slices.Sort(c)
	return c
}

func TestEnvelopeVectors(t *testing.T) {
	var suite struct{ Vectors []envVector }
	load(t, "testdata/envelopes.json", &suite)
	if len(suite.Vectors) < 50 {
		t.Fatalf("%d vectors", len(suite.Vectors))
	}
	for _, v := range suite.Vectors {
		e, err := binding.ParseEnvelope(v.raw())
		if v.Valid {
			if err != nil {
				t.Errorf("%s: %v", v.Name, err)
			} else if e.Digest.String() != v.Digest {
				t.Errorf("%s: digest %s, want %s", v.Name, e.Digest, v.Digest)
			}
			continue
		}
		if err == nil || !errors.Is(err, binding.ErrMalformed) {
			t.Errorf("%s: accepted (%v)", v.Name, err)
			continue
		}
		if got := codes(err); !slices.Equal(got, v.Codes) {
			t.Errorf("%s: codes %v, want %v (%v)", v.Name, got, v.Codes, err)
		}
	}
}

// Seed 002 §6.4: the example's length, digest and action digests.
func TestSeedExample(t *testing.T) {
	var suite struct{ Vectors []envVector }
	load(t, "testdata/envelopes.json", &suite)
	e, err := binding.ParseEnvelope(suite.Vectors[0].raw())
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Canonical) != 895 || e.Digest.String() != "sha256:0db384ab1b682c115d79babfefa91f014ad80c007d00c79119d748f32be232d1" {
		t.Fatalf("%d bytes, %s", len(e.Canonical), e.Digest)
	}
	for i, a := range []string{`{"disclose": ["travel_dates"], "recipient": "booking.example"}`,
		`{"recipient": "booking.example", "disclose": ["passport_number", "travel_dates"]}`} {
		d, err := binding.ActionDigest([]byte(a))
		if err != nil || d.String() != e.Question.Options[i].ActionDigest {
			t.Errorf("action %d: %s %v", i, d, err)
		}
	}
	// A tool result carrying it (§8.1), with its conventional payload.
	tr := `{"content":[{"type":"text","text":"Share the dates?"}],"binding_moment":` + string(e.Canonical) + `}`
	if e2, err := binding.FromToolResult([]byte(tr)); err != nil || e2.Digest != e.Digest {
		t.Errorf("tool result: %v", err)
	}
}

type resVector struct {
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
	InputRaw string          `json:"input_raw"`
	Valid    bool            `json:"valid"`
	Codes    []string        `json:"codes"`
	Verify   *struct {
		Action    json.RawMessage `json:"action"`
		OK        bool            `json:"ok"`
		Authority bool            `json:"authority"`
		Codes     []string        `json:"codes"`
	} `json:"verify"`
}

func TestResolutionVectors(t *testing.T) {
	var envs struct{ Vectors []envVector }
	load(t, "testdata/envelopes.json", &envs)
	env, err := binding.ParseEnvelope(envs.Vectors[0].raw())
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		EnvelopeDigest string `json:"envelope_digest"`
		Vectors        []resVector
	}
	load(t, "testdata/resolutions.json", &suite)
	if suite.EnvelopeDigest != env.Digest.String() || len(suite.Vectors) < 25 {
		t.Fatalf("suite for %s, %d vectors", suite.EnvelopeDigest, len(suite.Vectors))
	}
	for _, v := range suite.Vectors {
		raw := []byte(v.InputRaw)
		if v.InputRaw == "" {
			raw = v.Input
		}
		r, err := binding.ParseResolution(raw)
		if !v.Valid {
			if err == nil {
				t.Errorf("%s: accepted", v.Name)
			} else if got := codes(err); !slices.Equal(got, v.Codes) {
				t.Errorf("%s: codes %v, want %v (%v)", v.Name, got, v.Codes, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", v.Name, err)
			continue
		}
		// The wire form round-trips.
		if r2, err := binding.ParseResolution(r.Wire()); err != nil || *r2 != *r {
			t.Errorf("%s: wire %s: %v", v.Name, r.Wire(), err)
		}
		var action []byte
		if len(v.Verify.Action) > 0 {
			action = v.Verify.Action
		}
		got := binding.Verify(env, r, action)
		var gc []string
		for _, f := range got.Findings {
			gc = append(gc, f.Code)
		}
		if got.OK != v.Verify.OK || got.Authority != v.Verify.Authority || !slices.Equal(gc, v.Verify.Codes) {
			t.Errorf("%s: verdict %+v, want ok %v authority %v codes %v", v.Name, got, v.Verify.OK, v.Verify.Authority, v.Verify.Codes)
		}
	}
}

// The upstream EP-RESOLUTION-v1 vectors: the envelope hash each receipt
// names is the JCS digest of the vector's binding_moment, except where the
// vector substitutes the envelope or breaks it on purpose. (Their options
// carry no action_digest, so under seed 002 -04 the envelopes themselves
// are malformed: the hash, not the grammar, is what they pin.)
func TestEPResolutionEnvelopeHashes(t *testing.T) {
	b, err := os.ReadFile("../testdata/upstream/ep-upstream/resolution.v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Vectors []struct {
			ID            string          `json:"id"`
			BindingMoment json.RawMessage `json:"binding_moment"`
			Receipt       *epReceipt      `json:"resolution_receipt"`
			Authorization *epReceipt      `json:"resolution_authorization"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(b, &suite); err != nil {
		t.Fatal(err)
	}
	if len(suite.Vectors) != 33 {
		t.Fatalf("%d vectors", len(suite.Vectors))
	}
	differ := map[string]bool{}
	for _, v := range suite.Vectors {
		d, err := binding.Digest(v.BindingMoment)
		r := v.Receipt
		if r == nil {
			r = v.Authorization
		}
		want := r.Signoff.Context.EnvelopeHash
		if err != nil || d.String() != want {
			differ[v.ID] = true
			t.Logf("%s: digest %s (%v), receipt names %s", v.ID, d, err, want)
		}
		if _, err := binding.ParseEnvelope(v.BindingMoment); err == nil {
			t.Errorf("%s: an envelope without action_digest was accepted", v.ID)
		}
	}
	// Exactly the vectors built to break the envelope binding differ.
	for id := range differ {
		switch id {
		case "reject_envelope_substitution", "reject_noncanonical_binding_moment", "reject_malformed_receipt":
		default:
			t.Errorf("%s: the envelope hash differs", id)
		}
	}
	if len(differ) != 3 {
		t.Errorf("%d vectors name another digest than their envelope's, want 3", len(differ))
	}
}

type epReceipt struct {
	Signoff struct {
		Context struct {
			EnvelopeHash string `json:"envelope_hash"`
		} `json:"context"`
	} `json:"signoff"`
}

func TestTracker(t *testing.T) {
	var envs struct{ Vectors []envVector }
	load(t, "testdata/envelopes.json", &envs)
	env, _ := binding.ParseEnvelope(envs.Vectors[0].raw())
	var off *binding.Envelope
	for _, v := range envs.Vectors {
		if v.Name == "hatch-off" {
			off, _ = binding.ParseEnvelope(v.raw())
		}
	}
	tr := binding.NewTracker()
	if sup, fresh := tr.Emit("judge", env); sup != nil || !fresh {
		t.Fatal(sup, fresh)
	}
	if sup, _ := tr.Emit("judge", off); !slices.Equal(sup, []string{"dialogue"}) {
		t.Fatal(sup)
	}
	q := &binding.Resolution{EnvelopeDigest: env.Digest, Kind: binding.KindQuestion}
	if v := tr.Resolve(q, nil); !v.OK {
		t.Fatal(v)
	}
	// The same envelope can never be resolved again, by any kind.
	d := &binding.Resolution{EnvelopeDigest: env.Digest, Kind: binding.KindDeclined}
	if v := tr.Resolve(d, nil); v.OK || v.Findings[0].Code != binding.CodeAlreadyResolved {
		t.Fatal(v)
	}
	if _, fresh := tr.Emit("judge", env); fresh {
		t.Error("a resolved envelope was emitted again")
	}
	u := &binding.Resolution{Kind: binding.KindDeclined}
	if v := tr.Resolve(u, nil); v.OK || v.Findings[0].Code != binding.CodeUnknownEnvelope {
		t.Fatal(v)
	}
	dec := &binding.Resolution{EnvelopeDigest: off.Digest, Kind: binding.KindDeclined}
	if v := tr.Resolve(dec, nil); !v.OK || v.Resolution != binding.KindDeclined {
		t.Fatal(v)
	}
	s := tr.Stats()["judge"]
	if s.Emitted != 2 || s.HatchesOff != 1 || s.QuestionVetoes != 1 || s.VetoRate() != 0.5 || s.Resolved[binding.KindDeclined] != 1 {
		t.Errorf("%+v", s)
	}
}

// docs/ERRORS.md lists every code.
func TestErrorsDoc(t *testing.T) {
	b, err := os.ReadFile("../docs/ERRORS.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range binding.Codes {
		if !strings.Contains(string(b), "| `"+c+"` |") {
			t.Errorf("docs/ERRORS.md does not list %s", c)
		}
	}
}
