// parley explorer: vanilla JS, no framework. Every text from the record is
// put in the page as text (never as HTML), and never as a character that
// changes what is shown instead of showing itself: controls, bidirectional
// controls and the other invisible format characters are drawn as visible
// escapes (the set of internal/textsafe), and the record's own words
// (titles, statements, reasons, messages) stand in an isolate (<bdi>), so
// that right-to-left text cannot reorder what is around it.
"use strict";
(() => {
const SVGNS = "http://www.w3.org/2000/svg";
const GRAPH_MAX = 400;       // nodes laid out at once; more: a window over them
const TIMELINE_PAGE = 300;   // artifacts listed at once
const LIST_PAGE = 200;       // objections, decisions, rejections listed at once
const RELATIONS = ["supports", "objects-to", "revises", "supersedes", "considers", "decides", "none"];

// UNSAFE are the characters internal/textsafe.Unsafe names: C0 and C1
// controls, DEL, every format character (Cf: the bidirectional controls,
// zero-width characters, tags…), the line and paragraph separators, the
// fillers that draw nothing. A newline stays (it is white space here).
const UNSAFE = /[\p{Cc}\p{Cf}\u2028\u2029\u115f\u1160\u3164\uffa0]/gu;
function esc(c) {
  const n = c.codePointAt(0);
  if (n < 0x80) return "\\x" + n.toString(16).padStart(2, "0");
  if (n <= 0xffff) return "\\u" + n.toString(16).padStart(4, "0");
  return "\\U" + n.toString(16).padStart(8, "0");
}
// vis: the text with every unsafe character as its escape.
const vis = t => String(t).replace(UNSAFE, c => c === "\n" ? c : esc(c));
// rec: record text, isolated, its unsafe characters as marked escapes.
function rec(t) {
  t = String(t == null ? "" : t);
  const b = document.createElement("bdi");
  b.setAttribute("dir", "auto");
  let last = 0;
  for (const m of t.matchAll(UNSAFE)) {
    if (m[0] === "\n") continue;
    if (m.index > last) b.append(t.slice(last, m.index));
    const x = document.createElement("span");
    x.className = "ctl"; x.title = "an invisible character, shown as its code"; x.textContent = esc(m[0]);
    b.append(x);
    last = m.index + m[0].length;
  }
  if (last < t.length) b.append(t.slice(last));
  return b;
}
function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "text") e.textContent = vis(v);
    else e.setAttribute(k, v === true ? "" : vis(v));
  }
  for (const k of kids.flat(Infinity)) if (k != null && k !== false) e.append(k instanceof Node ? k : vis(k));
  return e;
}
function put(e, ...kids) { e.replaceChildren(...kids.flat(Infinity).filter(k => k != null && k !== false).map(k => k instanceof Node ? k : vis(k))); }
function s(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v != null) e.setAttribute(k, vis(v));
  return e;
}
const short = id => (id || "").replace(/^sha256:/, "").slice(0, 10);
const fmtTime = t => t ? new Date(t).toLocaleString() : "";
function ago(t) {
  if (!t) return "";
  const d = (Date.now() - new Date(t).getTime()) / 1000;
  if (d < 60) return "just now";
  if (d < 3600) return Math.round(d / 60) + " min ago";
  if (d < 86400) return Math.round(d / 3600) + " h ago";
  return Math.round(d / 86400) + " days ago";
}
function clip(t, n) { t = (t || "").replace(/\s+/g, " ").trim(); return t.length > n ? t.slice(0, n - 1) + "…" : t; }
async function getJSON(url) {
  const r = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await r.json().catch(() => null);
  if (!r.ok) throw new Error((body && body.error) || (r.status + " " + r.statusText));
  return body;
}
const app = document.getElementById("app");
const crumb = document.getElementById("crumb");
const liveEl = document.getElementById("live");
function setLive(cls, text) { liveEl.hidden = false; liveEl.className = "live " + cls; liveEl.textContent = vis(text); liveEl.dataset.state = cls; }

// ---------- the list of deliberations ----------
const STATUSES = ["open", "suspended", "completed", "cancelled", "deadlock", "exhausted"];

async function listPage() {
  document.title = "parley: deliberations";
  const params = new URLSearchParams(location.search);
  const q = h("input", { type: "search", id: "q", name: "q", placeholder: "Search titles (or an id's start)", value: params.get("q") || "" });
  const st = h("select", { id: "status", name: "status" }, h("option", { value: "" }, "any status"), STATUSES.map(x => h("option", { value: x }, x)));
  st.value = params.get("status") || "";
  const form = h("form", { class: "controls", id: "filters", onsubmit: ev => { ev.preventDefault(); go(""); } },
    q, st, h("button", { type: "submit" }, "Search"));
  st.addEventListener("change", () => go(""));
  const body = h("tbody", { id: "rows" });
  const pager = h("div", { class: "pager" });
  put(app, h("h1", {}, "Deliberations"), form,
    h("table", { id: "list" }, h("thead", {}, h("tr", {}, ["Title", "Status", "Artifacts", "Participants", "Rejections", "Last activity"].map(t => h("th", {}, t)))), body), pager);
  function go(before) {
    const p = new URLSearchParams();
    if (q.value.trim()) p.set("q", q.value.trim());
    if (st.value) p.set("status", st.value);
    if (before) p.set("before", before);
    history.replaceState(null, "", "/" + (p.toString() ? "?" + p : ""));
    load(p);
  }
  async function load(p) {
    let page;
    try { page = await getJSON("/api/v1/explorer/deliberations?" + p); }
    catch (err) { put(body, h("tr", {}, h("td", { colspan: 6, class: "bad" }, "The list could not be read: " + err.message))); return; }
    put(body, ...page.deliberations.map(d => h("tr", { class: "row", "data-id": d.id },
      h("td", {}, h("a", { href: "/deliberations/" + encodeURIComponent(d.id) }, d.title ? rec(d.title) : "(untitled)"), h("div", { class: "muted mono" }, d.id)),
      h("td", {}, h("span", { class: "badge st-" + d.status }, d.status), d.open_blocking_objections ? h("div", { class: "bad" }, d.open_blocking_objections + " open blocking") : null),
      h("td", {}, h("div", {}, d.artifacts + " artifact" + (d.artifacts === 1 ? "" : "s")),
        h("div", { class: "muted" }, Object.entries(d.counts).map(([t, n]) => h("span", { class: "pill ty-" + t }, n + " " + t.toLowerCase())))),
      h("td", {}, d.participants.slice(0, 6).map(x => h("span", { class: "pill" }, x.id + " " + x.artifacts)), d.participants.length > 6 ? "+" + (d.participants.length - 6) : null),
      h("td", {}, String(d.rejections)),
      h("td", { title: fmtTime(d.last_activity) }, ago(d.last_activity), h("div", { class: "muted" }, "position " + d.position)))));
    if (!page.deliberations.length) put(body, h("tr", {}, h("td", { colspan: 6, class: "muted", id: "none" }, "No deliberation matches.")));
    put(pager, 
      p.has("before") ? h("button", { onclick: () => go("") }, "First page") : null,
      page.next_before ? h("button", { id: "next", onclick: () => go(String(page.next_before)) }, "Next page") : null);
    document.body.dataset.rendered = "list";
  }
  load(params);
}

// ---------- one deliberation ----------
function deliberationPage(id) {
  const M = {
    id, view: null, arts: new Map(), order: [], byPos: [], rejections: [], state: null, ready: false,
    closures: new Map(), provenance: new Map(), bindings: [], incoming: new Map(), dispositions: new Map(),
    selected: null, graphStart: null, timelineShown: TIMELINE_PAGE, lists: { obj: LIST_PAGE, dec: LIST_PAGE, rej: LIST_PAGE },
  };
  window.parleyExplorer = M; // for the console and the tests
  const el = {};
  put(app, 
    el.head = h("div", { id: "head" }, h("h1", {}, "Deliberation"), h("div", { class: "muted mono" }, id)),
    el.banner = h("div", { class: "banner", id: "outcome" }, "Reading the record…"),
    h("div", { class: "layout" },
      h("div", {},
        h("div", { class: "graphbox" },
          el.graphbar = h("div", { class: "graphbar" }),
          el.svg = s("svg", { class: "dag", id: "dag", role: "img", "aria-label": "the deliberation's DAG" }),
          legend()),
        h("h2", {}, "Decisions"), el.decisions = h("div", { id: "decisions" }, h("p", { class: "muted" }, "None yet.")),
        h("h2", {}, "Objections"), el.objections = h("div", { id: "objections" }, h("p", { class: "muted" }, "None yet.")),
        h("h2", {}, "Everything, in order"), el.timeline = h("div", { id: "timeline" }),
        h("h2", {}, "Rejections"), el.rejections = h("div", { id: "rejections" }, h("p", { class: "muted" }, "None.")),
        h("h2", {}, "Binding moments"), el.bindings = h("div", { id: "bindings" }, h("p", { class: "muted" }, "None."))),
      el.inspector = h("aside", { class: "inspector", id: "inspector" }, h("p", { class: "muted" }, "Select an artifact in the graph or the list to inspect it."))));
  crumb.textContent = "";
  const graph = makeGraph(el, M, select);

  const label = a => a.ordinal ? "#" + a.ordinal : "pos " + a.position;
  const refLabel = target => { const a = M.arts.get(target); return a ? label(a) + " " + a.type : short(target); };
  const text = a => {
    const p = (a.body && a.body.payload) || {};
    switch (a.type) {
      case "CLAIM": case "REVISION": case "OBJECTION": return p.statement || "";
      case "EVIDENCE": return p.content || "";
      case "DECISION": return p.outcome || "";
      case "FAILURE": return (p.code ? p.code + ": " : "") + (p.description || "");
      case "TERMINATION": return (p.state || "") + (p.reason ? ": " + p.reason : "");
    }
    return "";
  };
  M.text = text; M.label = label;
  function refLink(target, extra) {
    const a = M.arts.get(target);
    return h("a", { class: "ref", href: "#" + target, "data-ref": target, onclick: ev => { ev.preventDefault(); if (a) select(target); } },
      refLabel(target), extra ? " " + extra : "", a ? h("span", { class: "muted" }, " “", rec(clip(text(a), 70)), "”") : null);
  }

  // objection state: open (blocking, not disposed), disposed (by a decision), or neither
  function objectionState(a) {
    const p = (a.body && a.body.payload) || {};
    const disp = M.dispositions.get(a.artifact_id) || [];
    const pub = disp.filter(d => d.disposition !== "deferred");
    const open = M.state ? M.state.open_blocking_objections.includes(a.artifact_id) : false;
    if (open) return { cls: "open", text: "BLOCKING · OPEN", disp };
    if (pub.length) return { cls: "disposed", text: "DISPOSED · " + pub[pub.length - 1].disposition.toUpperCase(), disp };
    if (p.blocking) return { cls: "disposed", text: "BLOCKING · NOT OPEN", disp };
    return { cls: "nb", text: "NON-BLOCKING", disp };
  }
  M.objectionState = objectionState;

  function add(a) {
    if (M.arts.has(a.artifact_id)) return false; // sent again after a reconnection
    a.type = a.artifact_type;
    a.canonical = a.canonical || "";
    try { a.body = a.canonical ? JSON.parse(a.canonical) : null; } catch { a.body = null; }
    M.arts.set(a.artifact_id, a);
    let i = M.order.length;
    while (i > 0 && M.order[i - 1].position > a.position) i--;
    M.order.splice(i, 0, a);
    for (const r of (a.body && a.body.references) || []) {
      const rel = r.relation || "none";
      if (!M.incoming.has(r.artifact_id)) M.incoming.set(r.artifact_id, []);
      M.incoming.get(r.artifact_id).push({ from: a.artifact_id, relation: rel });
    }
    if (a.type === "DECISION") {
      for (const d of (a.body && a.body.payload && a.body.payload.objection_dispositions) || []) {
        if (!M.dispositions.has(d.objection)) M.dispositions.set(d.objection, []);
        M.dispositions.get(d.objection).push({ ...d, decision: a.artifact_id });
      }
      fetchClosure(a);
      if (a.body && a.body.extensions && a.body.extensions["parley.binding"]) M.hasBindings = true;
    }
    if (a.type === "EVIDENCE") M.hasEvidence = true;
    return true;
  }

  async function fetchClosure(a) {
    try {
      const r = await getJSON("/api/v1/deliberations/" + encodeURIComponent(id) + "/closure/" + encodeURIComponent(a.artifact_id));
      M.closures.set(a.artifact_id, r);
    } catch (err) { M.closures.set(a.artifact_id, { error: err.message }); }
    schedule(false);
  }
  let provTimer = 0, bindTimer = 0;
  function refreshSide() {
    if (M.hasEvidence) { clearTimeout(provTimer); provTimer = setTimeout(fetchProvenance, 300); }
    if (M.hasBindings) { clearTimeout(bindTimer); bindTimer = setTimeout(fetchBindings, 300); }
  }
  async function fetchProvenance() {
    try {
      const r = await getJSON("/api/v1/deliberations/" + encodeURIComponent(id) + "/provenance");
      M.provenanceReport = r;
      for (const e of r.evidence || []) M.provenance.set(e.artifact_id, e);
    } catch (err) { M.provenanceError = err.message; }
    schedule(false);
  }
  async function fetchBindings() {
    try { M.bindings = await getJSON("/api/v1/deliberations/" + encodeURIComponent(id) + "/bindings"); }
    catch (err) { M.bindingsError = err.message; }
    schedule(false);
  }
  async function fetchView() {
    try { M.view = await getJSON("/api/v1/deliberations/" + encodeURIComponent(id)); }
    catch (err) { el.banner.textContent = vis("This deliberation could not be read: " + err.message); el.banner.className = "banner bad"; }
    schedule(false);
  }

  // rendering, batched: the graph laid out again at most every 700 ms while live
  let pending = 0, graphDirty = false, lastGraph = 0, graphTimer = 0;
  function schedule(graphToo) {
    graphDirty = graphDirty || graphToo;
    if (pending || !M.ready) return;
    pending = requestAnimationFrame(() => {
      pending = 0;
      renderHead(); renderDecisions(); renderObjections(); renderTimeline(); renderRejections(); renderBindings();
      if (M.selected) renderInspector(M.selected);
      if (graphDirty) {
        // at most every 700 ms, and never more than a third of the time
        const wait = Math.max(700, 3 * (M.layoutMs || 0)) - (performance.now() - lastGraph);
        if (wait > 0 && lastGraph) {
          if (!graphTimer) graphTimer = setTimeout(() => { graphTimer = 0; schedule(true); }, wait);
          return;
        }
        graphDirty = false; lastGraph = performance.now();
        graph.render();
      } else graph.restyle();
      for (const a of M.order) if (a.fresh) a.fresh = false; // highlighted once
      if (!document.body.dataset.rendered) {
        document.body.dataset.rendered = String(Math.round(performance.now()));
      }
      document.body.dataset.artifacts = String(M.arts.size);
    });
  }

  function renderHead() {
    const v = M.view, st = M.state || v || {};
    const title = (v && v.title) || "(untitled)";
    document.title = vis("parley: " + title);
    crumb.textContent = vis("› " + clip(title, 60));
    const byPart = {};
    for (const a of M.order) byPart[a.participant] = (byPart[a.participant] || 0) + 1;
    const parts = Object.entries(byPart).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    const charter = v && v.charter;
    const wasOpen = !!el.head.querySelector("details[open]"); // a live update keeps the charter open
    put(el.head, 
      h("div", { class: "head" }, h("h1", { id: "title" }, rec(title)), h("span", { class: "badge st-" + st.status, id: "status" }, st.status || "")),
      h("div", { class: "facts" },
        h("span", {}, h("span", { id: "count" }, String(M.arts.size)), " artifacts"),
        h("span", {}, String(st.rejections || 0), " rejections"),
        h("span", { class: "mono" }, id),
        h("a", { href: "/api/v1/deliberations/" + encodeURIComponent(id) }, "JSON")),
      h("div", { class: "facts", id: "participants" }, "Participants: ", parts.map(([p, n]) => h("span", { class: "pill" }, p + " · " + n))),
      charter ? h("details", { class: "charter", id: "charter", open: wasOpen }, h("summary", {}, "Charter"), h("dl", { class: "kv" },
        h("dt", {}, "title"), h("dd", {}, rec(charter.title || "")),
        h("dt", {}, "participants"), h("dd", {}, (charter.participants || []).join(", ") || "anyone"),
        charter.terminators ? [h("dt", {}, "terminators"), h("dd", {}, charter.terminators.join(", "))] : null,
        charter.limits ? [h("dt", {}, "limits"), h("dd", {}, kvText(charter.limits))] : null,
        charter.policy ? [h("dt", {}, "policy"), h("dd", {}, kvText(charter.policy))] : null)) : null);
    renderBanner();
  }
  function kvText(o) { return Object.entries(o || {}).map(([k, v]) => k + ": " + (typeof v === "object" ? JSON.stringify(v) : v)).join(" · "); }

  function renderBanner() {
    const st = M.state || M.view;
    if (!st) return;
    const terms = M.order.filter(a => a.type === "TERMINATION");
    const fails = M.order.filter(a => a.type === "FAILURE");
    const finals = M.order.filter(a => a.type === "DECISION" && a.body && a.body.payload.status === "final");
    const kids = [];
    let cls = "open";
    if (terms.length) {
      const t = terms[terms.length - 1], p = t.body.payload;
      cls = p.state === "completed" ? "good" : "bad";
      kids.push(h("strong", {}, "Ended: " + p.state), " — ", label(t), " by ", t.participant, p.reason ? [": ", rec(p.reason)] : "");
    } else kids.push(h("strong", {}, "In progress: " + st.status));
    if (finals.length) {
      const f = finals[finals.length - 1], c = M.closures.get(f.artifact_id);
      kids.push(h("div", { id: "final" }, "Final decision ", refLink(f.artifact_id), ": ",
        !c ? h("span", { class: "muted" }, "closure being verified…") : c.error ? h("span", { class: "bad" }, "closure unavailable: " + c.error)
          : c.ok ? h("span", { class: "ok", id: "final-closure", "data-ok": "true" }, "✓ closure verified (" + c.closure_size + " artifacts)")
            : h("span", { class: "bad", id: "final-closure", "data-ok": "false" }, "✗ closure does not verify: " + c.findings.map(f => f.code).join(", "))));
    }
    const open = (M.state && M.state.open_blocking_objections) || [];
    if (open.length) kids.push(h("div", { class: "bad" }, open.length + " blocking objection" + (open.length === 1 ? "" : "s") + " open: ", open.slice(0, 8).map(o => [refLink(o), " "])));
    if (fails.length) kids.push(h("div", { class: "bad", id: "failures" }, fails.length + " FAILURE" + (fails.length === 1 ? "" : "s") + ": ",
      fails.slice(-5).map(f => h("div", {}, refLink(f.artifact_id), " by ", f.participant)), fails.length > 5 ? h("div", { class: "muted" }, "… and " + (fails.length - 5) + " earlier") : null));
    el.banner.className = "banner " + cls;
    put(el.banner, ...kids);
  }

  function more(key, n, render) {
    return h("button", { onclick: () => { M.lists[key] += LIST_PAGE; render(); } }, "Show " + Math.min(LIST_PAGE, n) + " more");
  }
  function renderDecisions() {
    const decs = M.order.filter(a => a.type === "DECISION");
    if (!decs.length) return;
    const shown = decs.slice(-M.lists.dec);
    put(el.decisions, 
      decs.length > shown.length ? more("dec", decs.length - shown.length, renderDecisions) : null,
      ...shown.map(a => {
        const p = a.body ? a.body.payload : {};
        const c = M.closures.get(a.artifact_id);
        return h("div", { class: "card decision" + (p.status === "final" ? " final" : ""), "data-id": a.artifact_id },
          h("div", {}, h("a", { class: "ref", href: "#", onclick: ev => { ev.preventDefault(); select(a.artifact_id); } }, label(a)), " ",
            h("span", { class: "ty ty-DECISION" }, (p.status || "").toUpperCase() + " DECISION"), " by ", a.participant),
          h("div", { class: "text" }, rec(p.outcome || "")),
          closureView(c),
          (p.objection_dispositions || []).length ? h("div", {}, h("h3", {}, "Objections disposed of"), h("ul", { class: "reflist" },
            p.objection_dispositions.map(d => h("li", {}, h("strong", { class: d.disposition === "deferred" ? "warn" : "ok" }, d.disposition), " ", refLink(d.objection), d.rationale ? h("div", { class: "muted" }, "why: " + d.rationale) : null,
              (d.by || []).length ? h("div", { class: "muted" }, "by ", d.by.map(b => [refLink(b), " "])) : null)))) : null,
          (p.unresolved_issues || []).length ? h("div", {}, h("h3", {}, "Unresolved issues"), h("ul", {}, p.unresolved_issues.map(u => h("li", {}, u.description, u.objection ? [" — ", refLink(u.objection)] : null)))) : null);
      }));
  }
  function closureView(c) {
    if (!c) return h("div", { class: "muted" }, "Closure: being verified…");
    if (c.error) return h("div", { class: "bad" }, "Closure unavailable: " + c.error);
    return h("div", { class: "closure", "data-ok": String(c.ok) },
      c.ok ? h("span", { class: "ok" }, "✓ Closure verifies") : h("span", { class: "bad" }, "✗ Closure does not verify"),
      h("span", { class: "muted" }, " at position " + c.position + ", over " + c.closure_size + " artifacts"),
      c.findings.length ? h("ul", { class: "findings" }, c.findings.map(f => h("li", { class: f.severity === "error" ? "bad" : "warn" },
        h("code", {}, f.code), " ", rec(f.message), f.artifact_id ? [" — ", refLink(f.artifact_id)] : null))) : null);
  }
  function renderObjections() {
    const objs = M.order.filter(a => a.type === "OBJECTION");
    if (!objs.length) return;
    const shown = objs.slice(-M.lists.obj);
    put(el.objections, 
      objs.length > shown.length ? more("obj", objs.length - shown.length, renderObjections) : null,
      h("table", {}, h("thead", {}, h("tr", {}, ["", "Objection", "Against", "What became of it"].map(t => h("th", {}, t)))),
        h("tbody", {}, shown.map(a => {
          const os = objectionState(a);
          const targets = ((a.body && a.body.references) || []).filter(r => r.relation === "objects-to");
          return h("tr", { "data-id": a.artifact_id, "data-state": os.cls },
            h("td", {}, h("a", { class: "ref", href: "#", onclick: ev => { ev.preventDefault(); select(a.artifact_id); } }, label(a)), h("div", { class: "muted" }, a.participant)),
            h("td", {}, h("div", { class: "text" }, rec(text(a)))),
            h("td", {}, targets.map(r => h("div", {}, refLink(r.artifact_id)))),
            h("td", {}, h("span", { class: "badge " + (os.cls === "open" ? "bad" : os.cls === "disposed" ? "ok" : "muted") }, os.text),
              os.disp.map(d => h("div", {}, d.disposition, " by ", refLink(d.decision), d.rationale ? h("div", { class: "muted" }, "why: " + d.rationale) : null))));
        }))));
  }
  function renderTimeline() {
    const n = M.order.length;
    const shown = M.order.slice(Math.max(0, n - M.timelineShown));
    put(el.timeline, 
      n > shown.length ? h("button", { id: "earlier", onclick: () => { M.timelineShown += TIMELINE_PAGE; renderTimeline(); } }, "Show " + Math.min(TIMELINE_PAGE, n - shown.length) + " earlier (of " + n + ")") : null,
      h("ol", { class: "timeline" }, shown.map(a => h("li", { "data-id": a.artifact_id, class: (a.fresh ? "fresh " : "") + (M.selected === a.artifact_id ? "sel" : ""), onclick: () => select(a.artifact_id) },
        h("span", { class: "mono" }, label(a)),
        h("span", {}, a.participant),
        h("span", { class: "ty ty-" + a.type }, a.type + (a.type === "OBJECTION" ? (a.body && a.body.payload.blocking ? " ■" : "") : "")),
        h("span", {}, h("span", { class: "text" }, rec(clip(text(a), 240))),
          h("div", { class: "rels" }, ((a.body && a.body.references) || []).map(r => [(r.relation || "refers to") + " ", refLabel(r.artifact_id), "  "]))))) ));
  }
  function renderRejections() {
    if (!M.rejections.length) return;
    const shown = M.rejections.slice(-M.lists.rej);
    const st = M.state || {};
    put(el.rejections, 
      h("p", { class: "muted" }, (st.rejections || M.rejections.length) + " message(s) refused" + (st.rejections > M.rejections.length ? " (the most recent are kept in detail)" : "") + "."),
      M.rejections.length > shown.length ? more("rej", M.rejections.length - shown.length, renderRejections) : null,
      h("table", {}, h("thead", {}, h("tr", {}, ["Where", "Participant", "Code", "Why"].map(t => h("th", {}, t)))),
        h("tbody", {}, shown.map(r => h("tr", { "data-code": r.code },
          h("td", { class: "mono" }, r.ordinal ? "#" + r.ordinal : "pos " + r.position),
          h("td", {}, r.participant || ""),
          h("td", {}, h("code", {}, r.code), h("div", { class: "muted" }, r.error_class)),
          h("td", {}, rec(r.message), r.artifact_id ? h("div", { class: "muted mono" }, r.artifact_id) : null))))));
  }
  function renderBindings() {
    if (M.bindingsError) { put(el.bindings, h("p", { class: "bad" }, "Binding moments could not be read: " + M.bindingsError)); return; }
    if (!M.bindings.length) return;
    put(el.bindings, h("ul", { class: "reflist" }, M.bindings.map(b => {
      const q = (b.envelope && b.envelope.question) || {};
      return h("li", { "data-status": b.status },
        h("span", { class: "badge " + (b.status === "open" ? "warn" : b.status === "resolved" ? "ok" : "bad") }, b.status), " ",
        refLink(b.decision), " asked by ", b.decider,
        q.stem ? h("div", {}, "“" + q.stem + "”") : null,
        b.status === "malformed" ? h("div", { class: "bad" }, "malformed envelope: " + (b.findings || []).map(f => f.code || JSON.stringify(f)).join(", ")) : null,
        b.resolution ? h("div", { class: "muted" }, "resolved by " + (b.resolved_by || "?") + ": " + resolutionText(b, q),
          b.resolved_in ? [" — ", refLink(b.resolved_in)] : null) : null,
        h("div", {}, h("a", { href: "/bind/" + encodeURIComponent(id), class: "bindlink" }, b.status === "open" ? "Resolve on /bind" : "See on /bind")));
    })));
  }
  function resolutionText(b, q) {
    const r = b.resolution || {};
    if (r.option_idx != null) {
      const o = (q.options || [])[r.option_idx];
      return "chose option " + (r.option_idx + 1) + (o && o.label ? ": " + o.label : "");
    }
    return r.resolution || "";
  }

  function select(aid) {
    M.selected = aid;
    history.replaceState(null, "", "#" + aid); // a link to the artifact
    renderInspector(aid);
    graph.restyle();
    graph.reveal(aid);
    for (const li of el.timeline.querySelectorAll("li.sel")) li.classList.remove("sel");
    const li = el.timeline.querySelector('li[data-id="' + aid + '"]');
    if (li) li.classList.add("sel");
  }
  M.select = select;
  function renderInspector(aid) {
    const a = M.arts.get(aid);
    if (!a) return;
    const p = (a.body && a.body.payload) || {};
    const refs = (a.body && a.body.references) || [];
    const inc = M.incoming.get(aid) || [];
    const kids = [
      h("h2", {}, h("span", { class: "ty ty-" + a.type }, a.type), " ", label(a)),
      h("dl", { class: "kv" },
        h("dt", {}, "participant"), h("dd", {}, a.participant),
        h("dt", {}, "ordinal"), h("dd", {}, a.ordinal ? "#" + a.ordinal + " in this deliberation" : "—"),
        h("dt", {}, "stream position"), h("dd", {}, String(a.position)),
        h("dt", {}, "id"), h("dd", { class: "mono", id: "insp-id" }, aid)),
      h("h3", {}, "Payload"), payloadView(a, p)];
    if (a.type === "OBJECTION") {
      const os = objectionState(a);
      kids.push(h("p", {}, h("span", { class: "badge " + (os.cls === "open" ? "bad" : os.cls === "disposed" ? "ok" : "") }, os.text)),
        os.disp.length ? h("ul", { class: "reflist" }, os.disp.map(d => h("li", {}, d.disposition, " by ", refLink(d.decision), d.rationale ? ": " + d.rationale : ""))) : null);
    }
    if (a.type === "DECISION") kids.push(h("h3", {}, "Closure"), closureView(M.closures.get(aid)));
    if (a.type === "EVIDENCE") {
      const j = M.provenance.get(aid);
      kids.push(h("h3", {}, "Provenance"), j ? h("div", { id: "insp-provenance" },
        h("div", { class: j.admissible ? "ok" : "bad" }, j.admissible ? "✓ admissible" : "✗ not admissible"),
        h("pre", {}, JSON.stringify(j, null, 2))) : h("p", { class: "muted" }, M.provenanceReport && !M.provenanceReport.policy ? "The charter sets no provenance policy: evidence is not judged." : "No judgement."));
    }
    kids.push(h("h3", {}, "References (" + refs.length + ")"),
      refs.length ? h("ul", { class: "reflist", id: "insp-out" }, refs.map(r => h("li", {}, h("em", {}, r.relation || "refers to"), " ", refLink(r.artifact_id)))) : h("p", { class: "muted" }, "None: a root."),
      h("h3", {}, "Referenced by (" + inc.length + ")"),
      inc.length ? h("ul", { class: "reflist", id: "insp-in" }, inc.map(r => h("li", {}, refLink(r.from), " ", h("em", {}, r.relation === "none" ? "refers to it" : r.relation + " it")))) : h("p", { class: "muted" }, "Nothing yet."),
      h("h3", {}, "Canonical bytes (" + new TextEncoder().encode(a.canonical).length + ")"),
      a.error ? h("p", { class: "bad" }, a.error) : h("pre", { class: "mono", id: "insp-bytes" }, a.canonical),
      h("p", {}, h("a", { href: "/api/v1/deliberations/" + encodeURIComponent(id) + "/artifacts/" + encodeURIComponent(aid) }, "as served by the API")));
    const top = el.inspector.scrollTop, same = el.inspector.dataset.id === aid;
    put(el.inspector, ...kids);
    el.inspector.dataset.id = aid;
    if (same) el.inspector.scrollTop = top; // a live update keeps the reader's place
  }
  function payloadView(a, p) {
    const rows = [];
    for (const [k, v] of Object.entries(p)) {
      if (k === "objection_dispositions" || k === "unresolved_issues") {
        rows.push(h("dt", {}, k.replace(/_/g, " ")), h("dd", {}, !v.length ? "none" : h("ul", { class: "reflist" }, v.map(d => h("li", {},
          d.disposition ? [h("strong", {}, d.disposition), " ", refLink(d.objection), d.rationale ? ": " + d.rationale : ""] : [d.description, d.objection ? [" — ", refLink(d.objection)] : null])))));
      } else if (k === "unresolved_objections") {
        rows.push(h("dt", {}, "unresolved objections"), h("dd", {}, v.map(o => [refLink(o), " "])));
      } else rows.push(h("dt", {}, k.replace(/_/g, " ")), h("dd", { class: k === "statement" || k === "content" || k === "outcome" || k === "description" || k === "reason" ? "text" : "" }, typeof v === "object" ? JSON.stringify(v) : rec(String(v))));
    }
    if (a.body && a.body.extensions) rows.push(h("dt", {}, "extensions"), h("dd", {}, Object.keys(a.body.extensions).join(", ")));
    return h("dl", { class: "kv", id: "insp-payload" }, rows);
  }

  // the live feed
  let es = null;
  function connect() {
    setLive("off", "connecting…");
    M.connectAt = M.connectAt || Math.round(performance.now());
    es = new EventSource("/api/v1/deliberations/" + encodeURIComponent(id) + "/events");
    es.addEventListener("open", () => setLive("on", "live"));
    es.addEventListener("error", () => {
      if (es.readyState === EventSource.CLOSED) { if (!M.ended) setLive("err", "the live feed is unavailable"); }
      else setLive("err", "reconnecting…");
    });
    es.addEventListener("artifacts", ev => {
      const t0 = performance.now();
      let added = false;
      for (const a of JSON.parse(ev.data)) {
        if (M.ready) a.fresh = true;
        added = add(a) || added;
      }
      if (added) { schedule(true); if (M.ready) refreshSide(); }
      M.ingestMs = (M.ingestMs || 0) + performance.now() - t0; // the page's own share of the feed's time
    });
    es.addEventListener("rejections", ev => { M.rejections.push(...JSON.parse(ev.data)); schedule(false); });
    es.addEventListener("state", ev => {
      const st = JSON.parse(ev.data), before = M.state;
      M.state = st;
      if (!before || before.status !== st.status) fetchView();
      schedule(false);
    });
    es.addEventListener("ready", () => {
      M.ready = true; M.readyAt = Math.round(performance.now()); setLive("on", "live"); refreshSide(); schedule(true);
      const want = decodeURIComponent(location.hash.slice(1));
      if (M.arts.has(want)) requestAnimationFrame(() => requestAnimationFrame(() => select(want)));
    });
    es.addEventListener("end", ev => {
      M.state = JSON.parse(ev.data); es.close(); M.ended = true;
      M.ready = true; setLive("off", "ended: " + M.state.status);
      schedule(false);
    });
  }
  addEventListener("hashchange", () => {
    const want = decodeURIComponent(location.hash.slice(1));
    if (M.arts.has(want) && want !== M.selected) select(want);
  });
  fetchView().then(connect);
  addEventListener("pagehide", () => es && es.close());
}

// ---------- the DAG: dagre's layout, drawn as SVG, with pan and zoom ----------
function legend() {
  const box = h("div", { class: "legend", id: "legend" });
  for (const r of RELATIONS) {
    const sv = s("svg", { viewBox: "0 0 34 10" });
    sv.append(s("path", { d: "M1 5 H30", class: "edge e-" + r, "stroke-width": "2", fill: "none" }), s("path", { d: "M26 1 L33 5 L26 9 z", class: "m-" + r }));
    box.append(h("span", {}, sv, r === "none" ? "reference without relation" : r));
  }
  box.append(h("span", {}, "■ blocking objection: thick when open, dashed once disposed"));
  return box;
}

function makeGraph(el, M, select) {
  const svg = el.svg;
  const defs = s("defs");
  for (const r of RELATIONS) {
    const m = s("marker", { id: "arrow-" + r, viewBox: "0 0 10 10", refX: "9", refY: "5", markerUnits: "userSpaceOnUse", markerWidth: "11", markerHeight: "11", orient: "auto-start-reverse" });
    m.append(s("path", { d: "M0 0 L10 5 L0 10 z", class: "m-" + r }));
    defs.append(m);
  }
  const vp = s("g", { id: "viewport" });
  svg.append(defs, vp);
  let view = { x: 0, y: 0, k: 1 }, size = { w: 0, h: 0 }, laid = null, fitted = false;
  const apply = () => vp.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
  const W = 250, CH = 37; // node width; characters a line
  const bar = el.graphbar;
  const note = h("span", { class: "note", id: "graph-note" });
  const earlier = h("button", { id: "graph-earlier", hidden: true, onclick: () => shift(-1) }, "◀ earlier");
  const later = h("button", { id: "graph-later", hidden: true, onclick: () => shift(1) }, "later ▶");
  const zoom = f => { const r = svg.getBoundingClientRect(); zoomAt(r.width / 2, r.height / 2, f); };
  bar.append(h("button", { onclick: () => fit(), title: "fit the graph" }, "Fit"), h("button", { onclick: () => zoom(1.25), title: "zoom in" }, "+"),
    h("button", { onclick: () => zoom(0.8), title: "zoom out" }, "−"), earlier, later, note);
  function shift(dir) {
    const n = M.order.length;
    const start = M.graphStart == null ? Math.max(0, n - GRAPH_MAX) : M.graphStart;
    M.graphStart = Math.min(Math.max(0, start + dir * GRAPH_MAX / 2), Math.max(0, n - GRAPH_MAX));
    if (M.graphStart >= n - GRAPH_MAX) M.graphStart = null; // follow the newest again
    fitted = false; render();
  }
  function zoomAt(cx, cy, f) {
    const k = Math.min(3, Math.max(0.05, view.k * f));
    view.x = cx - (cx - view.x) * (k / view.k); view.y = cy - (cy - view.y) * (k / view.k); view.k = k; apply();
  }
  svg.addEventListener("wheel", ev => { ev.preventDefault(); const r = svg.getBoundingClientRect(); zoomAt(ev.clientX - r.left, ev.clientY - r.top, ev.deltaY < 0 ? 1.15 : 1 / 1.15); }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", ev => { if (ev.target.closest(".node")) return; drag = { x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y }; svg.setPointerCapture(ev.pointerId); svg.classList.add("dragging"); });
  svg.addEventListener("pointermove", ev => { if (!drag) return; view.x = drag.vx + ev.clientX - drag.x; view.y = drag.vy + ev.clientY - drag.y; apply(); });
  const end = () => { drag = null; svg.classList.remove("dragging"); };
  svg.addEventListener("pointerup", end); svg.addEventListener("pointercancel", end);

  function fit() {
    if (!laid) return;
    const r = svg.getBoundingClientRect();
    const k = Math.min(r.width / (laid.w + 20), r.height / (laid.h + 20), 1.2);
    if (k >= 0.45) { view = { k, x: (r.width - laid.w * k) / 2, y: (r.height - laid.h * k) / 2 }; apply(); return; }
    // Too large to read whole: readable, around the newest artifact.
    const last = vp.querySelector(".nodes .node:last-child");
    view.k = 0.8;
    if (last) {
      const m = last.transform.baseVal.consolidate().matrix, b = last.getBBox();
      view.x = r.width / 2 - (m.e + b.width / 2) * view.k; view.y = r.height * 0.7 - (m.f + b.height / 2) * view.k;
    }
    // as much of the graph in view as the newest artifact allows
    const w = laid.w * view.k, hh = laid.h * view.k;
    view.x = w <= r.width ? (r.width - w) / 2 : Math.max(Math.min(view.x, 10), r.width - w - 10);
    view.y = hh <= r.height ? (r.height - hh) / 2 : Math.max(Math.min(view.y, 10), r.height - hh - 10);
    apply();
  }
  function wrap(t, lines) {
    const words = (t || "").replace(/\s+/g, " ").trim().split(" ");
    const out = []; let cur = "";
    for (const w of words) {
      if ((cur + " " + w).trim().length > CH) { if (cur) out.push(cur); cur = w.length > CH ? w.slice(0, CH - 1) + "…" : w; if (out.length === lines) break; }
      else cur = (cur + " " + w).trim();
    }
    if (out.length < lines && cur) out.push(cur);
    if (out.length === lines && words.join(" ").length > out.join(" ").length + 1) out[lines - 1] = out[lines - 1].slice(0, CH - 1) + "…";
    return out;
  }
  function render() {
    const n = M.order.length;
    const start = M.graphStart == null ? Math.max(0, n - GRAPH_MAX) : M.graphStart;
    const nodes = M.order.slice(start, start + GRAPH_MAX);
    const inWin = new Set(nodes.map(a => a.artifact_id));
    earlier.hidden = start === 0; later.hidden = start + nodes.length >= n;
    if (!nodes.length) {
      laid = null; svg.dataset.nodes = "0";
      const t = s("text", { x: 20, y: 40, class: "empty" }); t.textContent = "No artifact yet.";
      vp.replaceChildren(t); note.textContent = ""; return;
    }
    const g = new dagre.graphlib.Graph({ multigraph: true });
    g.setGraph({ rankdir: "TB", nodesep: 28, ranksep: 46, edgesep: 12, marginx: 16, marginy: 16 });
    g.setDefaultEdgeLabel(() => ({}));
    const lines = nodes.length > 150 ? 2 : 3;
    for (const a of nodes) {
      const tl = wrap(vis(M.text(a)), lines);
      g.setNode(a.artifact_id, { width: W, height: 24 + 15 * tl.length + (a.type === "OBJECTION" || a.type === "DECISION" ? 15 : 0) + 6, a, tl });
    }
    let outside = 0, k = 0;
    for (const a of nodes) for (const r of (a.body && a.body.references) || []) {
      if (!inWin.has(r.artifact_id)) { outside++; continue; }
      // ranked from the older to the newer; the arrow points at the target
      g.setEdge(r.artifact_id, a.artifact_id, { rel: r.relation || "none", from: a.artifact_id, to: r.artifact_id }, "e" + (k++));
    }
    const t0 = performance.now();
    dagre.layout(g);
    M.layoutMs = Math.round(performance.now() - t0);
    const gi = g.graph();
    laid = { w: gi.width || 100, h: gi.height || 100 };
    const edges = s("g", { class: "edges" }), nodesG = s("g", { class: "nodes" });
    for (const e of g.edges()) {
      const ed = g.edge(e);
      const pts = ed.points.slice().reverse(); // from the referencing artifact to its target
      let d = "M" + pts[0].x + " " + pts[0].y;
      for (let i = 1; i < pts.length; i++) d += " L" + pts[i].x + " " + pts[i].y;
      const path = s("path", { d, class: "edge e-" + ed.rel, "marker-end": "url(#arrow-" + ed.rel + ")", "data-from": ed.from, "data-to": ed.to });
      const t = s("title"); t.textContent = ed.rel; path.append(t);
      edges.append(path);
    }
    for (const v of g.nodes()) {
      const nd = g.node(v), a = nd.a;
      const grp = s("g", { class: "node t-" + a.type, "data-id": a.artifact_id, transform: `translate(${nd.x - nd.width / 2},${nd.y - nd.height / 2})` });
      grp.append(s("rect", { width: nd.width, height: nd.height, rx: 6 }));
      const hd = s("text", { class: "hd t-" + a.type, x: 8, y: 15 }); hd.textContent = vis(M.label(a) + " " + a.type + " · " + clip(a.participant, 18)); grp.append(hd);
      const tx = s("text", { x: 8, y: 16 });
      nd.tl.forEach((line, i) => { const sp = s("tspan", { x: 8, dy: i === 0 ? 16 : 15 }); sp.textContent = vis(line); tx.append(sp); });
      grp.append(tx);
      if (a.type === "OBJECTION" || a.type === "DECISION") {
        const tag = s("text", { class: "tag", x: 8, y: nd.height - 7 }); grp.append(tag);
      }
      const tt = s("title"); tt.textContent = vis(M.label(a) + " " + a.type + " by " + a.participant + "\n" + M.text(a)); grp.append(tt);
      grp.setAttribute("tabindex", "0"); grp.setAttribute("role", "button");
      grp.setAttribute("aria-label", vis(M.label(a) + " " + a.type + " by " + a.participant));
      grp.addEventListener("click", () => select(a.artifact_id));
      grp.addEventListener("keydown", ev => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); select(a.artifact_id); } });
      nodesG.append(grp);
    }
    put(vp, edges, nodesG);
    note.textContent = (n > nodes.length ? `showing ${M.label(nodes[0])}–${M.label(nodes[nodes.length - 1])}, ${nodes.length} of ${n} artifacts` : `${n} artifacts`) +
      (outside ? ` · ${outside} references lead outside this window` : "") + ` · layout ${M.layoutMs} ms`;
    svg.dataset.nodes = String(nodes.length);
    restyle();
    if (!fitted) { fit(); fitted = true; }
  }
  function restyle() {
    for (const grp of vp.querySelectorAll(".node")) {
      const a = M.arts.get(grp.dataset.id);
      grp.classList.toggle("sel", M.selected === a.artifact_id);
      const tag = grp.querySelector("text.tag");
      if (a.type === "OBJECTION") {
        const os = M.objectionState(a);
        grp.classList.toggle("obj-open", os.cls === "open");
        grp.classList.toggle("obj-disposed", os.cls === "disposed");
        grp.dataset.state = os.cls;
        tag.textContent = vis(os.text); tag.setAttribute("class", "tag " + os.cls);
      } else if (a.type === "DECISION") {
        const p = (a.body && a.body.payload) || {}, c = M.closures.get(a.artifact_id);
        tag.textContent = vis((p.status || "").toUpperCase()) + (c && !c.error ? (c.ok ? " · CLOSURE ✓" : " · CLOSURE ✗") : "");
        tag.setAttribute("class", "tag final");
      }
    }
    for (const p of vp.querySelectorAll("path.edge")) {
      const on = M.selected && (p.dataset.from === M.selected || p.dataset.to === M.selected);
      p.classList.toggle("hl", !!on);
      p.classList.toggle("dim", !!M.selected && !on);
    }
  }
  function reveal(aid) {
    const grp = vp.querySelector('.node[data-id="' + aid + '"]');
    if (!grp) {
      const i = M.order.findIndex(a => a.artifact_id === aid);
      if (i < 0) return;
      M.graphStart = Math.max(0, Math.min(i - GRAPH_MAX / 2, M.order.length - GRAPH_MAX)); fitted = true; render();
      return reveal(aid);
    }
    const r = svg.getBoundingClientRect(), b = grp.getBBox(), m = grp.transform.baseVal.consolidate().matrix;
    const cx = (m.e + b.width / 2) * view.k + view.x, cy = (m.f + b.height / 2) * view.k + view.y;
    if (cx < 0 || cy < 0 || cx > r.width || cy > r.height) { view.x += r.width / 2 - cx; view.y += r.height / 2 - cy; apply(); }
  }
  return { render, restyle, reveal };
}

// ---------- routing ----------
const m = location.pathname.match(/^\/deliberations\/([^/]+)$/);
if (m) deliberationPage(decodeURIComponent(m[1]));
else listPage();
})();
