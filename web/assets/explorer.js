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
const GRAPH_MAX = 2000;      // nodes drawn at once; more: a window over them
const DAGRE_MAX = 400;       // nodes dagre lays out; more: layers (linear time)
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
// getJSON reads an API answer. A read refused for the read budget (429)
// or a projection behind (503) with a Retry-After is asked again after
// it, a few times, before its error is shown: on a busy engine the
// explorer waits its turn rather than failing.
async function getJSON(url) {
  for (let attempt = 0; ; attempt++) {
    const r = await fetch(url, { headers: { Accept: "application/json" } });
    const body = await r.json().catch(() => null);
    const wait = Number(r.headers.get("Retry-After"));
    if ((r.status === 429 || r.status === 503) && wait > 0 && attempt < 5) {
      await new Promise(res => setTimeout(res, Math.min(wait, 10) * 1000));
      continue;
    }
    if (!r.ok) throw new Error((body && body.error) || (r.status + " " + r.statusText));
    return body;
  }
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
    selected: null, graphStart: null, at: null, query: "", hits: null, lineage: null, timelineShown: TIMELINE_PAGE, lists: { obj: LIST_PAGE, dec: LIST_PAGE, rej: LIST_PAGE },
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
          el.scrub = h("div", { class: "scrubber", id: "scrubber" }),
          h("div", { class: "dagwrap" },
            el.svg = s("svg", { class: "dag", id: "dag", role: "img", "aria-label": "the deliberation's DAG" }),
            el.mini = h("canvas", { class: "overview", id: "overview", title: "the whole graph, and the part in view: click or drag to move there" })),
          legend()),
        h("h2", {}, "Decisions"), el.decisions = h("div", { id: "decisions" }, h("p", { class: "muted" }, "None yet.")),
        h("h2", {}, "Objections"), el.objections = h("div", { id: "objections" }, h("p", { class: "muted" }, "None yet.")),
        h("h2", {}, "Everything, in order"), el.find = h("div", { class: "controls", id: "find" }), el.timeline = h("div", { id: "timeline" }),
        h("h2", {}, "Rejections"), el.rejections = h("div", { id: "rejections" }, h("p", { class: "muted" }, "None.")),
        h("h2", {}, "Binding moments"), el.bindings = h("div", { id: "bindings" }, h("p", { class: "muted" }, "None.")),
        el.compare = h("div", { id: "compare", hidden: true })),
      el.inspector = h("aside", { class: "inspector", id: "inspector" }, h("p", { class: "muted" }, "Select an artifact in the graph or the list to inspect it."))));
  crumb.textContent = "";
  // The timeline: M.at, when set, is the ordinal the page shows the
  // deliberation at (null: now). visible() is the artifacts up to it.
  M.visible = () => {
    if (M.at == null) return M.order;
    let lo = 0, hi = M.order.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if ((M.order[mid].ordinal || 0) <= M.at) lo = mid + 1; else hi = mid; }
    return M.order.slice(0, lo);
  };
  const TERMINAL = ["completed", "cancelled", "deadlock", "exhausted"];
  M.isEnded = () => !!(M.state && TERMINAL.includes(M.state.status));
  const PUBLIC = ["sustained", "overruled", "addressed", "withdrawn"];
  // cur is the state the page shows: the live one, or, at an earlier
  // ordinal, the fold of the artifacts up to it (blocking objections open
  // until a decision disposes of them; the status the last TERMINATION
  // set, open before one).
  let asOfCache = null;
  function cur() {
    if (M.at == null) return M.state || M.view || {};
    if (asOfCache && asOfCache.at === M.at && asOfCache.n === M.order.length && asOfCache.r === M.rejections.length) return asOfCache.st;
    const V = M.visible(), open = new Set(), terms = [];
    let status = "open", decisions = 0;
    for (const a of V) {
      const p = (a.body && a.body.payload) || {};
      if (a.type === "OBJECTION" && p.blocking) open.add(a.artifact_id);
      if (a.type === "DECISION") { decisions++; for (const d of p.objection_dispositions || []) if (PUBLIC.includes(d.disposition)) open.delete(d.objection); }
      if (a.type === "TERMINATION") { status = p.state; terms.push(a.artifact_id); }
    }
    const rej = M.rejections.filter(r => (r.ordinal || 0) <= M.at).length;
    const st = { status, artifacts: V.length, rejections: rej, open_blocking_objections: [...open].sort(), decisions, terminations: terms, at: M.at };
    asOfCache = { at: M.at, n: M.order.length, r: M.rejections.length, st };
    return st;
  }
  M.cur = cur;
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
    const disp = (M.dispositions.get(a.artifact_id) || []).filter(d => M.at == null || (M.arts.get(d.decision) || {}).ordinal <= M.at);
    const pub = disp.filter(d => d.disposition !== "deferred");
    const st = cur();
    const open = st.open_blocking_objections ? st.open_blocking_objections.includes(a.artifact_id) : false;
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
      renderHead(); renderScrub(); renderDecisions(); renderObjections(); renderFind(); renderTimeline(); renderRejections(); renderBindings();
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
    const v = M.view, st = cur();
    const title = (v && v.title) || "(untitled)";
    document.title = vis("parley: " + title);
    crumb.textContent = vis("› " + clip(title, 60));
    const V = M.visible();
    const byPart = {};
    for (const a of V) byPart[a.participant] = (byPart[a.participant] || 0) + 1;
    const parts = Object.entries(byPart).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    const charter = v && v.charter;
    const wasOpen = !!el.head.querySelector("details[open]"); // a live update keeps the charter open
    put(el.head, 
      h("div", { class: "head" }, h("h1", { id: "title" }, rec(title)), h("span", { class: "badge st-" + st.status, id: "status" }, st.status || ""),
        M.at != null ? h("span", { class: "badge asof", id: "asof" }, "as at #" + M.at) : null),
      h("div", { class: "facts" },
        h("span", {}, h("span", { id: "count" }, String(V.length)), M.at != null ? " of " + M.arts.size : "", " artifacts"),
        h("span", {}, String(st.rejections || 0), " rejections"),
        h("span", { class: "mono" }, id),
        h("a", { href: "/api/v1/deliberations/" + encodeURIComponent(id) }, "JSON"),
        h("a", { id: "dl-recording", href: "/api/v1/explorer/deliberations/" + encodeURIComponent(id) + "/recording", download: "parley-" + id + ".jsonl",
          title: "every message of the deliberation, bytes exact, with its chain and state digest (engine audit reads it)" }, "Download the recording"),
        h("button", { id: "run-audit", onclick: runAudit, title: "export the recording and audit it, as engine audit does" }, "Audit"),
        M.audit ? auditView(M.audit) : null),
      h("div", { class: "facts", id: "participants" }, "Participants: ", parts.map(([p, n]) => h("span", { class: "pill" }, p + " · " + n))),
      usageView(V),
      lineageView(),
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
    const st = cur();
    if (!M.state && !M.view) return;
    const V = M.visible();
    const terms = V.filter(a => a.type === "TERMINATION");
    const fails = V.filter(a => a.type === "FAILURE");
    const finals = V.filter(a => a.type === "DECISION" && a.body && a.body.payload.status === "final");
    const kids = [];
    let cls = "open";
    if (terms.length) {
      const t = terms[terms.length - 1], p = t.body.payload;
      cls = p.state === "completed" ? "good" : "bad";
      kids.push(h("strong", {}, "Ended: " + p.state), " — ", label(t), " by ", t.participant, p.reason ? [": ", rec(p.reason)] : "");
    } else kids.push(h("strong", {}, (M.at != null ? "At #" + M.at + ": " : "In progress: ") + st.status));
    if (finals.length) {
      const f = finals[finals.length - 1], c = M.closures.get(f.artifact_id);
      kids.push(h("div", { id: "final" }, "Final decision ", refLink(f.artifact_id), ": ",
        !c ? h("span", { class: "muted" }, "closure being verified…") : c.error ? h("span", { class: "bad" }, "closure unavailable: " + c.error)
          : c.ok ? h("span", { class: "ok", id: "final-closure", "data-ok": "true" }, "✓ closure verified (" + c.closure_size + " artifacts)")
            : h("span", { class: "bad", id: "final-closure", "data-ok": "false" }, "✗ closure does not verify: " + c.findings.map(f => f.code).join(", "))));
    }
    const open = st.open_blocking_objections || [];
    if (open.length) kids.push(h("div", { class: "bad", id: "open-objections", "data-ids": open.join(" ") }, open.length + " blocking objection" + (open.length === 1 ? "" : "s") + " open: ", open.map(o => M.arts.get(o)).filter(Boolean).sort((x, y) => x.position - y.position).slice(0, 8).map(o => [refLink(o.artifact_id), " "])));
    if (fails.length) kids.push(h("div", { class: "bad", id: "failures" }, fails.length + " FAILURE" + (fails.length === 1 ? "" : "s") + ": ",
      fails.slice(-5).map(f => h("div", {}, refLink(f.artifact_id), " by ", f.participant)), fails.length > 5 ? h("div", { class: "muted" }, "… and " + (fails.length - 5) + " earlier") : null));
    el.banner.className = "banner " + cls;
    put(el.banner, ...kids);
  }

  function more(key, n, render) {
    return h("button", { onclick: () => { M.lists[key] += LIST_PAGE; render(); } }, "Show " + Math.min(LIST_PAGE, n) + " more");
  }
  function renderDecisions() {
    const decs = M.visible().filter(a => a.type === "DECISION");
    if (!decs.length) { put(el.decisions, h("p", { class: "muted" }, "None yet.")); return; }
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
      h("span", { class: "muted" }, (c.ordinal ? " at #" + c.ordinal : " at position " + c.position) + ", over " + c.closure_size + " artifacts"),
      c.findings.length ? h("ul", { class: "findings" }, c.findings.map(f => h("li", { class: f.severity === "error" ? "bad" : "warn" },
        h("code", {}, f.code), " ", rec(f.message), f.artifact_id ? [" — ", refLink(f.artifact_id)] : null))) : null);
  }
  function renderObjections() {
    const objs = M.visible().filter(a => a.type === "OBJECTION");
    if (!objs.length) { put(el.objections, h("p", { class: "muted" }, "None yet.")); return; }
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
    const list = M.hits ? M.visible().filter(a => M.hits.has(a.artifact_id)) : M.visible();
    const n = list.length;
    const shown = list.slice(Math.max(0, n - M.timelineShown));
    put(el.timeline, 
      n > shown.length ? h("button", { id: "earlier", onclick: () => { M.timelineShown += TIMELINE_PAGE; renderTimeline(); } }, "Show " + Math.min(TIMELINE_PAGE, n - shown.length) + " earlier (of " + n + ")") : null,
      h("ol", { class: "timeline" }, shown.map(a => h("li", { "data-id": a.artifact_id, "data-ordinal": a.ordinal, class: (a.fresh ? "fresh " : "") + (M.selected === a.artifact_id ? "sel" : ""), onclick: () => select(a.artifact_id) },
        h("span", { class: "mono" }, label(a)),
        h("span", {}, a.participant),
        h("span", { class: "ty ty-" + a.type }, a.type + (a.type === "OBJECTION" ? (a.body && a.body.payload.blocking ? " ■" : "") : "")),
        h("span", {}, h("span", { class: "text" }, rec(clip(text(a), 240))), metaLine(a),
          h("div", { class: "rels" }, ((a.body && a.body.references) || []).map(r => [(r.relation || "refers to") + " ", refLabel(r.artifact_id), "  "]))))) ));
  }
  function renderRejections() {
    const rejs = M.at == null ? M.rejections : M.rejections.filter(r => (r.ordinal || 0) <= M.at);
    if (!rejs.length) { put(el.rejections, h("p", { class: "muted" }, "None.")); return; }
    const shown = rejs.slice(-M.lists.rej);
    const st = cur();
    put(el.rejections, 
      h("p", { class: "muted" }, (st.rejections || rejs.length) + " message(s) refused" + (st.rejections > rejs.length ? " (the most recent are kept in detail)" : "") + "."),
      rejs.length > shown.length ? more("rej", rejs.length - shown.length, renderRejections) : null,
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
      const r = b.resolution || {};
      const chosen = r.resolution === "option" && r.option_idx != null ? r.option_idx : -1;
      const answer = b.resolved_in && M.arts.get(b.resolved_in);
      return h("li", { class: "card binding", "data-status": b.status },
        h("div", {}, h("span", { class: "badge " + (b.status === "open" ? "warn" : b.status === "resolved" ? "ok" : "bad") }, b.status), " ",
          refLink(b.decision), " asked by ", b.decider, b.principal ? " of " + b.principal : ""),
        q.stem ? h("div", { class: "text" }, "“", rec(q.stem), "”") : null,
        (q.options || []).length ? h("ol", { class: "options" }, q.options.map((o, i) => h("li", { class: i === chosen ? "chosen" : "", "data-option": String(i + 1) },
          rec(o.label), i === q.recommended_idx ? h("span", { class: "muted" }, " (recommended)") : null,
          i === chosen ? h("strong", { class: "ok" }, " ← chosen") : null))) : null,
        b.status === "malformed" ? h("div", { class: "bad" }, "malformed envelope: " + (b.findings || []).map(f => f.code || JSON.stringify(f)).join(", ")) : null,
        b.resolution ? h("div", { class: "resolution" }, h("strong", {}, "Resolved by " + (b.resolved_by || "?") + ": "), resolutionText(b, q),
          answer && r.resolution !== "option" ? h("blockquote", { class: "words text" }, rec(text(answer))) : null,
          b.resolved_in ? h("div", { class: "muted" }, "recorded as ", refLink(b.resolved_in)) : null) : null,
        h("div", {}, h("a", { href: "/bind/" + encodeURIComponent(id), class: "bindlink" }, b.status === "open" ? "Resolve on /bind" : "See on /bind")));
    })));
  }
  // Options are numbered from 1 for people (option_idx is from 0).
  function resolutionText(b, q) {
    const r = b.resolution || {};
    switch (r.resolution) {
      case "option": {
        const o = (q.options || [])[r.option_idx];
        return ["chose option " + (r.option_idx + 1), o && o.label ? [": ", rec(o.label)] : ""];
      }
      case "answer": return "answered in their own words:";
      case "question": return "rejected the question as put:";
      case "declined": return "declined:";
    }
    return r.resolution || "";
  }

  // ---- the timeline: the deliberation as it was at any ordinal ----
  function maxOrdinal() {
    let m = M.order.length ? M.order[M.order.length - 1].ordinal || 0 : 0;
    for (const r of M.rejections.slice(-1)) m = Math.max(m, r.ordinal || 0);
    return m;
  }
  let scrubInput = null, scrubLabel = null;
  function renderScrub() {
    const max = maxOrdinal();
    if (!scrubInput) {
      scrubInput = h("input", { type: "range", id: "scrub", min: "1", max: String(Math.max(1, max)), value: String(Math.max(1, max)), step: "1",
        "aria-label": "the deliberation at an ordinal" });
      scrubInput.addEventListener("input", () => at(+scrubInput.value));
      scrubLabel = h("span", { id: "scrub-label", class: "mono" });
      put(el.scrub, h("span", { class: "muted" }, "Timeline"), scrubInput, scrubLabel,
        h("button", { id: "scrub-prev", title: "one artifact earlier", onclick: () => step(-1) }, "◀"),
        h("button", { id: "scrub-next", title: "one artifact later", onclick: () => step(1) }, "▶"),
        h("button", { id: "scrub-now", onclick: () => at(null) }, "Now"));
    }
    scrubInput.max = String(Math.max(1, max));
    if (M.at == null) scrubInput.value = String(max);
    scrubLabel.textContent = M.at == null ? "now (#" + max + ")" : "#" + M.at + " of " + max;
    el.scrub.dataset.at = M.at == null ? "" : String(M.at);
  }
  // step: to the previous or next artifact's ordinal.
  function step(dir) {
    const cur0 = M.at == null ? maxOrdinal() : M.at;
    const ords = M.order.map(a => a.ordinal || 0);
    let t = null;
    if (dir < 0) { for (const o of ords) if (o < cur0) t = o; }
    else { for (const o of ords) if (o > cur0) { t = o; break; } }
    if (t != null) at(t); else if (dir > 0) at(null);
  }
  // at shows the deliberation at ordinal n (null: now).
  function at(n) {
    const max = maxOrdinal();
    M.at = n == null || n >= max ? null : Math.max(1, Math.round(n));
    M.graphStart = null;
    // the address keeps it (?at=N), so that the moment can be shared
    const u = new URL(location.href);
    if (M.at == null) u.searchParams.delete("at"); else u.searchParams.set("at", String(M.at));
    history.replaceState(null, "", u.pathname + u.search + u.hash);
    schedule(true);
  }
  M.at_ = at;

  // ---- search within the deliberation ----
  let findInput = null, findNote = null;
  function renderFind() {
    if (!findInput) {
      findInput = h("input", { type: "search", id: "search", placeholder: "Search this deliberation (text, participant, type, #ordinal, id)", "aria-label": "search this deliberation" });
      findNote = h("span", { class: "muted", id: "search-note" });
      let t = 0;
      findInput.addEventListener("input", () => { clearTimeout(t); t = setTimeout(() => find(findInput.value), 150); });
      findInput.addEventListener("keydown", ev => { if (ev.key === "Enter") { ev.preventDefault(); find(findInput.value); next(); } });
      put(el.find, findInput, h("button", { id: "search-next", onclick: () => next(), title: "select the next match" }, "Next"), findNote);
    }
    findNote.textContent = M.hits ? M.hits.size + " match" + (M.hits.size === 1 ? "" : "es") : "";
  }
  function find(q) {
    M.query = q.trim();
    if (!M.query) { M.hits = null; schedule(false); return; }
    const words = M.query.toLowerCase().split(/\s+/);
    M.hits = new Set();
    for (const a of M.order) {
      const m = meta(a);
      const hay = [label(a), a.type, a.participant, a.artifact_id, text(a), m.role, m.model && m.model.model].join(" ").toLowerCase();
      if (words.every(w => hay.includes(w))) M.hits.add(a.artifact_id);
    }
    schedule(false);
  }
  M.find = find;
  function next() {
    if (!M.hits || !M.hits.size) return;
    const list = M.visible().filter(a => M.hits.has(a.artifact_id));
    if (!list.length) return;
    const i = list.findIndex(a => a.artifact_id === M.selected);
    select(list[(i + 1) % list.length].artifact_id);
  }

  // ---- what the relay recorded: round, role, model, tokens, cost ----
  function ext(a, k) { return a.body && a.body.extensions ? a.body.extensions[k] : undefined; }
  function meta(a) {
    const u = ext(a, "parley.usage"), m = ext(a, "parley.model");
    return { round: ext(a, "parley.round"), role: ext(a, "parley.role"), model: m && typeof m === "object" ? m : null, usage: u && typeof u === "object" ? u : null };
  }
  M.meta = meta;
  const usd = micros => "$" + (micros / 1e6).toFixed(micros < 10000 ? 4 : 2);
  const num = n => Number(n || 0).toLocaleString("en-US");
  function metaLine(a) {
    const m = meta(a), bits = [];
    if (m.round != null) bits.push("round " + m.round);
    if (m.role) bits.push(rec(m.role));
    if (m.model) bits.push(rec(m.model.model || m.model.provider || "model"));
    if (m.usage && (m.usage.input_tokens || m.usage.output_tokens)) {
      bits.push(num((m.usage.input_tokens || 0) + (m.usage.output_tokens || 0)) + " tokens");
      if (m.usage.cost_usd_micros != null) bits.push(usd(m.usage.cost_usd_micros));
    }
    return bits.length ? h("span", { class: "meta" }, bits.flatMap((b, i) => i ? [" · ", b] : [b])) : null;
  }
  function usageView(V) {
    const by = new Map();
    let any = false;
    for (const a of V) {
      const m = meta(a);
      if (!m.usage && !m.model) continue;
      any = true;
      const k = m.model ? (m.model.model || m.model.provider || "model") : "(no model named)";
      // (a scripted or exec participant is named by its adapter, with no tokens)
      const x = by.get(k) || { calls: 0, in: 0, out: 0, cost: 0, priced: false };
      x.calls++;
      if (m.usage) { x.in += m.usage.input_tokens || 0; x.out += m.usage.output_tokens || 0; if (m.usage.cost_usd_micros != null) { x.cost += m.usage.cost_usd_micros; x.priced = true; } }
      by.set(k, x);
    }
    if (!any) return null;
    let tin = 0, tout = 0, tcost = 0;
    for (const x of by.values()) { tin += x.in; tout += x.out; tcost += x.cost; }
    return h("div", { class: "facts", id: "usage" }, "Models: ",
      [...by.entries()].map(([k, x]) => h("span", { class: "pill" }, rec(k), " · " + x.calls + " artifact" + (x.calls === 1 ? "" : "s") +
        (x.in + x.out ? " · " + num(x.in) + " in / " + num(x.out) + " out tokens" : "") + (x.priced ? " · " + usd(x.cost) : ""))),
      tin + tout ? h("span", {}, "total " + num(tin + tout) + " tokens" + (tcost ? ", " + usd(tcost) : "")) : null);
  }

  // ---- the recording and its audit ----
  async function runAudit() {
    M.audit = { running: true };
    renderHead();
    try { M.audit = await getJSON("/api/v1/explorer/deliberations/" + encodeURIComponent(id) + "/audit"); }
    catch (err) { M.audit = { error: err.message }; }
    renderHead();
  }
  function auditView(r) {
    if (r.running) return h("span", { class: "muted", id: "audit" }, "auditing…");
    if (r.error) return h("span", { class: "bad", id: "audit", "data-ok": "error" }, "audit unavailable: " + r.error);
    return h("span", { id: "audit", "data-ok": String(r.ok), class: r.ok ? "ok" : "bad", title: (r.findings || []).map(f => f.code + ": " + f.message).join("\n") },
      r.ok ? "✓ audit OK" : "✗ audit: " + (r.findings || []).map(f => f.code).join(", "),
      " (" + r.messages + " messages" + (r.state_digest ? ", state " + short(r.state_digest) : "") + ")");
  }

  // ---- forks: the parent, the forks, the comparison ----
  async function fetchLineage() {
    try { M.lineage = await getJSON("/api/v1/explorer/deliberations/" + encodeURIComponent(id) + "/lineage"); }
    catch (err) { M.lineage = { error: err.message }; }
    schedule(false);
  }
  const delibLink = (d, txt) => h("a", { href: "/deliberations/" + encodeURIComponent(d.id), "data-id": d.id }, txt || (d.title ? rec(d.title) : d.id));
  function lineageView() {
    const l = M.lineage;
    if (!l || l.error || (!l.parent && !(l.forks || []).length)) return null;
    return h("div", { class: "facts", id: "lineage" },
      l.parent ? h("span", { id: "parent" }, "Forked from ", delibLink(l.parent), " after its #" + l.parent.fork_after + " (the first " + l.parent.shared + " artifacts are its) ",
        h("button", { id: "compare-open", onclick: openCompare }, "Compare with it")) : null,
      (l.forks || []).length ? h("span", { id: "forks" }, "Forks: ", l.forks.map(f => h("span", { class: "pill" }, delibLink(f), " after #" + f.fork_after))) : null);
  }
  async function openCompare() {
    el.compare.hidden = false;
    put(el.compare, h("h2", {}, "This fork beside its parent"), h("p", { class: "muted" }, "Reading both…"));
    let c;
    try { c = await getJSON("/api/v1/explorer/deliberations/" + encodeURIComponent(id) + "/compare"); }
    catch (err) { put(el.compare, h("h2", {}, "This fork beside its parent"), h("p", { class: "bad" }, "The comparison could not be read: " + err.message)); return; }
    const col = (side, d, list, more) => h("div", { class: "side", id: "compare-" + side },
      h("h3", {}, side === "parent" ? "Parent: " : "This fork: ", delibLink(d), " ", h("span", { class: "badge st-" + d.status }, d.status)),
      h("p", { class: "muted" }, "after #" + d.fork_after + ": " + list.length + (more ? " of " + (list.length + more) : "") + " artifacts"),
      h("ol", { class: "timeline" }, list.map(x => {
        let b = null; try { b = JSON.parse(x.canonical || "null"); } catch { b = null; }
        const a = { ...x, type: x.artifact_type, body: b };
        return h("li", { "data-id": x.artifact_id, "data-differs": String(!x.in_other), class: x.in_other ? "same" : "differs" },
          h("span", { class: "mono" }, "#" + x.ordinal), h("span", {}, x.participant), h("span", { class: "ty ty-" + a.type }, a.type),
          h("span", {}, h("span", { class: "text" }, rec(clip(text(a), 240))), h("div", { class: "rels" }, x.in_other ? "in both" : "only here")));
      })));
    put(el.compare, h("h2", {}, "This fork beside its parent"),
      h("p", { class: "muted" }, "Both from the fork point on: the first " + c.shared + " artifacts of this fork are its parent's, up to the parent's #" + c.parent.fork_after +
        ". An artifact marked “only here” is not in the other deliberation."),
      h("div", { class: "compare" }, col("parent", c.parent, c.parent_after, c.parent_more), col("fork", c.fork, c.fork_after, c.fork_more)));
    el.compare.scrollIntoView();
  }
  M.openCompare = openCompare;

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
    const m = meta(a);
    if (m.round != null || m.role || m.model || m.usage) {
      const mod = m.model || {}, u = m.usage || {};
      kids.push(h("h3", {}, "Recorded by the relay"), h("dl", { class: "kv", id: "insp-meta" },
        m.round != null ? [h("dt", {}, "round"), h("dd", {}, String(m.round))] : null,
        m.role ? [h("dt", {}, "role"), h("dd", {}, rec(m.role))] : null,
        m.model ? [h("dt", {}, "model"), h("dd", {}, rec([mod.provider, mod.model].filter(Boolean).join(" · ")),
          mod.response_model && mod.response_model !== mod.model ? h("div", { class: "muted" }, "answered as " + mod.response_model) : null,
          mod.finish_reason ? h("div", { class: "muted" }, "finish: " + mod.finish_reason) : null,
          mod.latency_ms != null ? h("div", { class: "muted" }, "latency " + num(mod.latency_ms) + " ms") : null)] : null,
        m.usage ? [h("dt", {}, "tokens"), h("dd", {}, num(u.input_tokens) + " in, " + num(u.output_tokens) + " out")] : null,
        m.usage && u.cost_usd_micros != null ? [h("dt", {}, "cost"), h("dd", {}, usd(u.cost_usd_micros))] : null));
    }
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
      M.ready = true; M.readyAt = Math.round(performance.now()); setLive("on", "live"); refreshSide();
      if (!M.atRead) { // the address's ?at=N, once
        M.atRead = true;
        const n = parseInt(new URLSearchParams(location.search).get("at"), 10);
        if (n > 0) at(n);
      }
      schedule(true);
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
  fetchLineage();
  addEventListener("pagehide", () => es && es.close());
}

// ---------- the DAG: laid out (dagre, or layers for a large window), drawn as SVG ----------
// Pan (drag), zoom (wheel, +, −), Fit (all of it, whatever its size), an
// overview of the whole layout with the part in view, and "Follow newest"
// (while on, the newest artifact is kept in view as artifacts arrive;
// panning or zooming by hand turns it off). Zoomed out past reading, the
// nodes are drawn as blocks of their type's colour; zooming in brings the
// text back.
const READABLE = 0.6;   // the zoom at which a node's text reads
const TEXT_MIN = 0.42;  // below it, nodes are drawn without text
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
  const svg = el.svg, mini = el.mini;
  const defs = s("defs");
  for (const r of RELATIONS) {
    const m = s("marker", { id: "arrow-" + r, viewBox: "0 0 10 10", refX: "9", refY: "5", markerUnits: "userSpaceOnUse", markerWidth: "11", markerHeight: "11", orient: "auto-start-reverse" });
    m.append(s("path", { d: "M0 0 L10 5 L0 10 z", class: "m-" + r }));
    defs.append(m);
  }
  const vp = s("g", { id: "viewport" });
  svg.append(defs, vp);
  let view = { x: 0, y: 0, k: 1 }, laid = null, fitted = false;
  const W = 250, CH = 37; // node width; characters a line
  const bar = el.graphbar;
  const note = h("span", { class: "note", id: "graph-note" });
  const earlier = h("button", { id: "graph-earlier", hidden: true, onclick: () => shift(-1) }, "◀ earlier");
  const later = h("button", { id: "graph-later", hidden: true, onclick: () => shift(1) }, "later ▶");
  const followBtn = h("button", { id: "follow", class: "toggle", "aria-pressed": "true", title: "keep the newest artifact in view as artifacts arrive (panning or zooming turns it off)",
    onclick: () => setFollow(!M.follow) }, "Follow newest");
  M.follow = true;
  const zoom = f => { byHand(); const r = svg.getBoundingClientRect(); zoomAt(r.width / 2, r.height / 2, f); };
  bar.append(h("button", { id: "fit", onclick: () => { byHand(); fit(); }, title: "fit the whole graph in the pane" }, "Fit"), h("button", { onclick: () => zoom(1.25), title: "zoom in" }, "+"),
    h("button", { onclick: () => zoom(0.8), title: "zoom out" }, "−"), followBtn, earlier, later, note);
  function setFollow(on) {
    M.follow = on;
    followBtn.setAttribute("aria-pressed", String(on));
    if (on) {
      if (M.graphStart != null) { M.graphStart = null; render(); }
      showNewest();
    }
  }
  M.setFollow = setFollow;
  function byHand() { if (M.follow) setFollow(false); }
  function shift(dir) {
    byHand();
    const n = M.visible().length;
    const start = M.graphStart == null ? Math.max(0, n - GRAPH_MAX) : M.graphStart;
    M.graphStart = Math.min(Math.max(0, start + dir * GRAPH_MAX / 2), Math.max(0, n - GRAPH_MAX));
    if (M.graphStart >= n - GRAPH_MAX) M.graphStart = null; // the newest again
    fitted = false; render();
  }
  function fitK(r) { return laid ? Math.min(r.width / (laid.w + 20), r.height / (laid.h + 20), 1.2) : 1; }
  function zoomAt(cx, cy, f) {
    const r = svg.getBoundingClientRect();
    const k = Math.min(3, Math.max(Math.min(0.2, fitK(r) * 0.8), view.k * f));
    view.x = cx - (cx - view.x) * (k / view.k); view.y = cy - (cy - view.y) * (k / view.k); view.k = k; apply();
  }
  svg.addEventListener("wheel", ev => { ev.preventDefault(); byHand(); const r = svg.getBoundingClientRect(); zoomAt(ev.clientX - r.left, ev.clientY - r.top, ev.deltaY < 0 ? 1.15 : 1 / 1.15); }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", ev => { if (ev.target.closest(".node")) return; drag = { x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y }; svg.setPointerCapture(ev.pointerId); svg.classList.add("dragging"); });
  svg.addEventListener("pointermove", ev => {
    if (!drag) return;
    if (Math.abs(ev.clientX - drag.x) + Math.abs(ev.clientY - drag.y) > 3) byHand();
    view.x = drag.vx + ev.clientX - drag.x; view.y = drag.vy + ev.clientY - drag.y; apply();
  });
  const end = () => { drag = null; svg.classList.remove("dragging"); };
  svg.addEventListener("pointerup", end); svg.addEventListener("pointercancel", end);

  // the overview: every node of the layout, and the part in view
  let miniBase = null, miniMap = null, miniQueued = false;
  function miniPoint(ev) {
    const r = mini.getBoundingClientRect();
    return { x: (ev.clientX - r.left - miniMap.ox) / miniMap.sc, y: (ev.clientY - r.top - miniMap.oy) / miniMap.sc };
  }
  let miniDrag = false;
  const centerOn = ev => {
    if (!miniMap) return;
    byHand();
    const p = miniPoint(ev), r = svg.getBoundingClientRect();
    view.x = r.width / 2 - p.x * view.k; view.y = r.height / 2 - p.y * view.k; apply();
  };
  mini.addEventListener("pointerdown", ev => { miniDrag = true; try { mini.setPointerCapture(ev.pointerId); } catch { /* no such pointer */ } centerOn(ev); });
  mini.addEventListener("pointermove", ev => { if (miniDrag) centerOn(ev); });
  mini.addEventListener("pointerup", () => { miniDrag = false; });
  mini.addEventListener("pointercancel", () => { miniDrag = false; });
  function drawMini() {
    // none while the whole graph reads in the pane
    if (!laid || fitK(svg.getBoundingClientRect()) >= READABLE) { mini.hidden = true; miniBase = null; miniMap = null; return; }
    mini.hidden = false;
    const cw = mini.clientWidth || 220, ch = mini.clientHeight || 150, dpr = window.devicePixelRatio || 1;
    mini.width = Math.round(cw * dpr); mini.height = Math.round(ch * dpr);
    const sc = Math.min((cw - 8) / laid.w, (ch - 8) / laid.h);
    miniMap = { sc, ox: (cw - laid.w * sc) / 2, oy: (ch - laid.h * sc) / 2, cw, ch };
    mini.dataset.map = [sc, miniMap.ox, miniMap.oy].join(" "); // graph to overview: scale, then offset
    miniBase = document.createElement("canvas");
    miniBase.width = mini.width; miniBase.height = mini.height;
    const c = miniBase.getContext("2d");
    c.scale(dpr, dpr);
    const css = getComputedStyle(document.documentElement), col = {};
    for (const t of ["claim", "evidence", "objection", "revision", "decision", "failure", "termination", "muted"]) col[t] = css.getPropertyValue("--" + t).trim() || "#888";
    for (const nd of laid.nodes) {
      c.fillStyle = col[nd.a.type.toLowerCase()] || col.muted;
      c.fillRect(miniMap.ox + (nd.x - nd.width / 2) * sc, miniMap.oy + (nd.y - nd.height / 2) * sc, Math.max(1.5, nd.width * sc), Math.max(1.5, nd.height * sc));
    }
    miniView();
  }
  function miniView() {
    miniQueued = false;
    if (!miniBase || !miniMap) return;
    const c = mini.getContext("2d"), dpr = window.devicePixelRatio || 1;
    c.setTransform(1, 0, 0, 1, 0, 0);
    c.clearRect(0, 0, mini.width, mini.height);
    c.drawImage(miniBase, 0, 0);
    c.scale(dpr, dpr);
    const r = svg.getBoundingClientRect(), m = miniMap;
    const x = m.ox + (-view.x / view.k) * m.sc, y = m.oy + (-view.y / view.k) * m.sc;
    c.strokeStyle = getComputedStyle(document.documentElement).getPropertyValue("--accent").trim() || "#1f5fbf";
    c.lineWidth = 1.5;
    c.strokeRect(Math.max(0.75, x), Math.max(0.75, y), Math.min(m.cw - 1.5, r.width / view.k * m.sc), Math.min(m.ch - 1.5, r.height / view.k * m.sc));
    mini.dataset.view = [x, y, r.width / view.k * m.sc, r.height / view.k * m.sc].map(v => v.toFixed(1)).join(" ");
  }
  function apply() {
    vp.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
    svg.classList.toggle("far", view.k < TEXT_MIN);
    svg.dataset.zoom = view.k.toFixed(3);
    if (!miniQueued) { miniQueued = true; requestAnimationFrame(miniView); }
  }

  function fit() {
    if (!laid) return;
    const r = svg.getBoundingClientRect();
    const k = fitK(r);
    view = { k, x: (r.width - laid.w * k) / 2, y: (r.height - laid.h * k) / 2 };
    apply();
  }
  M.fit = fit;
  // showNewest: the whole graph when it reads at that size; otherwise a
  // readable zoom with the newest artifact low in the middle, and as much
  // of the graph around it as fills the pane.
  function showNewest(whole) {
    if (!laid || !laid.nodes.length) return;
    const r = svg.getBoundingClientRect();
    if (fitK(r) >= (whole || READABLE)) { fit(); return; }
    const nd = laid.byId.get(laid.newest);
    view.k = READABLE;
    view.x = r.width / 2 - nd.x * view.k; view.y = r.height * 0.72 - nd.y * view.k;
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
  // layers: the layout of a large window, linear in its size. An
  // artifact's layer is one below the deepest it references (artifacts
  // reference only older ones: stream order is a topological order);
  // within a layer, stream order; references are straight arrows. So that
  // the whole reads at a fit, a layer wider than the pane's proportion
  // wraps onto more lines, and a stack of layers taller than it folds into
  // columns, side by side, each the next layers.
  function layers(nodes, refsIn) {
    const rank = new Map(), byRank = [];
    for (const nd of nodes) {
      let r = 0;
      for (const t of refsIn(nd.a)) r = Math.max(r, rank.get(t) + 1);
      rank.set(nd.a.artifact_id, r);
      (byRank[r] = byRank[r] || []).push(nd);
    }
    const gap = 28, sep = 46, m = 16, colGap = 90;
    const pane = svg.getBoundingClientRect(), aspect = Math.max(0.3, (pane.width || 900) / (pane.height || 600));
    const avgH = nodes.reduce((x, nd) => x + nd.height, 0) / nodes.length;
    const perLine = Math.max(4, Math.ceil(Math.sqrt(nodes.length * aspect * (avgH + sep) / (W + gap))));
    const lines = [];
    for (const row of byRank) if (row) for (let i = 0; i < row.length; i += perLine) lines.push(row.slice(i, i + perLine));
    const lineH = lines.map(l => Math.max(...l.map(nd => nd.height)));
    let wmax = 0, total = 0;
    for (let i = 0; i < lines.length; i++) { wmax = Math.max(wmax, lines[i].length * (W + gap) - gap); total += lineH[i] + sep; }
    const cols = Math.max(1, Math.min(lines.length, Math.round(Math.sqrt(total * aspect / (wmax + colGap)))));
    const per = total / cols;
    let x0 = m, y = m, colH = 0, bottom = m, col = 0;
    for (let i = 0; i < lines.length; i++) {
      if (colH >= per && col < cols - 1) { col++; x0 += wmax + colGap; y = m; colH = 0; }
      const l = lines[i];
      let x = x0 + (wmax - (l.length * (W + gap) - gap)) / 2;
      for (const nd of l) { nd.x = x + W / 2; nd.y = y + lineH[i] / 2; x += W + gap; }
      y += lineH[i] + sep; colH += lineH[i] + sep; bottom = Math.max(bottom, y);
    }
    return { w: x0 + wmax + m, h: bottom - sep + m };
  }
  function render() {
    const all = M.visible();
    const n = all.length;
    const start = M.graphStart == null ? Math.max(0, n - GRAPH_MAX) : M.graphStart;
    const win = all.slice(start, start + GRAPH_MAX);
    const inWin = new Set(win.map(a => a.artifact_id));
    earlier.hidden = start === 0; later.hidden = start + win.length >= n;
    if (!win.length) {
      laid = null; svg.dataset.nodes = "0"; svg.dataset.at = M.at == null ? "" : String(M.at);
      const t = s("text", { x: 20, y: 40, class: "empty" }); t.textContent = M.at != null ? "No artifact yet at #" + M.at + "." : "No artifact yet.";
      vp.replaceChildren(t); note.textContent = ""; drawMini(); return;
    }
    const lines = win.length > 150 ? 2 : 3;
    const nodes = win.map(a => {
      const tl = wrap(vis(M.text(a)), lines);
      return { a, tl, width: W, height: 24 + 15 * tl.length + (a.type === "OBJECTION" || a.type === "DECISION" ? 15 : 0) + 6 };
    });
    const refsIn = a => ((a.body && a.body.references) || []).map(r => r.artifact_id).filter(t => inWin.has(t));
    let outside = 0;
    for (const a of win) for (const r of (a.body && a.body.references) || []) if (!inWin.has(r.artifact_id)) outside++;
    const t0 = performance.now();
    let edgesOut = [], size, how;
    if (win.length <= DAGRE_MAX) {
      how = "dagre";
      const g = new dagre.graphlib.Graph({ multigraph: true });
      g.setGraph({ rankdir: "TB", nodesep: 28, ranksep: 46, edgesep: 12, marginx: 16, marginy: 16 });
      g.setDefaultEdgeLabel(() => ({}));
      for (const nd of nodes) g.setNode(nd.a.artifact_id, nd);
      let k = 0;
      for (const a of win) for (const r of (a.body && a.body.references) || []) {
        if (!inWin.has(r.artifact_id)) continue;
        // ranked from the older to the newer; the arrow points at the target
        g.setEdge(r.artifact_id, a.artifact_id, { rel: r.relation || "none", from: a.artifact_id, to: r.artifact_id }, "e" + (k++));
      }
      dagre.layout(g);
      const gi = g.graph();
      size = { w: gi.width || 100, h: gi.height || 100 };
      for (const e of g.edges()) { const ed = g.edge(e); edgesOut.push({ pts: ed.points.slice().reverse(), rel: ed.rel, from: ed.from, to: ed.to }); }
    } else {
      how = "layers";
      size = layers(nodes, refsIn);
      const byId = new Map(nodes.map(nd => [nd.a.artifact_id, nd]));
      for (const nd of nodes) for (const r of (nd.a.body && nd.a.body.references) || []) {
        const t = byId.get(r.artifact_id);
        if (!t) continue;
        edgesOut.push({ pts: [{ x: nd.x, y: nd.y - nd.height / 2 }, { x: t.x, y: t.y + t.height / 2 }], rel: r.relation || "none", from: nd.a.artifact_id, to: r.artifact_id });
      }
    }
    M.layoutMs = Math.round(performance.now() - t0);
    laid = { w: size.w, h: size.h, nodes, byId: new Map(nodes.map(nd => [nd.a.artifact_id, nd])), newest: win[win.length - 1].artifact_id };
    const edges = s("g", { class: "edges" }), nodesG = s("g", { class: "nodes" });
    for (const ed of edgesOut) {
      const pts = ed.pts; // from the referencing artifact to its target
      let d = "M" + pts[0].x + " " + pts[0].y;
      for (let i = 1; i < pts.length; i++) d += " L" + pts[i].x + " " + pts[i].y;
      const path = s("path", { d, class: "edge e-" + ed.rel, "marker-end": "url(#arrow-" + ed.rel + ")", "data-from": ed.from, "data-to": ed.to });
      const t = s("title"); t.textContent = ed.rel; path.append(t);
      edges.append(path);
    }
    for (const nd of nodes) {
      const a = nd.a;
      const grp = s("g", { class: "node t-" + a.type, "data-id": a.artifact_id, "data-ordinal": a.ordinal, transform: `translate(${nd.x - nd.width / 2},${nd.y - nd.height / 2})` });
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
    note.textContent = (n > win.length ? `showing ${M.label(win[0])}–${M.label(win[win.length - 1])}, ${win.length} of ${n} artifacts` : `${n} artifacts`) +
      (outside ? ` · ${outside} references lead outside this window` : "") + ` · ${how} ${M.layoutMs} ms`;
    svg.dataset.nodes = String(win.length);
    svg.dataset.layout = how;
    svg.dataset.at = M.at == null ? "" : String(M.at); // the ordinal drawn ("": now)
    restyle();
    drawMini();
    if (!fitted) {
      fitted = true;
      // opened: as following shows it; ended, whole if its text still reads
      showNewest(M.isEnded() ? TEXT_MIN : READABLE);
    } else if (M.follow) showNewest();
    else apply();
  }
  function restyle() {
    for (const grp of vp.querySelectorAll(".node")) {
      const a = M.arts.get(grp.dataset.id);
      grp.classList.toggle("sel", M.selected === a.artifact_id);
      grp.classList.toggle("hit", !!M.hits && M.hits.has(a.artifact_id));
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
  // reveal brings an artifact into view (the reader chose it: following
  // stops).
  function reveal(aid) {
    const grp = vp.querySelector('.node[data-id="' + aid + '"]');
    if (!grp) {
      const all = M.visible();
      const i = all.findIndex(a => a.artifact_id === aid);
      if (i < 0) return;
      byHand();
      M.graphStart = Math.max(0, Math.min(i - GRAPH_MAX / 2, all.length - GRAPH_MAX)); fitted = true; render();
      return reveal(aid);
    }
    const r = svg.getBoundingClientRect(), nd = laid.byId.get(aid);
    const cx = nd.x * view.k + view.x, cy = nd.y * view.k + view.y;
    if (cx < 0 || cy < 0 || cx > r.width || cy > r.height || view.k < TEXT_MIN) {
      byHand();
      if (view.k < TEXT_MIN) view.k = READABLE;
      view.x = r.width / 2 - nd.x * view.k; view.y = r.height / 2 - nd.y * view.k; apply();
    }
  }
  return { render, restyle, reveal, showNewest };
}

// ---------- routing ----------
const m = location.pathname.match(/^\/deliberations\/([^/]+)$/);
if (m) deliberationPage(decodeURIComponent(m[1]));
else listPage();
})();
