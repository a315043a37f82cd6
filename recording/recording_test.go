package recording_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/signing"
)

const id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"

func write(t *testing.T, msgs ...recording.Message) []byte {
	t.Helper()
	var b bytes.Buffer
	w, _ := recording.NewWriter(&b, recording.Stream, id)
	for _, m := range msgs {
		if err := w.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	return b.Bytes()
}

func read(t *testing.T, rec []byte) ([]recording.Message, *recording.Reader) {
	t.Helper()
	r, err := recording.NewReader(bytes.NewReader(rec))
	if err != nil {
		t.Fatal(err)
	}
	var out []recording.Message
	for {
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, r
		}
		if err != nil {
			t.Fatal(err)
		}
		m.Data = bytes.Clone(m.Data)
		out = append(out, m)
	}
}

var (
	at     = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	sig    = signing.Headers{Key: "UKEY", Signature: "SIG"}
	signed = recording.Message{Position: 2, Subject: "parley." + id + ".art.alice", Time: at, Data: []byte(`{}`), Signature: sig}
	ctl    = recording.Message{Position: 1, Subject: "parley." + id + ".ctl", Time: at, Data: []byte(`{"op":"open"}`)}
)

// A version 2 recording carries signatures, chained: stripping one breaks
// the chain.
func TestSignatures(t *testing.T) {
	rec := write(t, ctl, signed)
	msgs, r := read(t, rec)
	if r.Header().Version != recording.Version || len(msgs) != 2 || msgs[1].Signature != sig || msgs[0].Signature != (signing.Headers{}) || r.ChainBroken() != 0 {
		t.Fatalf("%+v, chain broken at %d", msgs, r.ChainBroken())
	}
	stripped := bytes.Replace(rec, []byte(`"key":"UKEY","signature":"SIG",`), nil, 1)
	if bytes.Equal(stripped, rec) {
		t.Fatal("no signature in the line")
	}
	if _, r := read(t, stripped); r.ChainBroken() != 2 {
		t.Errorf("stripped signature: chain broken at %d, want 2", r.ChainBroken())
	}
}

// A version 1 recording reads as before: its chain is version 2's for
// messages without signatures, and signature members in it are ignored
// (version 1 never chained them).
func TestVersion1(t *testing.T) {
	unsigned := signed
	unsigned.Signature = signing.Headers{}
	rec := write(t, ctl, unsigned)
	v1 := strings.Replace(string(rec), `"version":2`, `"version":1`, 1)
	msgs, r := read(t, []byte(v1))
	if r.Header().Version != 1 || len(msgs) != 2 || r.ChainBroken() != 0 || r.Trailer() == nil || r.Trailer().Chain != r.Chain() {
		t.Fatalf("version 1: %+v, chain broken at %d", msgs, r.ChainBroken())
	}
	withSig := strings.Replace(v1, `"data":"e30=",`, `"data":"e30=","key":"UKEY","signature":"SIG",`, 1)
	if msgs, r := read(t, []byte(withSig)); msgs[1].Signature != (signing.Headers{}) || r.ChainBroken() != 0 {
		t.Errorf("version 1 with signature members: %+v", msgs[1])
	}
	if _, err := recording.NewReader(strings.NewReader(strings.Replace(v1, `"version":1`, `"version":3`, 1))); err == nil {
		t.Error("version 3 read")
	}
}
