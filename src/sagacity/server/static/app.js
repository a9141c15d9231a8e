// Sagacity dashboard: plain JavaScript, no build step, no third-party code.
//
// Safety rules this file keeps:
// - Journal text is untrusted: every value reaches the page through textContent (the h() helper),
//   never innerHTML, so a tool input like "<img onerror=...>" shows as text.
// - The token lives in sessionStorage (this tab only) and goes out as an Authorization header.
//   No cookie is ever set, so another site cannot make the browser send a request as the user (CSRF).
"use strict";

const API = new URL("../", location.href.split("#")[0]); // the dashboard is served at <api>/ui/
const TOKEN_KEY = "sagacity.token";
const STATUSES = [
  ["", "All"], ["AWAITING_APPROVAL", "Awaiting approval"], ["IN_DOUBT", "In doubt"],
  ["COMPENSATION_FAILED", "Compensation failed"], ["COMPENSATING", "Compensating"],
  ["COMPENSATED", "Compensated"], ["REJECTED", "Rejected"], ["COMPLETED", "Completed"], ["RUNNING", "Running"],
];
const PAGE = 25;
let me = null;

// -- DOM helpers: text only --------------------------------------------------------------------
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}
const $ = (id) => document.getElementById(id);
const pill = (text, cls) => h("span", { class: `pill ${cls || text}` }, text.replaceAll("_", " "));
const main = (...nodes) => $("main").replaceChildren(h("div", { class: "page" }, ...nodes));
const home = () => (has("approver") ? "#/approvals" : "#/sagas");
function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash; // the hashchange listener routes
}

function notice(text, kind) {
  const el = $("notice");
  el.textContent = text;
  el.className = `notice ${kind || ""}`;
  el.hidden = !text;
}

// -- time ---------------------------------------------------------------------------------------
function duration(seconds) {
  seconds = Math.max(0, Math.round(seconds));
  const d = Math.floor(seconds / 86400), hr = Math.floor((seconds % 86400) / 3600);
  const m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
  if (d) return `${d}d ${hr}h`;
  if (hr) return `${hr}h ${m}m`;
  if (m) return `${m}m ${s}s`;
  return `${s}s`;
}
const when = (iso) => (iso ? iso.replace("T", " ").replace(/\.\d+Z$/, " UTC") : "—");
function expiry(item) {
  if (!item.expiresAt) return "never expires";
  const left = (Date.parse(item.expiresAt) - Date.now()) / 1000;
  return item.expired || left <= 0 ? `expired ${when(item.expiresAt)}` : `expires in ${duration(left)} (${when(item.expiresAt)})`;
}

// -- API ----------------------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.reason || body.error)) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function api(path, options) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const init = { method: "GET", headers: { Accept: "application/json" }, ...options };
  if (token) init.headers.Authorization = `Bearer ${token}`;
  if (init.json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(init.json);
    delete init.json;
  }
  const response = await fetch(new URL(path, API), init);
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = { error: text }; }
  if (response.status === 401 && path !== "me") {
    sessionStorage.removeItem(TOKEN_KEY);
    me = null;
    navigate("#/login");
    throw new ApiError(401, body);
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}
const enc = encodeURIComponent;
const has = (role) => !!me && (me.roles.includes(role) || me.roles.includes("admin"));

// -- payload: pretty-printed, hashed in the browser too -----------------------------------------
function pretty(input) {
  try { return JSON.stringify(JSON.parse(input), null, 2); } catch (_) { return input; }
}
async function sha256(text) {
  if (!(window.crypto && crypto.subtle)) return null; // only in secure contexts (https, localhost)
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}
function hashCell(input, expected) {
  const mark = h("span", { class: "muted" }, "");
  sha256(input).then((actual) => {
    if (actual === null) return;
    mark.replaceChildren(actual === expected
      ? pill("matches the payload shown", "valid")
      : pill("DOES NOT MATCH the payload shown", "broken"));
  });
  return h("dd", {}, h("code", { class: "hash" }, expected), " ", mark);
}

// -- pages --------------------------------------------------------------------------------------
function loginPage(message) {
  const input = h("input", { type: "password", id: "token", autocomplete: "off", placeholder: "Bearer token", required: true });
  const error = h("p", { class: "notice bad", hidden: !message }, message || "");
  const form = h("form", {
    onsubmit: async (event) => {
      event.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      try {
        me = await api("me");
        navigate(home());
      } catch (err) {
        sessionStorage.removeItem(TOKEN_KEY);
        error.textContent = err.status === 401 ? "That token is not valid." : `Sign-in failed: ${err.message}`;
        error.hidden = false;
      }
    },
  },
  h("label", { for: "token" }, "Token"), input,
  h("button", { class: "btn resume", type: "submit", id: "login" }, "Sign in"),
  h("p", { class: "muted" }, "The token stays in this browser tab (sessionStorage) and is sent as an Authorization header; no cookie is set."));
  main(h("div", { class: "login card" }, h("h1", {}, "Sign in to Sagacity"), error, form));
  input.focus();
}

function journalTable(entries, doubtful) {
  return h("table", { class: "journal" },
    h("thead", {}, h("tr", {}, ["seq", "time (UTC)", "tool", "phase", "input", "payload"].map((t) => h("th", {}, t)))),
    h("tbody", {}, entries.map((e) => h("tr", { class: doubtful.has(e.seq) ? "in-doubt" : "" },
      h("td", { class: "mono" }, e.seq),
      h("td", { class: "mono" }, when(e.timestamp)),
      h("td", {}, e.toolName),
      h("td", {}, pill(e.phase), doubtful.has(e.seq) ? h("span", { class: "doubt-label" }, " in doubt") : null),
      h("td", {}, h("code", {}, e.input)),
      h("td", {}, h("code", {}, e.payload))))));
}

function approvalCard(item, detail, refresh) {
  const mine = me && item.approvers.includes(me.name);
  const full = item.approvers.length >= item.approvalsRequired;
  const status = h("span", { class: "result" });
  const act = async (button, fn) => {
    button.disabled = true;
    notice("");
    try { await fn(); } catch (err) { notice(`${err.status || ""} ${err.message}`.trim(), "bad"); button.disabled = false; }
  };
  const approve = h("button", {
    class: "btn approve", type: "button", disabled: mine || full || item.expired,
    onclick: (ev) => act(ev.target, async () => {
      const d = await api(`approve/${enc(item.sagaId)}/${item.journalSeq}`, { method: "POST", json: {} });
      notice(`Approved by ${d.approverIdentity} (${d.approvers.length} of ${d.approvalsRequired}).`, "ok");
      await refresh();
    }),
  }, mine ? "You approved" : "Approve");
  // One line: a reason is journaled as one line of the REJECTED entry (the server refuses line breaks).
  const reason = h("input", { type: "text", placeholder: "Reason for rejecting (journaled, one line)", class: "reason" });
  const rejectBox = h("div", { class: "reject-box", hidden: true }, reason,
    h("button", {
      class: "btn reject confirm-reject", type: "button",
      onclick: (ev) => act(ev.target, async () => {
        const d = await api(`reject/${enc(item.sagaId)}/${item.journalSeq}`, { method: "POST", json: { reason: reason.value } });
        notice(`Rejected by ${d.approverIdentity}: saga ${d.sagaId} is ${d.status}.`, "ok");
        navigate(has("auditor") ? `#/saga/${enc(item.sagaId)}` : "#/approvals");
      }),
    }, "Confirm reject"));
  const reject = h("button", {
    class: "btn reject", type: "button",
    onclick: () => { rejectBox.hidden = !rejectBox.hidden; if (!rejectBox.hidden) reason.focus(); },
  }, "Reject…");
  const resume = h("button", {
    class: "btn resume", type: "button", disabled: !item.readyToResume || !item.toolImported,
    title: item.toolImported ? "" : "the tool's module is not imported by this server (--import)",
    onclick: (ev) => act(ev.target, async () => {
      try {
        const r = await api(`resume/${enc(item.sagaId)}/${item.journalSeq}`, { method: "POST", json: { payload: item.input } });
        notice(`Resumed: saga ${r.sagaId} is ${r.status}. Result: ${r.result}`, "ok");
      } catch (err) {
        if (err.status !== 409) throw err;
        notice(`Resume refused: saga ${err.body.sagaId} is ${err.body.status}: ${err.body.reason}`, "bad");
      }
      navigate(has("auditor") ? `#/saga/${enc(item.sagaId)}` : "#/approvals");
    }),
  }, "Resume");

  const doubtful = new Set((detail && detail.inDoubt || []).map((c) => c.seq));
  return h("section", { class: "card approval", "data-saga": item.sagaId, "data-seq": item.journalSeq },
    h("div", { class: "card-head" },
      h("h3", {}, item.toolName), pill("AWAITING_APPROVAL"),
      item.expired ? pill("EXPIRED", "bad") : null,
      h("span", { class: "spacer" }),
      h("span", {}, "saga ", has("auditor") ? h("a", { href: `#/saga/${enc(item.sagaId)}` }, item.sagaId) : item.sagaId,
        ` · request ${item.journalSeq}`)),
    h("dl", { class: "grid" },
      h("dt", {}, "Payload"), h("dd", {}, h("pre", { class: "payload" }, pretty(item.input))),
      h("dt", {}, "SHA-256"), hashCell(item.input, item.inputHash),
      h("dt", {}, "Waiting"), h("dd", {}, `${duration(item.waitingSeconds)} (since ${when(item.createdAt)})`),
      h("dt", {}, "Expiry"), h("dd", {}, expiry(item)),
      h("dt", {}, "Approvals"), h("dd", { class: "approvals-count" },
        `${item.approvers.length} of ${item.approvalsRequired}`,
        item.approvers.length ? ` — ${item.approvers.join(", ")}` : "",
        item.approvalsRequired > 1 ? " (four eyes: distinct people)" : ""),
      item.toolImported ? null : h("dt", {}, "Warning"),
      item.toolImported ? null : h("dd", { class: "doubt-label" }, "This server has not imported the tool: resume will be refused.")),
    h("details", {}, h("summary", {}, "Exact bytes hashed"), h("pre", {}, item.input)),
    detail ? h("details", { open: true, class: "journal-so-far" },
      h("summary", {}, `Saga journal so far (${detail.journal.length} entries, saga ${detail.sagaStatus.replaceAll("_", " ").toLowerCase()})`),
      journalTable(detail.journal, doubtful)) : null,
    h("div", { class: "actions" }, approve, reject, resume, status, rejectBox));
}

async function approvalsPage() {
  const items = await api("approvals");
  const refresh = () => route();
  if (!items.length) {
    main(h("h1", {}, "Pending approvals"), h("div", { class: "empty" }, "Nothing is waiting for a human."));
    return;
  }
  const details = await Promise.all(items.map((i) =>
    api(`requests/${enc(i.sagaId)}/${i.journalSeq}`).catch(() => null)));
  main(h("h1", {}, `Pending approvals (${items.length})`),
    items.map((item, n) => approvalCard(item, details[n], refresh)));
}

async function sagasPage(params) {
  const status = params.get("status") || "";
  const offset = Math.max(0, parseInt(params.get("offset") || "0", 10) || 0);
  const query = new URLSearchParams({ limit: PAGE, offset });
  if (status) query.set("status", status);
  const page = await api(`sagas?${query}`);
  const go = (next) => {
    const q = new URLSearchParams(next);
    location.hash = `#/sagas?${q}`;
  };
  const select = h("select", { id: "status-filter", onchange: (ev) => go({ status: ev.target.value, offset: 0 }) },
    STATUSES.map(([value, label]) => h("option", { value, selected: value === status }, label)));
  const rows = page.sagas.map((s) => h("tr", { class: s.inDoubt ? "in-doubt" : "", "data-saga": s.sagaId },
    h("td", {}, h("a", { href: `#/saga/${enc(s.sagaId)}` }, s.sagaId)),
    h("td", {}, pill(s.status)),
    h("td", {}, s.entryCount),
    h("td", {}, s.awaitingApproval || ""),
    h("td", {}, s.inDoubt ? h("span", { class: "doubt-label" }, s.inDoubt) : ""),
    h("td", { class: "mono" }, when(s.startedAt)),
    h("td", { class: "mono" }, when(s.updatedAt))));
  const last = Math.min(offset + PAGE, page.total);
  main(
    h("h1", {}, "Sagas"),
    h("div", { class: "filters" }, h("label", { for: "status-filter" }, "Status"), select,
      h("span", { class: "muted" }, `${page.total} saga${page.total === 1 ? "" : "s"}`)),
    page.sagas.length
      ? h("table", { class: "sagas" },
        h("thead", {}, h("tr", {}, ["saga", "status", "entries", "awaiting", "in doubt", "started", "updated"].map((t) => h("th", {}, t)))),
        h("tbody", {}, rows))
      : h("div", { class: "empty" }, "No sagas match."),
    h("div", { class: "pager" },
      h("button", { class: "btn", type: "button", disabled: offset === 0, onclick: () => go({ status, offset: Math.max(0, offset - PAGE) }) }, "← Newer"),
      h("span", { class: "muted" }, page.total ? `${offset + 1}–${last} of ${page.total}` : ""),
      h("button", { class: "btn", type: "button", disabled: last >= page.total, onclick: () => go({ status, offset: offset + PAGE }) }, "Older →")));
}

async function sagaPage(sagaId) {
  const saga = await api(`sagas/${enc(sagaId)}`);
  const doubtful = new Set(saga.inDoubt.map((c) => c.seq));
  const decisions = new Map((saga.decisions || []).map((d) => [d.seq, d]));
  const v = saga.verification;
  const badge = v.valid ? pill("chain verified", "valid") : pill(`chain BROKEN at index ${v.breakAtIndex}`, "broken");
  const timeline = h("ol", { class: "timeline" }, saga.entries.map((e) => h("li", {
    class: `${e.phase} ${doubtful.has(e.seq) ? "in-doubt" : ""}`, "data-seq": e.seq,
  },
  h("div", { class: "entry-head" },
    h("span", { class: "seq" }, `#${e.seq}`), pill(e.phase), h("strong", {}, e.toolName),
    doubtful.has(e.seq) ? h("span", { class: "doubt-label" }, "IN DOUBT: no outcome journaled") : null,
    h("span", { class: "time" }, when(e.timestamp))),
  h("div", { class: "entry-body" },
    decisions.has(e.seq) ? decisionRows(decisions.get(e.seq)) : null,
    e.input ? [h("span", {}, "input"), h("code", {}, e.input)] : null,
    e.payload ? [h("span", {}, "payload"), h("code", {}, e.payload)] : null,
    h("span", {}, "hash"), h("code", { class: "muted", title: e.hash }, `${e.hash.slice(0, 16)}…`)))));
  main(
    h("p", {}, h("a", { href: "#/sagas" }, "← Sagas")),
    h("div", { class: "card-head" }, h("h1", {}, saga.sagaId), h("span", { class: "saga-status" }, pill(saga.status)),
      h("span", { class: "verification", title: v.message }, badge)),
    h("p", { class: "muted" }, `${saga.entryCount} entries · ${v.message}`),
    saga.inDoubt.length ? h("div", { class: "callout" },
      h("strong", {}, `${saga.inDoubt.length} call(s) in doubt. `),
      "An INTENT has no journaled outcome: the process died mid-call. Nothing compensates it automatically; ",
      "check the outside world and settle it with ", h("code", {}, "sagacity sagas resolve"), ".") : null,
    saga.pendingApprovals.length ? h("div", { class: "callout" },
      `${saga.pendingApprovals.length} approval request(s) pending: `,
      has("approver") ? h("a", { href: "#/approvals" }, "review them") : "an approver must decide") : null,
    h("h2", {}, "Journal"),
    timeline,
    h("p", {}, h("a", { href: new URL(`audit/${enc(sagaId)}`, API).pathname, class: "export", onclick: exportClick(sagaId) }, "Export JSON Lines")));
}

// Who decided, as the server reads the payload: the approver line only, never a line of the reason.
function decisionRows(d) {
  return [
    h("span", {}, "decided by"),
    h("strong", { class: "decided-by" }, d.approver === null ? "Sagacity (no approver)" : d.approver),
    ...(d.reason ? [h("span", {}, "reason"), h("span", { class: "decision-reason" }, d.reason)] : []),
  ];
}

function exportClick(sagaId) {
  return async (event) => {
    event.preventDefault(); // the download needs the Authorization header, so fetch it
    const response = await fetch(new URL(`audit/${enc(sagaId)}`, API),
      { headers: { Authorization: `Bearer ${sessionStorage.getItem(TOKEN_KEY)}` } });
    if (!response.ok) { notice(`Export failed: HTTP ${response.status}`, "bad"); return; }
    const url = URL.createObjectURL(await response.blob());
    const a = h("a", { href: url, download: `${sagaId.replace(/[^\w.-]/g, "_")}.jsonl` });
    document.body.append(a);
    a.click();
    a.remove();
    URL.revokeObjectURL(url);
  };
}

// -- routing --------------------------------------------------------------------------------------
async function route() {
  const [path, queryString] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(queryString || "");
  if (!sessionStorage.getItem(TOKEN_KEY)) { chrome(); loginPage(); return; }
  try {
    if (!me) me = await api("me");
  } catch (err) {
    chrome();
    loginPage(err.status === 401 ? "Your session ended; sign in again." : err.message);
    return;
  }
  chrome();
  const parts = path.split("/").filter(Boolean);
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", a.dataset.nav === (parts[0] === "saga" ? "sagas" : parts[0])));
  try {
    if (parts[0] === "saga" && parts[1]) await sagaPage(decodeURIComponent(parts.slice(1).join("/")));
    else if (parts[0] === "sagas") await sagasPage(params);
    else if (parts[0] === "approvals") await approvalsPage();
    else navigate(home());
  } catch (err) {
    if (err.status === 401) return;
    main(h("div", { class: "notice bad" }, `${err.status ? `HTTP ${err.status}: ` : ""}${err.message}`));
  }
}

function chrome() {
  const signedIn = !!me;
  $("nav").hidden = !signedIn;
  $("who").hidden = !signedIn;
  if (!signedIn) return;
  document.querySelector('[data-nav="approvals"]').hidden = !has("approver");
  document.querySelector('[data-nav="sagas"]').hidden = !has("auditor");
  $("who-name").textContent = `${me.name} (${me.roles.join(", ") || "no roles"})`;
  const banner = $("banner");
  banner.hidden = !me.insecure;
  banner.textContent = me.insecure ? "This server runs WITHOUT AUTHENTICATION: anyone who reaches it can approve." : "";
}

$("logout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  me = null;
  notice("");
  navigate("#/login");
});
document.querySelectorAll("[data-nav]").forEach((a) => a.addEventListener("click", () => notice("")));
window.addEventListener("hashchange", route);
route();
