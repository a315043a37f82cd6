package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/internal/textsafe"
	"github.com/parley-engine/parley/wire"
)

// runBind is the terminal renderer of binding moments (seed 002 §9.2: an
// arrow-key picker, the hatches and decline on keys of their own).
func runBind(ctx context.Context, e *env, args []string) int {
	var hf httpTokenFlags
	var as string
	fs := newFlags(e, "bind", "[--http URL] [--http-token T | --data DIR] [--as TOKEN] DELIBERATION", `Shows the deliberation's first open binding moment in the terminal and sends
the principal's resolution to the engine: up and down (or k and j) move
between the options, Enter chooses one, and so does its number (from 1);
a answers in your own words (when
the envelope opens that hatch), q rejects the question (when it opens that
one), d declines; Ctrl-C leaves without resolving. A malformed envelope is
shown as plain text with its findings, never as a decision.

The resolution needs the engine's HTTP token, and is published as the
participant the token stands for: --http-token, PARLEY_HTTP_TOKEN, or the
credentials file of the engine's data directory (--data; by default
./parley-data's, whose address is then the default --http).`)
	hf.register(fs)
	fs.StringVar(&as, "as", "", "the principal's participant token, checked against the one the HTTP token stands for")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(e.stderr, "engine bind: need exactly one DELIBERATION argument")
		return exitUsage
	}
	if err := hf.resolve(); err != nil {
		fmt.Fprintf(e.stderr, "engine bind: %v\n", err)
		return exitUsage
	}
	id, base := fs.Arg(0), hf.base
	if !wire.ValidDeliberation(id) {
		fmt.Fprintf(e.stderr, "engine bind: %q is not a deliberation id (a UUID in canonical lowercase form)\n", id)
		return exitUsage
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if hf.token == "" {
		// Why there is none: no engine there at all, or no credentials
		// file of the engine that is.
		probe := &http.Client{Timeout: 5 * time.Second}
		resp, err := probe.Get(base + "/healthz")
		if err != nil {
			fmt.Fprintf(e.stderr, "engine bind: no engine answers at %s: is engine serve running? --http names the address it prints on its \"http\" line\n", base)
			return exitUsage
		}
		resp.Body.Close()
		fmt.Fprintf(e.stderr, "engine bind: no HTTP token for the engine at %s: %s; give --data DIR (that engine's data directory), --http-token, or PARLEY_HTTP_TOKEN\n", base, hf.why)
		return exitUsage
	}
	get, _ := http.NewRequest(http.MethodGet, base+"/api/v1/deliberations/"+id+"/bindings", nil)
	get.Header.Set("Authorization", "Bearer "+hf.token)
	resp, err := hc.Do(get)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine bind: %v\n", err)
		return exitUsage
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(e.stderr, "engine bind: %s: %s\n", resp.Status, bytes.TrimSpace(body))
		return exitUsage
	}
	var moments []binding.Moment
	if err := json.Unmarshal(body, &moments); err != nil {
		fmt.Fprintf(e.stderr, "engine bind: %v\n", err)
		return exitUsage
	}
	var env *binding.Envelope
	decider := ""
	for _, m := range moments {
		switch m.Status {
		case "malformed":
			fmt.Fprintf(e.stdout, "%s asks for a decision (%s), but its envelope is malformed and is not shown as one:\n", textsafe.Line(m.Decider), m.Decision)
			for _, f := range m.Findings {
				fmt.Fprintf(e.stdout, "  %s (%s)\n", textsafe.Line(f.Message), textsafe.Line(f.Code))
			}
		case "open":
			if env == nil {
				if env, err = binding.ParseEnvelope(m.Envelope); err != nil {
					fmt.Fprintf(e.stderr, "engine bind: %v\n", err)
					return exitUsage
				}
				decider = m.Decider
			}
		}
	}
	if env == nil {
		fmt.Fprintf(e.stderr, "engine bind: no open binding moment in %s\n", id)
		return exitRejected
	}
	in, ok := e.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		fmt.Fprintln(e.stderr, "engine bind: needs a terminal (or use the /bind page, or the API)")
		return exitUsage
	}
	old, err := term.MakeRaw(int(in.Fd()))
	if err != nil {
		fmt.Fprintf(e.stderr, "engine bind: %v\n", err)
		return exitUsage
	}
	res, quit := pick(in, e.stdout, env, decider)
	term.Restore(int(in.Fd()), old)
	fmt.Fprint(e.stdout, "\r\n")
	if quit {
		fmt.Fprintln(e.stdout, "left without resolving")
		return exitRejected
	}
	res["envelope_digest"] = env.Digest.String()
	b, _ := json.Marshal(map[string]any{"binding_moment_resolution": res})
	url := base + "/api/v1/deliberations/" + id + "/bindings/" + env.Digest.String()
	if as != "" {
		url += "?as=" + neturl.QueryEscape(as)
	}
	post, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	post.Header.Set("Content-Type", "application/json")
	post.Header.Set("Authorization", "Bearer "+hf.token)
	resp, err = hc.Do(post)
	if err != nil {
		fmt.Fprintf(e.stderr, "engine bind: %v\n", err)
		return exitUsage
	}
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		fmt.Fprintf(e.stderr, "engine bind: %s: %s\n", resp.Status, bytes.TrimSpace(out))
		return exitRejected
	}
	var r struct {
		ArtifactID  string `json:"artifact_id"`
		Type        string `json:"artifact_type"`
		Participant string `json:"participant"`
		Position    uint64 `json:"position"`
		Ordinal     uint64 `json:"ordinal"`
	}
	json.Unmarshal(out, &r)
	where := fmt.Sprintf("at position %d", r.Position)
	if r.Ordinal > 0 {
		where = fmt.Sprintf("as message #%d", r.Ordinal)
	}
	fmt.Fprintf(e.stdout, "recorded: the principal's %s %s %s (as %s)\n", r.Type, r.ArtifactID, where, r.Participant)
	return exitOK
}

// pick draws the envelope and reads keys until a resolution (or Ctrl-C).
func pick(in io.Reader, out io.Writer, env *binding.Envelope, decider string) (map[string]any, bool) {
	q := env.Question
	cur := q.RecommendedIdx
	// The envelope is the decider's text: every character of it reaches
	// the principal's terminal as itself or as a visible escape, never as
	// an escape sequence that redraws the picker or text that reorders it.
	safe := textsafe.Line
	draw := func(status string) {
		var b strings.Builder
		w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\r\n", a...) }
		b.WriteString("\x1b[H\x1b[2J")
		w("Binding moment from %s", safe(decider))
		w("")
		w("\x1b[1m%s\x1b[0m", safe(env.Synopsis))
		w("")
		w("Findings:")
		for _, f := range env.Findings {
			w("  - %s", safe(f))
		}
		w("Recommendations:")
		for _, r := range env.Recommendations {
			w("  - %s", safe(r))
		}
		w("%s", safe(env.Offer))
		w("")
		w("\x1b[1m%s\x1b[0m", safe(q.Stem))
		for i, o := range q.Options {
			mark := "  "
			if i == cur {
				mark = "> "
			}
			rec := ""
			if i == q.RecommendedIdx {
				rec = "  \x1b[7m[Recommended]\x1b[0m"
			}
			w("%s%d. %s%s", mark, i+1, safe(o.Label), rec)
			w("      %s", safe(o.Reasoning))
		}
		w("")
		keys := "Up/Down move   Enter choose"
		if len(q.Options) <= 9 {
			keys = fmt.Sprintf("Up/Down move   Enter (or 1-%d) choose", len(q.Options))
		}
		if q.Hatches.FreeText {
			keys += "   a answer in my own words"
		}
		if q.Hatches.Dialogue {
			keys += "   q reject the question"
		}
		keys += "   d decline   Ctrl-C leave"
		w("%s", keys)
		if status != "" {
			w("%s", status)
		}
		io.WriteString(out, b.String())
	}
	draw("")
	kr := &keyReader{r: in}
	for {
		k, err := kr.next()
		if err != nil {
			return nil, true
		}
		switch {
		case bytes.Equal(k, []byte{3}):
			return nil, true
		case bytes.Equal(k, []byte("\x1b[A")) || bytes.Equal(k, []byte("k")):
			if cur > 0 {
				cur--
			}
		case bytes.Equal(k, []byte("\x1b[B")) || bytes.Equal(k, []byte("j")):
			if cur < len(q.Options)-1 {
				cur++
			}
		case k[0] == '\r' || k[0] == '\n':
			return map[string]any{"resolution": "option", "option_idx": cur}, false
		case len(k) == 1 && k[0] >= '1' && k[0] <= '9' && int(k[0]-'1') < len(q.Options) && len(q.Options) <= 9:
			// The options are numbered from 1, as drawn.
			return map[string]any{"resolution": "option", "option_idx": int(k[0] - '1')}, false
		case k[0] == 'd':
			return map[string]any{"resolution": "declined"}, false
		case k[0] == 'q' && q.Hatches.Dialogue:
			return map[string]any{"resolution": "question"}, false
		case k[0] == 'a' && q.Hatches.FreeText:
			draw("Your answer (Enter sends, Ctrl-C leaves):")
			line, ok := readLine(kr, out)
			if !ok {
				return nil, true
			}
			if strings.TrimSpace(line) != "" {
				return map[string]any{"resolution": "answer", "answer": line}, false
			}
		}
		draw("")
	}
}

// keyReader splits what a terminal sends into keys: keys that arrive
// together in one read (typed fast, pasted, or sent by a script) are each
// a key of their own, an arrow's escape sequence one key. What is left of
// a read after a key is read first by the next key, or by Read.
type keyReader struct {
	r       io.Reader
	pending []byte
}

// next returns the next key: an escape sequence ESC [ X, or one byte. An
// escape sequence split between reads is read whole (the picker has no use
// for Esc alone).
func (k *keyReader) next() ([]byte, error) {
	for len(k.pending) == 0 || (k.pending[0] == 0x1b && len(k.pending) < 3 && (len(k.pending) == 1 || k.pending[1] == '[')) {
		buf := make([]byte, 64)
		n, err := k.r.Read(buf)
		if n > 0 {
			k.pending = append(k.pending, buf[:n]...)
			continue
		}
		if err != nil && len(k.pending) == 0 {
			return nil, err
		}
		if err != nil || n == 0 {
			break // what is pending is all there is
		}
	}
	if len(k.pending) == 0 {
		return nil, io.EOF
	}
	n := 1
	if len(k.pending) >= 3 && k.pending[0] == 0x1b && k.pending[1] == '[' {
		n = 3
	}
	key := k.pending[:n]
	k.pending = k.pending[n:]
	return key, nil
}

// Read reads what is left of the last read first, then the terminal.
func (k *keyReader) Read(p []byte) (int, error) {
	if len(k.pending) > 0 {
		n := copy(p, k.pending)
		k.pending = k.pending[n:]
		return n, nil
	}
	return k.r.Read(p)
}

// readLine reads a line in raw mode, echoing it, with backspace.
func readLine(in io.Reader, out io.Writer) (string, bool) {
	var line []rune
	buf := make([]byte, 64)
	for {
		n, err := in.Read(buf)
		if err != nil {
			return "", false
		}
		for _, r := range string(buf[:n]) {
			switch r {
			case 3:
				return "", false
			case '\r', '\n':
				return string(line), true
			case 0x7f, 8:
				if len(line) > 0 {
					line = line[:len(line)-1]
					io.WriteString(out, "\b \b")
				}
			default:
				if r >= ' ' {
					line = append(line, r)
					io.WriteString(out, string(r))
				}
			}
		}
	}
}
