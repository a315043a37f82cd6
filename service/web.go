package service

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/parley-engine/parley/binding"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
)

//go:embed web/bind.html web/index.html web/refused.html
var webFS embed.FS

var (
	bindPage = template.Must(template.New("bind.html").Funcs(template.FuncMap{
		"deref": func(p *int) int { return *p },
	}).ParseFS(webFS, "web/bind.html"))
	indexPage   = template.Must(template.ParseFS(webFS, "web/index.html"))
	refusedPage = template.Must(template.ParseFS(webFS, "web/refused.html"))
)

// indexEntry is a deliberation with open binding moments, as /bind lists
// it.
type indexEntry struct {
	ID, Title, Status string
	Open              int
	Deciders          []string
}

// webIndex lists the deliberations that wait for their principal: those
// not ended that hold an open binding moment. It reads the bodies of the
// artifacts of every deliberation not ended with a decision, like
// .../bindings does for one.
func (q *Queries) webIndex(w http.ResponseWriter, r *http.Request) {
	var cands []indexEntry
	q.r.EachDeliberation(func(d *projector.Deliberation) {
		if !d.Status.Terminal() && len(d.Decisions()) > 0 {
			cands = append(cands, indexEntry{ID: d.ID, Title: d.Title, Status: string(d.Status)})
		}
	})
	var list []indexEntry
	for _, e := range cands {
		moments, err := q.Bindings(r.Context(), e.ID)
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
	if err := indexPage.Execute(&buf, list); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

// webMoment is a binding moment as the page renders it.
type webMoment struct {
	BindingMoment
	Env     *binding.Envelope
	Action  string
	Outcome string
}

type bindView struct {
	Deliberation, Title, Status string
	Moments                     []webMoment
	Result                      *Resolved
	Error                       string
}

// webBind renders the binding moments of a deliberation for its principal
// (seed 002 §9.1: all four briefing slots, the recommended option visibly
// distinct, each option's reasoning with it, every hatch the envelope
// opens, and a decline of its own; a malformed envelope falls back to the
// provisional decision's outcome with a diagnostic). It works without
// JavaScript: each affordance is a form.
func (q *Queries) webBind(w http.ResponseWriter, r *http.Request, res *Resolved, failure string, status int) {
	id := r.PathValue("id")
	v, err := q.Get(id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	moments, err := q.Bindings(r.Context(), id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	view := bindView{Deliberation: id, Title: v.Title, Status: string(v.Status), Result: res, Error: failure}
	for _, m := range moments {
		wm := webMoment{BindingMoment: m, Action: "/bind/" + id + "/" + m.EnvelopeDigest}
		switch m.Status {
		case "malformed":
			if raw, err := q.Artifact(r.Context(), id, m.Decision.String()); err == nil {
				if a, err := events.Validate(raw); err == nil {
					if d, ok := a.Payload.(*events.Decision); ok {
						wm.Outcome = d.Outcome
					}
				}
			}
		default:
			env, err := binding.ParseEnvelope(m.Envelope)
			if err != nil {
				continue
			}
			wm.Env = env
		}
		view.Moments = append(view.Moments, wm)
	}
	var buf bytes.Buffer
	if err := bindPage.Execute(&buf, view); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// webResolve takes a form of the page and resolves the binding moment.
func (q *Queries) webResolve(w http.ResponseWriter, r *http.Request) {
	as, err := resolver(r)
	if err != nil {
		var ae *apiError
		errors.As(err, &ae)
		q.webBind(w, r, nil, err.Error(), ae.Status)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		q.webBind(w, r, nil, "the form could not be read: "+err.Error(), http.StatusBadRequest)
		return
	}
	digest := r.PathValue("envelope_digest")
	res := map[string]any{"envelope_digest": digest, "resolution": r.PostForm.Get("resolution")}
	switch r.PostForm.Get("resolution") {
	case "option":
		n, err := strconv.Atoi(r.PostForm.Get("option_idx"))
		if err != nil {
			q.webBind(w, r, nil, "option_idx must be a number", http.StatusBadRequest)
			return
		}
		res["option_idx"] = n
	case "answer":
		res["answer"] = r.PostForm.Get("answer")
	}
	body, _ := json.Marshal(map[string]any{"binding_moment_resolution": res})
	out, err := q.Resolve(r.Context(), r.PathValue("id"), digest, body, as)
	if err != nil {
		status := http.StatusInternalServerError
		var ae *apiError
		if errors.As(err, &ae) {
			status = ae.Status
		}
		q.webBind(w, r, nil, err.Error(), status)
		return
	}
	q.webBind(w, r, out, "", http.StatusOK)
}
