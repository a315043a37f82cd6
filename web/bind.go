package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/internal/textsafe"
	"github.com/parley-engine/parley/ledger"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/runner"
)

// The binding pages: /bind lists the deliberations waiting for their
// principal, /bind/{id} renders a deliberation's binding moments, and the
// forms of that page POST to /bind/{id}/{envelope_digest}. They work
// without JavaScript. What they read of a deliberation (its title and
// status, a decision's body) comes from the runner and the stream, like the
// explorer's; the binding moments and the publication of a resolution come
// from the engine's query API, through BindingAPI, handed in at mount time
// (package web imports nothing of the engine's assembly).

var (
	bindPage = template.Must(template.New("bind.html").Funcs(template.FuncMap{
		"deref": func(p *int) int { return *p },
		"inc":   func(i int) int { return i + 1 },
		"rec":   recHTML,
	}).ParseFS(assets, "assets/bind.html"))
	bindIndexPage = template.Must(template.New("bind-index.html").Funcs(template.FuncMap{"rec": recHTML}).ParseFS(assets, "assets/bind-index.html"))
	refusedPage   = template.Must(template.ParseFS(assets, "assets/refused.html"))
)

// BindingAPI is what the binding pages need of the engine's query API
// (service mounts bindwrite.Writer): a deliberation's binding moments in stream
// order (GET .../bindings), and the verification and publication of a
// principal's resolution, body as POST .../bindings/{envelope_digest}
// takes it, as the artifact of participant principal. An error that has an
// HTTPStatus() int method is answered with that status.
type BindingAPI interface {
	Bindings(ctx context.Context, id string) ([]binding.Moment, error)
	Resolve(ctx context.Context, id, envDigest string, body []byte, principal string) (*binding.Resolved, error)
}

// Binder serves the binding pages.
type Binder struct {
	r      *runner.Runner
	stream jetstream.Stream
	// Streams: as Explorer.Streams.
	Streams []jetstream.Stream
	api     BindingAPI
	// principal returns the participant a request may resolve as (the
	// one its token stands for), or an error saying why it may not.
	principal func(*http.Request) (string, error)
}

// NewBinder returns the binding pages over the engine's runner and stream,
// its query API, and principal, which says as whom a request resolves.
func NewBinder(r *runner.Runner, stream jetstream.Stream, api BindingAPI, principal func(*http.Request) (string, error)) *Binder {
	return &Binder{r: r, stream: stream, api: api, principal: principal}
}

// Register adds the binding pages' routes to mux.
func (b *Binder) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /bind", b.index)
	mux.HandleFunc("GET /bind/{id}", func(w http.ResponseWriter, r *http.Request) { b.page(w, r, nil, "", http.StatusOK, typed{}) })
	mux.HandleFunc("POST /bind/{id}/{envelope_digest}", b.resolve)
}

// IsBindPage reports whether path is under the binding pages (a refusal
// there is a page too, not JSON).
func IsBindPage(p string) bool { return strings.HasPrefix(p, "/bind") }

// Refuse writes the page that tells a browser the engine refused its
// request, with the status, the refusal's code and its message.
func Refuse(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	refusedPage.Execute(w, struct{ Code, Message string }{code, message})
}

// statusOf returns the HTTP status an error of the API carries, or 500.
func statusOf(err error) int {
	var se interface{ HTTPStatus() int }
	if errors.As(err, &se) {
		return se.HTTPStatus()
	}
	return http.StatusInternalServerError
}

// indexEntry is a deliberation with open binding moments, as /bind lists
// it.
type indexEntry struct {
	ID, Title, Status string
	Principal         string // the charter's: whose resolution alone counts
	Open              int
	Deciders          []string
}

// index lists the deliberations that wait for their principal (the
// charter's, who alone resolves their binding moments): those not ended
// that hold an open binding moment. It reads the bodies of the
// artifacts of every deliberation not ended with a decision, like
// .../bindings does for one.
func (b *Binder) index(w http.ResponseWriter, r *http.Request) {
	var cands []indexEntry
	b.r.EachDeliberation(func(d *projector.Deliberation) {
		if !d.Status.Terminal() && len(d.Decisions()) > 0 {
			cands = append(cands, indexEntry{ID: d.ID, Title: d.Title, Status: string(d.Status), Principal: d.Principal()})
		}
	})
	var list []indexEntry
	for _, e := range cands {
		moments, err := b.api.Bindings(r.Context(), e.ID)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		for _, m := range moments {
			if m.Status == "open" {
				e.Open++
				if !slices.Contains(e.Deciders, m.Decider) {
					e.Deciders = append(e.Deciders, m.Decider)
				}
			}
		}
		if e.Open > 0 {
			list = append(list, e)
		}
	}
	slices.SortFunc(list, func(a, b indexEntry) int { return strings.Compare(b.ID, a.ID) }) // v7 ids: newest first
	var buf bytes.Buffer
	if err := bindIndexPage.Execute(&buf, list); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

// bindMoment is a binding moment as the page renders it.
type bindMoment struct {
	binding.Moment
	Env     *binding.Envelope
	Action  string
	Outcome string
	// Typed is the answer the principal wrote in a form the engine
	// refused: the page shows it again rather than lose it.
	Typed string
}

type bindView struct {
	Deliberation, Title, Status string
	Moments                     []bindMoment
	Result                      *binding.Resolved
	Error                       string
	// Lost is an answer a refused form carried for a moment no longer
	// open: shown, so that the principal can copy it.
	Lost string
	// SignIn: the browser is not signed in. The page shows the binding
	// moments, and instead of their forms, how to sign in.
	SignIn bool
}

// typed is what a refused form carried, shown again on the page.
type typed struct{ digest, answer string }

// page renders the binding moments of a deliberation for its principal
// (seed 002 §9.1: all four briefing slots, the recommended option visibly
// distinct, each option's reasoning with it, every hatch the envelope
// opens, and a decline of its own; a malformed envelope falls back to the
// provisional decision's outcome with a diagnostic). It works without
// JavaScript: each affordance is a form.
func (b *Binder) page(w http.ResponseWriter, r *http.Request, res *binding.Resolved, failure string, status int, kept typed) {
	id := r.PathValue("id")
	view := bindView{Deliberation: id, Result: res, Error: failure}
	if _, err := b.principal(r); err != nil && statusOf(err) == http.StatusUnauthorized {
		// Signing in first: a form the engine would refuse is not shown.
		view.SignIn = true
	}
	found := b.r.ReadDeliberation(id, func(d *projector.Deliberation) {
		view.Title, view.Status = d.Title, string(d.Status)
	})
	if !found {
		http.Error(w, "deliberation "+id+" not found", http.StatusNotFound)
		return
	}
	moments, err := b.api.Bindings(r.Context(), id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	for _, m := range moments {
		bm := bindMoment{Moment: m, Action: "/bind/" + id + "/" + m.EnvelopeDigest}
		if kept.digest == m.EnvelopeDigest && m.Status == "open" {
			bm.Typed, kept.answer = kept.answer, ""
		}
		switch m.Status {
		case "malformed":
			bm.Outcome = b.outcome(r.Context(), id, m.Decision)
		default:
			env, err := binding.ParseEnvelope(m.Envelope)
			if err != nil {
				continue
			}
			bm.Env = env
		}
		view.Moments = append(view.Moments, bm)
	}
	view.Lost = kept.answer
	var buf bytes.Buffer
	if err := bindPage.Execute(&buf, view); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// outcome returns the outcome of decision, a DECISION of deliberation id,
// read from the stream ("" when it cannot be read).
func (b *Binder) outcome(ctx context.Context, id string, decision canon.Digest) string {
	var seq uint64
	b.r.ReadDeliberation(id, func(d *projector.Deliberation) { seq = d.PositionOf(decision) })
	if seq == 0 {
		return ""
	}
	var msg *jetstream.RawStreamMsg
	var err error
	if len(b.Streams) > 0 {
		msg, err = ledger.GetMsg(ctx, b.Streams, seq)
	} else {
		msg, err = b.stream.GetMsg(ctx, seq)
	}
	if err != nil {
		return ""
	}
	a, err := events.Validate(msg.Data)
	if err != nil {
		return ""
	}
	if d, ok := a.Payload.(*events.Decision); ok {
		return d.Outcome
	}
	return ""
}

// resolve takes a form of the page and resolves the binding moment.
func (b *Binder) resolve(w http.ResponseWriter, r *http.Request) {
	as, err := b.principal(r)
	if err != nil {
		b.page(w, r, nil, err.Error(), statusOf(err), typed{})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		b.page(w, r, nil, "the form could not be read: "+err.Error(), http.StatusBadRequest, typed{})
		return
	}
	digest := r.PathValue("envelope_digest")
	kept := typed{digest, r.PostForm.Get("answer")}
	res := map[string]any{"envelope_digest": digest, "resolution": r.PostForm.Get("resolution")}
	switch r.PostForm.Get("resolution") {
	case "option":
		n, err := strconv.Atoi(r.PostForm.Get("option_idx"))
		if err != nil {
			b.page(w, r, nil, "option_idx must be a number", http.StatusBadRequest, kept)
			return
		}
		res["option_idx"] = n
	case "answer":
		res["answer"] = r.PostForm.Get("answer")
	}
	body, _ := json.Marshal(map[string]any{"binding_moment_resolution": res})
	out, err := b.api.Resolve(r.Context(), r.PathValue("id"), digest, body, as)
	if err != nil {
		b.page(w, r, nil, err.Error(), statusOf(err), kept)
		return
	}
	if out.Ordinal == 0 {
		b.r.ReadDeliberation(r.PathValue("id"), func(d *projector.Deliberation) { out.Ordinal = d.Ordinal(out.Position) })
	}
	b.page(w, r, out, "", http.StatusOK, typed{})
}

// recHTML is text of the record for a page: HTML-escaped, every character
// internal/textsafe calls unsafe (controls, bidirectional controls, the
// other invisible format characters) drawn as its escape in a marked span,
// the whole in an isolate, so that neither an override nor right-to-left
// letters reorder what stands around it (the explorer's rec does the same).
func recHTML(s string) template.HTML {
	var b strings.Builder
	b.WriteString(`<bdi dir="auto">`)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `<span class="ctl">\x%02x</span>`, s[i])
		case r != '\n' && textsafe.Unsafe(r):
			b.WriteString(`<span class="ctl" title="an invisible character, shown as its code">`)
			b.WriteString(textsafe.Escape(r))
			b.WriteString(`</span>`)
		default:
			b.WriteString(template.HTMLEscapeString(s[i : i+n]))
		}
		i += n
	}
	b.WriteString(`</bdi>`)
	return template.HTML(b.String())
}
