package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/archive"
	"github.com/parley-engine/parley/partition"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/relay"
	"github.com/parley-engine/parley/service"
)

// Record a relay, replay it into the engine as a new deliberation (the
// live supervisor completes it again, to the same state digest), and fork
// it half-way with the same participants continuing: a counterfactual run
// with no call for the prefix. On both layouts of the record, the
// unpartitioned default, the partitioned one (the server's mapping,
// docs/SCALING.md) in one stream and over four, to the same state digest.
func TestReplayAndFork(t *testing.T) {
	digests := map[int]string{}
	for _, streams := range []int{0, 1, 4} { // 0: unpartitioned
		t.Run(map[int]string{0: "unpartitioned", 1: "partitioned", 4: "four-streams"}[streams], func(t *testing.T) {
			digests[streams] = replayAndFork(t, streams)
		})
	}
	if digests[0] == "" || digests[0] != digests[1] || digests[0] != digests[4] {
		t.Errorf("the same scripted deliberation: state digest %q unpartitioned, %q partitioned, %q over four streams", digests[0], digests[1], digests[4])
	}
}

func replayAndFork(t *testing.T, streams int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := service.Start(ctx, service.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Partitioned: streams > 0, Streams: streams})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg, err := relay.Load("../examples/relay/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	// Another deliberation first, so that stream positions are not the
	// forked deliberation's ordinals.
	if _, err := relay.Run(ctx, cfg, relay.Options{NATS: s.NATSURL(), NATSOptions: []nats.Option{s.Participant()}, Dir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	orig, err := relay.Run(ctx, cfg, relay.Options{NATS: s.NATSURL(), NATSOptions: []nats.Option{s.Participant()}, Dir: t.TempDir()})
	if err != nil || orig.Termination != "completed" {
		t.Fatalf("%v %+v", err, orig)
	}
	if !orig.ClosureOK {
		t.Errorf("the decision's closure does not verify: %+v", orig)
	}
	nc, _ := nats.Connect(s.NATSURL(), s.Participant())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// The record is where the layout puts it: partitioned, every message
	// of the deliberation is stored under its mapped subjects.
	wantStream, filter := "PARLEY", "parley."+orig.Deliberation+".>"
	switch streams {
	case 1:
		wantStream, filter = "PARLEY_0000_1023", partition.DeliberationFilter(orig.Deliberation)
	case 4:
		first := partition.Of(orig.Deliberation) / 256 * 256
		wantStream, filter = fmt.Sprintf("PARLEY_%04d_%04d", first, first+255), partition.DeliberationFilter(orig.Deliberation)
	}
	st, err := js.Stream(ctx, wantStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter)); err != nil || len(info.State.Subjects) == 0 {
		t.Fatalf("stream %s holds nothing on %s: %v", wantStream, filter, err)
	}
	var rec bytes.Buffer
	if _, err := archive.Export(ctx, js, orig.Deliberation, recording.Stream, &rec); err != nil {
		t.Fatal(err)
	}

	r, _ := recording.NewReader(bytes.NewReader(rec.Bytes()))
	res, err := relay.Replay(ctx, r, relay.ReplayOptions{NATS: s.NATSURL(), NATSOptions: []nats.Option{s.Participant()}, Speed: 0})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != 1 || res.Published < 40 {
		t.Errorf("replay %+v", res)
	}
	// Replay waits for the live supervisor's judgment.
	if res.Status != "completed" || res.StateDigest != orig.StateDigest {
		t.Errorf("replayed: %s %s, original: completed %s", res.Status, res.StateDigest, orig.StateDigest)
	}
	if v, _ := s.Queries.Get(res.Deliberation); v.StateDigest.String() != orig.StateDigest {
		t.Errorf("the engine reads %s for the replay", v.StateDigest)
	}

	// Fork after the sixth round's messages (the first 18 artifacts): by
	// stream position, and by ordinal (the open, then four messages a
	// round: the round, the architect, the critic, the verifier), which
	// the engine's other deliberation before this one does not shift.
	r, _ = recording.NewReader(bytes.NewReader(rec.Bytes()))
	var at uint64
	n := 0
	for {
		m, err := r.Next()
		if err != nil {
			break
		}
		if bytes.Contains([]byte(m.Subject), []byte(".art.")) {
			n++
			if n == 18 {
				at = m.Position
			}
		}
	}
	// Over four streams the other deliberation may be in another stream,
	// and this one in the first, whose positions are then its ordinals:
	// the other layouts show the difference.
	if at == 25 && streams <= 1 {
		t.Fatalf("the recording's stream positions are its ordinals: the test shows nothing")
	}
	short, err := relay.Load("../examples/relay/fork.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []relay.Options{{ForkAtPosition: at}, {ForkAt: 25}} {
		r, _ = recording.NewReader(bytes.NewReader(rec.Bytes()))
		o.NATS, o.NATSOptions, o.Dir, o.Fork = s.NATSURL(), []nats.Option{s.Participant()}, t.TempDir(), r
		fork, err := relay.Run(ctx, short, o)
		if err != nil {
			t.Fatal(err)
		}
		if fork.Termination != "completed" || !fork.ClosureOK || fork.Deliberation == orig.Deliberation {
			t.Fatalf("fork %+v", fork)
		}
		v, _ := s.Queries.Get(fork.Deliberation)
		if v.Artifacts != 18+2*3+1+1 { // the prefix, two rounds of three, the decision, the TERMINATION
			t.Errorf("fork at %+v holds %d artifacts", o, v.Artifacts)
		}
	}
	r, _ = recording.NewReader(bytes.NewReader(rec.Bytes()))
	if _, err := relay.Run(ctx, short, relay.Options{NATS: s.NATSURL(), NATSOptions: []nats.Option{s.Participant()}, Dir: t.TempDir(), Fork: r, ForkAt: 1000}); err == nil ||
		!strings.Contains(err.Error(), "has only") {
		t.Errorf("fork past the end: %v", err)
	}
	return orig.StateDigest
}
