// Sagacity dashboard: a saga's timeline, drawn from GET /sagas/{id} (the library's saga view:
// calls with their start and outcome times, gates, decisions with who made them, compensations).
// Loaded after app.js and built on its helpers (h, pill, when, took, svg from queue.js, ...).
"use strict";

// The saga's happenings in time order: its start, each call (from INTENT to outcome), each
// approval request (until its decision or resume), each decision and each compensation.
function timelineEvents(saga) {
  const gates = new Map(saga.gates.map((g) => [g.journalSeq, g]));
  const resumedAt = new Map(saga.calls.filter((c) => c.gateSeq !== null).map((c) => [c.gateSeq, c.startedAt]));
  const events = [{ kind: "start", seq: 1, at: saga.startedAt, what: "saga started", who: saga.principal }];
  for (const c of saga.calls) {
    events.push({
      kind: "call", seq: c.seq, at: c.startedAt, end: c.finishedAt, what: c.toolName, status: c.status,
      note: c.gateSeq !== null ? `runs request #${c.gateSeq}` : c.resolvedBy ? `settled by ${c.resolvedBy}` : "",
      error: c.error,
    });
  }
  for (const g of saga.gates) {
    const end = (g.rejection && g.rejection.decidedAt) || resumedAt.get(g.journalSeq) || null;
    events.push({
      kind: "gate", seq: g.journalSeq, at: g.requestedAt, end, waits: true, what: `approval of ${g.toolName}`,
      status: g.status, who: g.requester, note: `${g.approvers.length} of ${g.approvalsRequired} approval(s)`,
    });
  }
  for (const d of saga.decisions) {
    const gate = gates.get(d.decides);
    events.push({
      kind: "decision", seq: d.seq, at: d.decidedAt, what: gate ? `${d.phase.toLowerCase()} ${gate.toolName}` : `settled #${d.decides}`,
      status: d.phase, who: d.approver === null ? "Sagacity (no approver)" : d.approver,
      note: d.decides !== null ? `request #${d.decides}` : "", error: d.reason || null,
    });
  }
  for (const c of saga.compensations) {
    events.push({
      kind: "compensation", seq: c.seq, at: c.startedAt || c.finishedAt, end: c.finishedAt,
      what: `compensate ${c.toolName}`, status: c.outcome || "RUNNING", note: `undoes #${c.compensatesSeq}`, error: c.error,
    });
  }
  return events.filter((e) => e.at).sort((a, b) => Date.parse(a.at) - Date.parse(b.at) || a.seq - b.seq);
}

// One bar per happening, placed on the saga's span (its first to its last entry).
function spanBar(event, from, span) {
  const start = Date.parse(event.at) - from;
  const end = event.end ? Date.parse(event.end) - from : event.waits ? span : start;
  const x = span > 0 ? (100 * start) / span : 0;
  const w = Math.max(0.8, span > 0 ? (100 * (end - start)) / span : 0);
  return svg("svg", { class: "span", viewBox: "0 0 100 10", preserveAspectRatio: "none", "aria-hidden": "true" },
    svg("rect", { class: "track", x: 0, y: 4, width: 100, height: 2 }),
    svg("rect", { class: `bar ${event.kind} ${event.status || ""}`, x: Math.min(x, 99.2), y: 1, width: Math.min(w, 100 - Math.min(x, 99.2)), height: 8 }));
}

function sagaTimeline(saga) {
  const events = timelineEvents(saga);
  const from = Date.parse(saga.startedAt);
  const span = Math.max(0, Date.parse(saga.updatedAt) - from);
  const took2 = (e) => {
    if (e.kind === "start" || e.kind === "decision") return "";
    if (e.end) return e.waits ? `waited ${took(e.at, e.end)}` : took(e.at, e.end);
    return e.waits ? `waiting ${ago(e.at)}` : "no outcome yet";
  };
  return h("table", { class: "saga-timeline", id: "saga-timeline" },
    h("thead", {}, h("tr", {}, ["at", "what", "who", "took", ""].map((t) => h("th", {}, t)))),
    h("tbody", {}, events.map((e) => h("tr", { class: `tl ${e.kind}`, "data-kind": e.kind, "data-seq": e.seq },
      h("td", { class: "mono at", title: when(e.at), "data-label": "at" }, e.kind === "start" ? when(e.at) : `+${took(saga.startedAt, e.at)}`),
      h("td", { class: "what", "data-label": "what" }, h("strong", {}, e.what), e.status ? [" ", pill(e.status)] : null,
        e.note ? h("span", { class: "muted" }, ` ${e.note}`) : null,
        e.error ? h("div", { class: "tl-reason" }, e.error) : null),
      h("td", { class: "tl-who", "data-label": "who" }, e.who || ""),
      h("td", { class: "mono took", "data-label": "took" }, took2(e)),
      h("td", { class: "bar-cell" }, spanBar(e, from, span))))));
}
