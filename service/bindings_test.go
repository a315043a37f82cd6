package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/api"
	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/bindwrite"
	"github.com/parley-engine/parley/client"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/eventually"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/readmodel"
	"github.com/parley-engine/parley/runner"
	"github.com/parley-engine/parley/service"
	"github.com/parley-engine/parley/wire"
)

// A decider asks its principal through the HTTP API; each of the four
// resolutions lands on the record as seed 002's mapping says, and an
// envelope can be resolved once only. On both layouts of the record.
func TestBindings_HTTP(t *testing.T) {
	for _, partitioned := range []bool{false, true} {
		t.Run(map[bool]string{false: "unpartitioned", true: "partitioned"}[partitioned], func(t *testing.T) { bindingsHTTP(t, partitioned) })
	}
}

func bindingsHTTP(t *testing.T, partitioned bool) {
	var envs struct {
		Vectors []struct{ Input json.RawMessage }
	}
	b, _ := os.ReadFile("../binding/testdata/envelopes.json")
	json.Unmarshal(b, &envs)
	envRaw := envs.Vectors[0].Input
	env, err := binding.ParseEnvelope(envRaw)
	if err != nil {
		t.Fatal(err)
	}
	s := startLayout(t, t.TempDir(), partitioned)
	defer s.Close()
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	ctx := context.Background()
	base := "http://" + s.HTTPAddr() + "/api/v1/deliberations/"
	post := func(url, body string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+s.Credentials().HTTPToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		b, _ := io.ReadAll(resp.Body)
		json.Unmarshal(b, &m)
		return resp.StatusCode, m
	}
	get := func(url string, v any) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(v)
	}
	for _, c := range []struct {
		kind   binding.Kind
		res    string
		typ    events.Type
		status string
	}{
		{binding.KindOption, `"resolution":"option","option_idx":0`, events.TypeDecision, "completed"},
		{binding.KindAnswer, `"resolution":"answer","answer":"Only the dates, and only for this booking."`, events.TypeClaim, "open"},
		{binding.KindQuestion, `"resolution":"question"`, events.TypeObjection, "open"},
		{binding.KindDeclined, `"resolution":"declined"`, events.TypeClaim, "cancelled"},
	} {
		judge, _ := client.New(nc, "judge")
		// The charter lists judge: its token is the metrics' decider label.
		id, err := judge.Open(ctx, client.Charter{Title: "share?", Participants: []string{"judge", "principal"}})
		if err != nil {
			t.Fatal(err)
		}
		ann, _ := nc.SubscribeSync(wire.BindingSubject(id))
		nc.Flush()
		claim, _, err := judge.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share the dates only."}})
		if err != nil {
			t.Fatal(err)
		}
		prov, ack, err := judge.Publish(ctx, id, events.Draft{Type: events.TypeDecision,
			Payload:    events.Decision{Outcome: "Ask the principal.", Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
			References: []events.Reference{{Target: claim.ID, Relation: events.Decides}},
			Extensions: map[string]any{binding.ExtEnvelope: envRaw}})
		if err != nil {
			t.Fatal(err)
		}
		judge.WaitPosition(ctx, id, ack.Sequence)
		am, err := ann.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal("no announcement:", err)
		}
		var a binding.Announcement
		if json.Unmarshal(am.Data, &a); a.Decision != prov.ID || a.EnvelopeDigest != env.Digest.String() || a.Decider != "judge" || a.Principal != "principal" || a.Position != ack.Sequence {
			t.Fatalf("announcement %s", am.Data)
		}
		ann.Unsubscribe()
		var moments []binding.Moment
		get(base+id+"/bindings", &moments)
		if len(moments) != 1 || moments[0].Status != "open" || moments[0].Decision != prov.ID || moments[0].EnvelopeDigest != env.Digest.String() || moments[0].Principal != "principal" {
			t.Fatalf("%+v", moments)
		}
		url := base + id + "/bindings/" + env.Digest.String()
		body := `{"binding_moment_resolution":{"envelope_digest":"` + env.Digest.String() + `",` + c.res + `}}`
		code, m := post(url, body)
		if code != http.StatusCreated || m["artifact_type"] != string(c.typ) || m["participant"] != "principal" {
			t.Fatalf("%s: %d %v", c.res, code, m)
		}
		// Once only, whatever the kind.
		if code, m := post(url, `{"binding_moment_resolution":{"envelope_digest":"`+env.Digest.String()+`","resolution":"declined"}}`); code != http.StatusConflict || m["code"] != binding.CodeAlreadyResolved {
			t.Errorf("second resolution: %d %v", code, m)
		}
		get(base+id+"/bindings", &moments)
		if moments[0].Status != "resolved" || moments[0].Resolution.Resolution != c.kind || moments[0].ResolvedBy != "principal" {
			t.Errorf("%+v", moments[0])
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			v, _ := judge.State(ctx, id)
			if string(v.Status) == c.status {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: status %s, want %s", c.res, v.Status, c.status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The metrics: four binding moments by judge, one resolution of each
	// kind (the veto rate is question over all: 1/4).
	resp, err := http.Get("http://" + s.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{`parley_binding_moments_total{decider="judge"} 4`, `parley_binding_resolutions_total{decider="judge",resolution="question"} 1`,
		`parley_binding_resolutions_total{decider="judge",resolution="option"} 1`, `parley_binding_resolutions_total{decider="judge",resolution="declined"} 1`} {
		if !bytes.Contains(mb, []byte(line)) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	// Unknown envelope, malformed resolution, a mismatch between path and body.
	judge, _ := client.New(nc, "judge")
	id, _ := judge.Open(ctx, client.Charter{Title: "nothing to resolve"})
	// Open does not wait for the engine.
	eventually.True(t, 10*time.Second, "the engine projects the opening", func() bool { _, err := judge.State(ctx, id); return err == nil })
	other := "sha256:" + string(bytes.Repeat([]byte("0"), 64))
	if code, m := post(base+id+"/bindings/"+other, `{"envelope_digest":"`+other+`","resolution":"declined"}`); code != http.StatusNotFound || m["code"] != binding.CodeUnknownEnvelope {
		t.Errorf("unknown: %d %v", code, m)
	}
	if code, m := post(base+id+"/bindings/"+other, `{"envelope_digest":"`+other+`","resolution":"option"}`); code != http.StatusBadRequest || m["findings"] == nil {
		t.Errorf("malformed: %d %v", code, m)
	}
	if code, _ := post(base+id+"/bindings/"+env.Digest.String(), `{"envelope_digest":"`+other+`","resolution":"declined"}`); code != http.StatusBadRequest {
		t.Errorf("mismatch: %d", code)
	}
}

// A binding moment whose reference is not yet known is refused, and never
// announced; published again once its reference is there, it is announced
// with its new position: the fold says what it admitted, and nothing
// re-reads the message.
func TestBindings_AnnouncedOnlyWhenAdmitted(t *testing.T) {
	var envs struct {
		Vectors []struct{ Input json.RawMessage }
	}
	b, _ := os.ReadFile("../binding/testdata/envelopes.json")
	json.Unmarshal(b, &envs)
	envRaw := envs.Vectors[0].Input
	s := start(t, t.TempDir())
	defer s.Close()
	nc := dial(t, s)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	judge, _ := client.New(nc, "judge")
	id, err := judge.Open(ctx, client.Charter{Title: "share?"})
	if err != nil {
		t.Fatal(err)
	}
	ann, _ := nc.SubscribeSync(wire.BindingSubject(id))
	nc.Flush()
	claim := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share the dates only."}})
	prov := events.MustSeal(events.Draft{Type: events.TypeDecision,
		Payload:    events.Decision{Outcome: "Ask the principal.", Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
		References: []events.Reference{{Target: claim.ID, Relation: events.Decides}},
		Extensions: map[string]any{binding.ExtEnvelope: envRaw}})
	early, err := judge.PublishArtifact(ctx, id, prov) // its claim is not there yet: refused
	if err != nil {
		t.Fatal(err)
	}
	if o, err := judge.WaitOutcome(ctx, id, early.Sequence, prov.ID.String()); err != nil || o.Code != projector.CodeUnknownTarget {
		t.Fatalf("outcome %+v, %v", o, err)
	}
	if _, err := judge.PublishArtifact(ctx, id, claim); err != nil {
		t.Fatal(err)
	}
	// Published again by another client (a client's own publish of the
	// same artifact within the stream's dedupe window is absorbed as a
	// retry of the first).
	again, _ := client.New(nc, "judge")
	pack, err := again.PublishArtifact(ctx, id, prov)
	if err != nil {
		t.Fatal(err)
	}
	// The first announcement is the admitted moment's: the refused one
	// was never announced.
	am, err := ann.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal("no announcement once released:", err)
	}
	var a binding.Announcement
	if json.Unmarshal(am.Data, &a); a.Decision != prov.ID || a.Decider != "judge" || a.Position != pack.Sequence {
		t.Fatalf("announcement %s", am.Data)
	}
}

// A principal's resolution is published on condition that the
// deliberation did not move since the writer read it
// (Nats-Expected-Last-Subject-Sequence over the deliberation's filter).
// Here the writer reads a projection that stopped before the
// deliberation's last message, so its condition is stale: the stream
// must refuse the resolution, alone (option) and as the atomic batch of a
// decline and its cancel. Partitioned, the filter must be the mapped one
// (ledger.Layout.Filter): the server does not map this header, and under
// the published form it finds nothing stored, takes the last sequence as
// 0, refuses every current condition and stores one that expects 0
// whatever the deliberation holds. The control, a current condition,
// resolves.
func TestBindings_StaleConditionRefused(t *testing.T) {
	var envs struct {
		Vectors []struct{ Input json.RawMessage }
	}
	b, _ := os.ReadFile("../binding/testdata/envelopes.json")
	json.Unmarshal(b, &envs)
	envRaw := envs.Vectors[0].Input
	env, err := binding.ParseEnvelope(envRaw)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []ledger.Layout{ledger.Unpartitioned, ledger.Partitioned} {
		t.Run(l.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s := startLayout(t, t.TempDir(), l.Partitioned())
			defer s.Close()
			nc := dial(t, s)
			judge, _ := client.New(nc, "judge")
			id, err := judge.Open(ctx, client.Charter{Title: "share?", Participants: []string{"judge", "principal"}})
			if err != nil {
				t.Fatal(err)
			}
			claim, _, err := judge.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Share the dates only."}})
			if err != nil {
				t.Fatal(err)
			}
			_, ack, err := judge.Publish(ctx, id, events.Draft{Type: events.TypeDecision,
				Payload:    events.Decision{Outcome: "Ask the principal.", Status: events.Provisional, ObjectionDispositions: []events.Disposition{}, UnresolvedIssues: []events.Issue{}},
				References: []events.Reference{{Target: claim.ID, Relation: events.Decides}},
				Extensions: map[string]any{binding.ExtEnvelope: envRaw}})
			if err != nil {
				t.Fatal(err)
			}
			// A projection of its own, stopped once it has the binding
			// moment: what the writer reads goes stale.
			js, _ := jetstream.New(s.Conn())
			r, err := runner.New(ctx, js, s.Stream, runner.Config{})
			if err != nil {
				t.Fatal(err)
			}
			rctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { r.Run(rctx); close(done) }()
			if err := r.WaitFor(ctx, ack.Sequence); err != nil {
				t.Fatal(err)
			}
			stop()
			<-done
			if _, _, err := judge.Publish(ctx, id, events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "Meanwhile, another claim."}}); err != nil {
				t.Fatal(err)
			}
			q := readmodel.New(readmodel.Config{Runner: r, Stream: s.Stream})
			wr := bindwrite.New(q, r, js, nil)
			before, _ := s.Stream.Info(ctx)
			for _, res := range []string{`"resolution":"option","option_idx":0`, `"resolution":"declined"`} {
				body := `{"binding_moment_resolution":{"envelope_digest":"` + env.Digest.String() + `",` + res + `}}`
				_, err := wr.Resolve(ctx, id, env.Digest.String(), []byte(body), "principal")
				var ae *api.Error
				if !errors.As(err, &ae) || ae.Code != "binding.concurrent" {
					t.Errorf("%s on a stale condition: %v", res, err)
				}
			}
			after, _ := s.Stream.Info(ctx)
			if after.State.LastSeq != before.State.LastSeq {
				t.Errorf("the stream moved from %d to %d: a resolution on a stale condition was stored", before.State.LastSeq, after.State.LastSeq)
			}
			// The control: the engine's own writer, whose projection is
			// current, resolves.
			body := `{"binding_moment_resolution":{"envelope_digest":"` + env.Digest.String() + `","resolution":"option","option_idx":0}}`
			if err := s.Runner.WaitFor(ctx, before.State.LastSeq); err != nil {
				t.Fatal(err)
			}
			if _, err := bindwrite.New(s.Queries, s.Runner, js, nil).Resolve(ctx, id, env.Digest.String(), []byte(body), "principal"); err != nil {
				t.Errorf("a current condition: %v", err)
			}
		})
	}
}

// startLayout starts an engine on the record's layout, partitioned or not.
func startLayout(t *testing.T, dir string, partitioned bool) *service.Service {
	t.Helper()
	s, err := service.Start(context.Background(), service.Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", SnapshotEvery: 50 * time.Millisecond,
		Partitioned: partitioned})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
