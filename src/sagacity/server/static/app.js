// Sagacity dashboard: plain JavaScript, no build step, no third-party code.
//
// Safety rules this file keeps:
// - Journal text is untrusted: every value reaches the page through textContent (the h() helper),
//   never innerHTML, so a tool input like "<img onerror=...>" shows as text.
// - The token lives in sessionStorage (this tab only) and goes out as an Authorization header.
//   No cookie is ever set, so another site cannot make the browser send a request as the user (CSRF).
// - A decision is never one keystroke: approve and reject open a confirmation showing the exact
//   payload and its SHA-256, and only its confirm button sends the decision.
//
// Scale: every view reads one bounded page (a cursor for sagas, counts from /overview); nothing
// fetches "all sagas". Auto-refresh re-reads the current view's data and patches the page in place
// (keyed by saga id / seq), so the reader's page, filter, scroll, focus and dialog stay as they were.
"use strict";

const API = new URL("../", location.href.split("#")[0]); // the dashboard is served at <api>/ui/
const TOKEN_KEY = "sagacity.token";
const PAUSED_KEY = "sagacity.refreshPaused";
const STATUSES = [
  ["AWAITING_APPROVAL", "Awaiting approval"], ["IN_DOUBT", "In doubt"], ["ABANDONED", "Abandoned"],
  ["COMPENSATION_FAILED", "Compensation failed"], ["COMPENSATING", "Compensating"],
  ["COMPENSATED", "Compensated"], ["REJECTED", "Rejected"], ["COMPLETED", "Completed"], ["RUNNING", "Running"],
];
const PAGE = 25; // sagas a page
const CARDS = 50; // approval requests a page of the queue shows: GET /approvals?limit=
const REFRESH_MS = 5000;
let me = null;
let view = null; // the current view: { load(): re-read its data and patch the page, keys(key): bool }
let generation = 0; // bumped by each route(): a load that finishes for an older view renders nothing
let lastRouted = null;

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
const plural = (n, word) => `${n.toLocaleString("en")} ${word}${n === 1 ? "" : "s"}`;

// Keyed update: `nodes` (each with data-key and data-sig) become container's children, reusing
// the node already there when its data (sig) is unchanged, so focus, an open <details> and any
// state inside it survive; only changed, new and gone items touch the DOM.
function reconcile(container, nodes) {
  const old = new Map(Array.from(container.children, (c) => [c.dataset.key, c]));
  const wanted = nodes.map((n) => {
    const o = old.get(n.dataset.key);
    return o && o.dataset.sig === n.dataset.sig ? o : n;
  });
  const keep = new Set(wanted);
  for (const c of Array.from(container.children)) if (!keep.has(c)) c.remove();
  wanted.forEach((node, i) => {
    if (container.children[i] !== node) container.insertBefore(node, container.children[i] || null);
  });
}
const keyed = (key, data, node) => {
  node.dataset.key = key;
  node.dataset.sig = JSON.stringify(data);
  return node;
};

// Run a synchronous page update, then put the reader back: the same scroll position and, if the
// focused element was replaced, focus on its successor (same data-focus).
function keepingPlace(update) {
  const active = document.activeElement;
  const focusKey = active && active.dataset ? active.dataset.focus : undefined;
  const [x, y] = [window.scrollX, window.scrollY];
  update();
  if (focusKey !== undefined && !document.contains(active)) {
    const again = document.querySelector(`[data-focus="${CSS.escape(focusKey)}"]`);
    if (again) again.focus({ preventScroll: true });
  }
  window.scrollTo(x, y);
}

// The notice line says what the reader's last action did; it belongs to the page that action
// opened (withNotice) and is cleared by any other route: a link, the address bar, back/forward.
let keepNotice = false;
function navigate(hash, state, { withNotice = false } = {}) {
  if (location.hash === hash) history.replaceState(state || history.state, "", hash); // no duplicate entry
  else history.pushState(state || null, "", hash);
  keepNotice = withNotice;
  route();
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
// How long from one timestamp to another, to the millisecond under a minute.
function took(fromIso, toIso) {
  const ms = Date.parse(toIso) - Date.parse(fromIso);
  if (!(ms >= 0)) return "—";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  return duration(ms / 1000);
}
const when = (iso) => (iso ? iso.replace("T", " ").replace(/\.\d+Z$/, " UTC") : "—");
const since = (iso) => `${duration((Date.now() - Date.parse(iso)) / 1000)} (since ${when(iso)})`;
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
  const total = response.headers.get("X-Total-Count");
  if (Array.isArray(body) && total !== null) body.total = Number(total); // a list's full length
  if (Array.isArray(body)) body.next = response.headers.get("X-Next-Cursor"); // null on the last page
  return body;
}
const enc = encodeURIComponent;
const has = (role) => !!me && (me.roles.includes(role) || me.roles.includes("admin"));

// -- payload: pretty-printed, hashed in the browser too -----------------------------------------
function pretty(input) {
  try { return JSON.stringify(JSON.parse(input), null, 2); } catch (_) { return input; }
}
// Text with a line-break opportunity (<wbr>, no character of its own: the text and a copy of it
// stay byte for byte) after each comma, colon and brace, so compact JSON wraps between values,
// not inside "4200.00".
function breakable(text) {
  return text.split(/(?<=[,:{}\[\]])/).flatMap((part, i) => (i ? [h("wbr"), part] : [part]));
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
  return h("dd", {}, h("code", { class: "hash" }, expected), " ", copyButton(expected, "input hash"), " ", mark);
}

// -- copying ids and hashes ---------------------------------------------------------------------
// The Clipboard API where the browser offers it (a secure context: https or localhost); else the
// old way, a selected text field and execCommand("copy"), put next to the button so it also
// works inside a modal dialog (the rest of the page is inert then).
async function copyText(text, near) {
  if (window.isSecureContext && navigator.clipboard && navigator.clipboard.writeText) {
    try { await navigator.clipboard.writeText(text); return true; } catch (_) { /* try the old way */ }
  }
  const area = h("textarea", { class: "copy-buffer", readonly: true, "aria-hidden": "true", tabindex: -1 });
  area.value = text;
  (near && near.parentNode ? near.parentNode : document.body).append(area);
  area.select();
  let copied = false;
  try { copied = document.execCommand("copy"); } catch (_) { copied = false; }
  area.remove();
  if (near) near.focus({ preventScroll: true });
  return copied;
}
function copyButton(text, what) {
  const button = h("button", {
    type: "button", class: "copy", title: `Copy the ${what}`, "aria-label": `Copy the ${what}`, "data-copy": what,
  }, "Copy");
  button.addEventListener("click", async (event) => {
    event.stopPropagation(); // a copy inside a queue row does not open or close it
    const copied = await copyText(text, button);
    button.textContent = copied ? "Copied" : "Copy failed";
    button.classList.toggle("done", copied);
    setTimeout(() => { button.textContent = "Copy"; button.classList.remove("done"); }, 1500);
  });
  return button;
}

// -- auto-refresh ---------------------------------------------------------------------------------
let paused = sessionStorage.getItem(PAUSED_KEY) === "1";
let refreshing = false;

function showRefresh(text) {
  const toggle = $("refresh-toggle");
  toggle.textContent = paused ? "Auto-refresh: paused" : "Auto-refresh: on";
  toggle.setAttribute("aria-pressed", String(!paused));
  toggle.title = paused ? "Click (or press p) to refresh every 5 s again" : "Refreshes every 5 s; click (or press p) to pause";
  if (text !== undefined) $("refresh-status").textContent = text;
}
function togglePause() {
  paused = !paused;
  sessionStorage.setItem(PAUSED_KEY, paused ? "1" : "0");
  showRefresh();
}
const stamp = () => `updated ${new Date().toLocaleTimeString("en-GB")}`;

// Every REFRESH_MS: re-read the current view's data, unless paused, a confirmation is open (it
// shows what is being decided: it must not change under the reader), the tab is hidden, or the
// previous refresh has not answered yet.
async function tick() {
  if (paused || dialog || refreshing || !view || !me || document.hidden) return;
  const current = view;
  refreshing = true;
  try {
    await current.load();
    if (current === view) showRefresh(stamp());
  } catch (err) {
    if (current === view && err.status !== 401) showRefresh(`refresh failed: ${err.message}`);
  } finally {
    refreshing = false;
  }
}

// -- the confirmation dialog --------------------------------------------------------------------
let dialog = null; // the open confirmation, or null

const FOCUSABLE = "button:not([disabled]), input:not([disabled]), a[href], summary, [tabindex]:not([tabindex='-1'])";

// Approve, reject or resume one request, after showing exactly what is decided: the payload and
// its SHA-256, and for a rejection the compensations it will run, in order, with their inputs.
// Enter confirms (the confirm button, or the reason field, has focus), Esc or Cancel closes;
// focus stays inside while it is open and goes back where it was afterwards.
const DECISIONS = {
  approve: { title: "Approve", button: "Approve this payload", says: "You approve exactly this payload (the tool's input), under your name:" },
  reject: { title: "Reject", button: "Reject and compensate", says: "You reject this payload; the saga is compensated:" },
  resume: { title: "Resume", button: "Run the tool with this payload", says: "The server runs the tool once with exactly this payload, if its SHA-256 is still the approved one:" },
};
function confirmDecision(item, kind, done) {
  if (dialog) return;
  const words = DECISIONS[kind];
  const returnTo = document.activeElement;
  const returnKey = returnTo && returnTo.dataset ? returnTo.dataset.focus : undefined;
  const error = h("p", { class: "notice bad", id: "confirm-error", hidden: true });
  const reason = kind !== "reject" ? null : h("input", {
    type: "text", id: "confirm-reason", class: "reason", autocomplete: "off", maxlength: 1000,
    placeholder: "Reason (required, journaled, one line)", "aria-label": "Reason for rejecting",
    "aria-required": "true",
  });
  const undo = kind === "reject" ? undoList(item) : null;
  const confirm = h("button", { class: `btn ${kind}`, type: "submit", id: "confirm-ok" }, words.button);
  const cancel = h("button", { class: "btn", type: "button", id: "confirm-cancel", onclick: () => close() }, "Cancel");
  const body = { approve: () => ({}), reject: () => ({ reason: reason.value }), resume: () => ({ payload: item.input }) }[kind];
  const form = h("form", {
    onsubmit: async (event) => {
      event.preventDefault();
      if (reason && !reason.value.trim()) { // a rejection nobody can explain later is no evidence
        error.textContent = "A reason is required: say why, in one line.";
        error.hidden = false;
        reason.focus();
        return;
      }
      confirm.disabled = true;
      error.hidden = true;
      try {
        const path = item.decidePath ? item.decidePath(kind) : `${kind}/${enc(item.sagaId)}/${item.journalSeq}`;
        const answer = await api(path, { method: "POST", json: body() });
        close();
        await done(answer);
      } catch (err) {
        if (!dialog) return;
        if (kind === "resume" && err.status === 409 && err.body) { close(); await done(null, err.body); return; }
        error.textContent = `${err.status || ""} ${err.message}`.trim();
        error.hidden = false;
        confirm.disabled = false;
      }
    },
  },
  h("h2", { id: "confirm-title" }, `${words.title} ${item.toolName}?`),
  h("p", { class: "muted" }, `saga ${item.sagaId} · request ${item.journalSeq} · `,
    `${item.approvers.length} of ${item.approvalsRequired} approval(s) so far`),
  h("p", {}, words.says),
  h("pre", { class: "payload", id: "confirm-payload" }, pretty(item.input)),
  h("dl", { class: "grid" }, h("dt", {}, "inputHash"), hashCell(item.input, item.inputHash)),
  undo,
  reason ? h("label", { for: "confirm-reason" }, "Reason") : null, reason,
  error,
  h("div", { class: "actions" }, confirm, cancel, h("span", { class: "muted" }, "Enter confirms · Esc cancels")));
  const box = h("dialog", { class: "confirm", "aria-labelledby": "confirm-title", "data-kind": kind }, form);
  box.addEventListener("cancel", (event) => { event.preventDefault(); close(); }); // Esc
  box.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && event.repeat) event.preventDefault(); // a held Enter is not a second decision
    if (event.key !== "Tab") return;
    const stops = Array.from(box.querySelectorAll(FOCUSABLE));
    const first = stops[0], last = stops[stops.length - 1];
    if (event.shiftKey && document.activeElement === first) { event.preventDefault(); last.focus(); }
    else if (!event.shiftKey && document.activeElement === last) { event.preventDefault(); first.focus(); }
  });
  function close() {
    if (dialog !== box) return;
    dialog = null;
    box.close();
    box.remove();
    const back = document.contains(returnTo) ? returnTo
      : returnKey !== undefined && document.querySelector(`[data-focus="${CSS.escape(returnKey)}"]`);
    if (back) back.focus({ preventScroll: true });
  }
  box.closeNow = close;
  document.body.append(box);
  dialog = box;
  box.showModal();
  (reason || confirm).focus();
}

// The compensations a rejection will run, in the order it runs them, read from the server
// (GET /requests: the journal folded with the tools the server imported). A workflow gate's
// (item.decidePath) lists only the stages with an undo: its checks have nothing to undo.
function undoList(item) {
  const list = h("ol", { id: "confirm-undo", class: "undo" });
  const box = h("div", { class: "undo-box" }, h("p", { class: "muted" }, "Loading what this rejection will undo…"), list);
  api(`requests/${enc(item.sagaId)}/${item.journalSeq}`).then((detail) => {
    const steps = (detail.compensations || []).filter((s) => !item.decidePath || s.compensation || !s.toolImported);
    box.firstChild.textContent = steps.length
      ? `This rejection will run ${plural(steps.length, "compensation")}, in this order:`
      : "Nothing has run in this saga yet: the rejection has nothing to compensate.";
    list.replaceChildren(...steps.map((s) => h("li", { "data-seq": s.seq },
      h("strong", {}, s.compensation || (s.toolImported ? "no compensation declared" : "unknown: tool not imported here")),
      ` undoes ${s.toolName} (seq ${s.seq}) `, h("code", {}, s.input),
      s.toolImported ? null : h("span", { class: "doubt-label" }, " the server has not imported this tool: the rejection will be refused"))));
  }).catch((err) => { box.firstChild.textContent = `Could not read what this rejection will undo: ${err.message}`; });
  return box;
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
        // Back to the deep link that asked for a sign-in, else home.
        navigate(/^#\/(sagas|saga\/|approvals|approval\/)/.test(location.hash) ? location.hash : home());
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

// The saga's journal so far, what the agent did before asking: given (one request's page) or
// fetched when the reader opens it (a list of cards does not fetch one journal per card).
function journalSoFar(item, detail, open = !!detail) {
  const body = h("div", {}, detail ? null : h("p", { class: "muted" }, "Loading…"));
  const fill = (d) => body.replaceChildren(
    h("p", { class: "muted" }, `${d.journal.length} entries; the saga is ${d.sagaStatus.replaceAll("_", " ").toLowerCase()}`),
    journalTable(d.journal, new Set((d.inDoubt || []).map((c) => c.seq))));
  if (detail) fill(detail);
  let asked = !!detail;
  return h("details", {
    class: "journal-so-far", open,
    ontoggle: async (event) => {
      if (!event.target.open || asked) return;
      asked = true;
      try { fill(await api(`requests/${enc(item.sagaId)}/${item.journalSeq}`)); } catch (err) {
        body.replaceChildren(h("p", { class: "notice bad" }, err.message));
        asked = false;
      }
    },
  }, h("summary", { "data-focus": `journal:${cardKey(item)}` }, "Saga journal so far"), body);
}

const cardKey = (item) => `${item.journalSeq}@${item.sagaId}`;
const approvalHash = (item) => `#/approval/${enc(item.sagaId)}/${item.journalSeq}`;

// Why the policy does not let the signed-in principal decide this request (approve or reject), or null.
function outOfScope(item) {
  if (item.mayDecide !== false) return null;
  const names = item.approverScope && item.approverScope.length ? item.approverScope.join(", ") : "nobody (the policy does not parse)";
  return `not yours to decide: the policy names ${names} as its approvers`;
}

// Why the signed-in principal cannot approve this request now, or null.
function cannotApprove(item) {
  const scope = outOfScope(item);
  if (scope) return scope;
  if (me && item.approvers.includes(me.name)) return "you approved it already (four eyes needs someone else)";
  if (me && item.requesterMayNotApprove && item.requester === me.name) return "you asked for this call: its requester may not approve it";
  if (item.approvers.length >= item.approvalsRequired) return "it has every approval it needs";
  if (item.expired) return "it has expired";
  return null;
}

// A request's card: payload, hash, who asked, the clock, approvals, the decisions; beside it what
// the tool does and the saga's context, once its detail (GET /requests) is read. `journalOpen`:
// the saga's journal so far starts open (one request's own page).
function approvalCard(item, detail, after, journalOpen = !!detail) {
  const key = cardKey(item);
  const blocked = cannotApprove(item);
  const mine = me && item.approvers.includes(me.name);
  const approve = h("button", {
    class: "btn approve", type: "button", disabled: !!blocked, title: blocked || "Approve… (a)",
    "data-focus": `approve:${key}`, onclick: () => confirmDecision(item, "approve", after.approved),
  }, mine ? "You approved" : "Approve…");
  const notYours = outOfScope(item);
  const reject = h("button", {
    class: "btn reject", type: "button", disabled: !!notYours, title: notYours || "Reject… (r)",
    "data-focus": `reject:${key}`, onclick: () => confirmDecision(item, "reject", after.rejected),
  }, "Reject…");
  const resume = h("button", {
    class: "btn resume", type: "button", disabled: !item.readyToResume || !item.toolImported,
    "data-focus": `resume:${key}`,
    title: item.toolImported ? "" : "the tool's module is not imported by this server (--import)",
    onclick: () => confirmDecision(item, "resume", (r, refused) => {
      if (refused) notice(`Resume refused: saga ${refused.sagaId} is ${refused.status}: ${refused.reason}`, "bad");
      else notice(`Resumed: saga ${r.sagaId} is ${r.status}. Result: ${r.result}`, "ok");
      navigate(has("auditor") ? `#/saga/${enc(item.sagaId)}` : "#/approvals", null, { withNotice: true });
    }),
  }, "Resume…");

  // waitingSeconds grows on every read: leave it out of the signature, the clock is redrawn instead.
  const { waitingSeconds, ...stable } = item;
  return keyed(key, [stable, !!detail], h("section", {
    class: "card approval", tabindex: 0, "data-saga": item.sagaId, "data-seq": item.journalSeq, "data-focus": `card:${key}`,
  },
  h("div", { class: "request-main" },
  h("div", { class: "card-head" },
    h("h3", {}, item.toolName), pill("AWAITING_APPROVAL"),
    item.expired ? pill("EXPIRED", "bad") : null,
    h("span", { class: "spacer" }),
    h("span", {}, "saga ", has("auditor") ? h("a", { href: `#/saga/${enc(item.sagaId)}` }, item.sagaId) : item.sagaId,
      " ", copyButton(item.sagaId, "saga id"), " · ", h("a", { href: approvalHash(item), class: "permalink", title: "A link to this request" }, `request ${item.journalSeq}`))),
  h("dl", { class: "grid" },
    h("dt", {}, "Payload"), h("dd", {}, h("pre", { class: "payload" }, pretty(item.input))),
    h("dt", {}, "SHA-256"), hashCell(item.input, item.inputHash),
    h("dt", {}, "Requested by"), h("dd", { class: "requester" }, item.requester || "unknown (no principal)",
      item.requesterMayNotApprove ? " (may not approve it)" : ""),
    h("dt", {}, "Waiting"), h("dd", { class: "clock", "data-since": item.createdAt }, since(item.createdAt)),
    h("dt", {}, "Expiry"), h("dd", { class: "clock", "data-expires": item.expiresAt || "", "data-expired": String(!!item.expired) }, expiry(item)),
    item.approverScope ? h("dt", {}, "Approvers") : null,
    item.approverScope ? h("dd", { class: "approver-scope" }, item.approverScope.join(", "),
      notYours ? " — not yours to decide" : " — yours to decide") : null,
    h("dt", {}, "Approvals"), h("dd", { class: "approvals-count" },
      `${item.approvers.length} of ${item.approvalsRequired}`,
      item.approvers.length ? ` — ${item.approvers.join(", ")}` : "",
      item.approvalsRequired > 1 ? " (four eyes: distinct people)" : ""),
    item.toolImported ? null : h("dt", {}, "Warning"),
    item.toolImported ? null : h("dd", { class: "doubt-label" }, "This server has not imported the tool: resume will be refused.")),
  h("details", {}, h("summary", {}, "Exact bytes hashed"), h("pre", { class: "exact" }, breakable(item.input))),
  journalSoFar(item, detail, journalOpen),
  h("div", { class: "actions" }, approve, reject, resume)),
  requestContext(item, detail)));
}

// Beside a request: the tool's description as the server knows it (null: the server has not
// registered the tool, so nobody here can say) and the saga's context (for whom it was started,
// when, and the calls it made before asking), all from GET /requests.
function requestContext(item, detail) {
  if (!detail) return h("aside", { class: "context" }, h("p", { class: "muted" }, "Loading what the tool does and the saga's context…"));
  const described = detail.toolDescription;
  const doc = described === null || described === undefined
    ? h("p", { class: "doc unknown" }, `Unknown: this server has not registered ${item.toolName}, so it cannot say what the tool does `,
      "(start it with ", h("code", {}, "--import"), " of the tool's module).")
    : described ? h("pre", { class: "doc" }, described)
      : h("p", { class: "doc muted" }, `${item.toolName} has no docstring.`);
  const calls = detail.calls || [];
  return h("aside", { class: "context" },
    h("h4", {}, "What ", h("code", {}, item.toolName), " does"), doc,
    h("h4", {}, "The saga"),
    h("dl", { class: "grid context-facts" },
      h("dt", {}, "Started for"), h("dd", { class: "principal" }, detail.principal || "no principal journaled"),
      h("dt", {}, "Started"), h("dd", { class: "mono started" }, when(detail.startedAt)),
      h("dt", {}, "Status"), h("dd", {}, pill(detail.sagaStatus))),
    h("h4", {}, `Earlier calls (${calls.length})`),
    calls.length ? h("ol", { class: "earlier-calls" }, calls.map((c) => h("li", { "data-seq": c.seq },
      h("strong", {}, c.toolName), " ", pill(c.status), " ", h("span", { class: "muted" }, `#${c.seq} · ${when(c.startedAt)}`,
        c.finishedAt ? ` · took ${took(c.startedAt, c.finishedAt)}` : ""),
      h("code", { class: "call-input" }, breakable(c.input)))))
      : h("p", { class: "muted" }, "None: this request is the saga's first call."));
}

// Redraw the "waiting" and "expires in" texts, which move with the clock, not with the data.
function redrawClocks(root) {
  for (const el of root.querySelectorAll(".clock[data-since]")) el.textContent = since(el.dataset.since);
  for (const el of root.querySelectorAll(".clock[data-expires]")) {
    el.textContent = expiry({ expiresAt: el.dataset.expires || null, expired: el.dataset.expired === "true" });
  }
}

// What a decision leads to, from a list of cards or one request's page.
function decisionOutcomes(reload) {
  return {
    approved: async (d) => {
      notice(`Approved by ${d.approverIdentity} (${d.approvers.length} of ${d.approvalsRequired}).`, "ok");
      await reload();
    },
    rejected: async (d) => {
      notice(`Rejected by ${d.approverIdentity}: saga ${d.sagaId} is ${d.status}.`, "ok");
      navigate(has("auditor") ? `#/saga/${enc(d.sagaId)}` : "#/approvals", null, { withNotice: true });
    },
  };
}

// Keyboard over a container of approval cards: j/k or arrows select, a/r open the confirmation.
let selectedKey = null; // survives refreshes and a return to the list
function cardKeys(container, items, selector = "section.approval", act = null) {
  const cards = () => Array.from(container.querySelectorAll(selector));
  const select = (card, focus) => {
    selectedKey = card.dataset.key;
    for (const c of cards()) c.classList.toggle("selected", c === card);
    if (focus) { card.focus({ preventScroll: true }); card.scrollIntoView({ block: "nearest" }); }
  };
  container.addEventListener("focusin", (event) => {
    const card = event.target.closest(selector);
    if (card && container.contains(card)) select(card, false);
  });
  let index = 0;
  const reselect = () => {
    const all = cards();
    if (!all.length) return;
    const found = all.findIndex((c) => c.dataset.key === selectedKey);
    index = found >= 0 ? found : Math.min(index, all.length - 1);
    select(all[index], false);
  };
  const keys = (key) => {
    const all = cards();
    if (!all.length) return false;
    if (["j", "ArrowDown", "k", "ArrowUp"].includes(key)) {
      const delta = key === "j" || key === "ArrowDown" ? 1 : -1;
      const at = all.findIndex((c) => c.dataset.key === selectedKey);
      index = at < 0 ? 0 : Math.max(0, Math.min(all.length - 1, at + delta));
      select(all[index], true);
      return true;
    }
    if (key !== "a" && key !== "r") return false;
    const card = all.find((c) => c.dataset.key === selectedKey) || all[0];
    select(card, false);
    const kind = key === "a" ? "approve" : "reject";
    const blocked = kind === "approve" && cannotApprove(items.get(card.dataset.key));
    if (blocked) notice(`Cannot approve: ${blocked}.`, "bad");
    else if (act) act(items.get(card.dataset.key), kind);
    else card.querySelector(`button.${kind}`).click();
    return true;
  };
  return { reselect, keys, selected: () => cards().find((c) => c.dataset.key === selectedKey) || null };
}

function approvalView(sagaId, seq, fresh) {
  const cards = h("div", { id: "cards" });
  const missing = h("div", { class: "notice bad", id: "not-found", hidden: true });
  main(h("p", {}, h("a", { href: "#/approvals" }, "← Pending approvals")), missing, cards);
  const items = new Map();
  const nav = cardKeys(cards, items);
  const outcomes = decisionOutcomes(() => load());
  async function load() {
    let detail = null;
    try {
      detail = await api(`requests/${enc(sagaId)}/${seq}`);
    } catch (err) {
      if (err.status !== 404) throw err;
    }
    if (!fresh()) return;
    items.clear();
    if (detail) items.set(cardKey(detail), detail);
    keepingPlace(() => {
      missing.hidden = !!detail;
      missing.replaceChildren(`No pending approval request for saga “${sagaId}” at seq ${seq}: it was decided, `,
        "expired or never existed. ", has("auditor") ? h("a", { href: `#/saga/${enc(sagaId)}` }, "See the saga's journal.") : null);
      // The journal is part of the signature here: a new entry redraws it.
      reconcile(cards, detail ? [approvalCard(detail, detail, outcomes)] : []);
      redrawClocks(cards);
      nav.reselect();
    });
  }
  return { load, keys: nav.keys };
}

// The saga list: one page by cursor. history.state.back holds the cursors of the pages before
// this one (so Newer goes back one page, also after a reload); the URL holds status and cursor.
// The saga list's time filter: how far back "last updated" may be (GET /sagas?since=).
const SINCE = [["", "Any time"], ["1h", "Last hour"], ["24h", "Last 24 hours"], ["7d", "Last 7 days"]];
const SINCE_MS = { "1h": 3600e3, "24h": 86400e3, "7d": 7 * 86400e3 };

function sagasView(params, fresh) {
  const status = params.get("status") || "";
  const after = params.get("after") || "";
  const prefix = params.get("prefix") || "";
  const since = SINCE_MS[params.get("since")] ? params.get("since") : "";
  const broken = params.get("chain") === "broken"; // only sagas whose hash chain did not verify
  const back = (history.state && Array.isArray(history.state.back)) ? history.state.back : [];
  const show = (s, cursor, stack, filters = { prefix, since, broken }) => {
    const q = new URLSearchParams();
    if (s) q.set("status", s);
    if (filters.prefix) q.set("prefix", filters.prefix);
    if (filters.since) q.set("since", filters.since);
    if (filters.broken) q.set("chain", "broken");
    if (cursor) q.set("after", cursor);
    navigate(`#/sagas${q.toString() ? `?${q}` : ""}`, { back: stack });
  };
  const search = h("input", {
    type: "search", id: "saga-search", value: prefix, autocomplete: "off", maxlength: 512,
    placeholder: "Saga id starts with…", "aria-label": "Search sagas by id prefix",
  });
  const searchForm = h("form", { class: "search", role: "search", onsubmit: (ev) => {
    ev.preventDefault();
    show(status, "", [], { prefix: search.value.trim(), since, broken });
  } }, search);
  const sinceSelect = h("select", { id: "time-filter", "aria-label": "Last updated",
    onchange: (ev) => show(status, "", [], { prefix, since: ev.target.value, broken }) },
  SINCE.map(([value, label]) => h("option", { value, selected: value === since }, label)));
  let next = null;
  const counters = h("div", { class: "counters", id: "counters", role: "group", "aria-label": "Sagas by status" });
  const select = h("select", { id: "status-filter", onchange: (ev) => show(ev.target.value, "", []) },
    [["", "All"], ...STATUSES].map(([value, label]) => h("option", { value, selected: value === status }, label)));
  const rows = h("tbody", { id: "saga-rows" });
  const table = h("table", { class: "sagas" },
    h("thead", {}, h("tr", {}, ["saga", "status", "entries", "awaiting", "in doubt", "chain", "started", "updated"].map((t) => h("th", {}, t)))),
    rows);
  const empty = h("div", { class: "empty", hidden: true }, after ? "No more sagas on this page." : "No sagas match.");
  const matching = h("span", { class: "muted", id: "matching" });
  const newest = h("button", { class: "btn", type: "button", id: "page-newest", disabled: !after, onclick: () => show(status, "", []) }, "⇤ Newest");
  const newer = h("button", {
    class: "btn", type: "button", id: "page-newer", disabled: !after,
    onclick: () => show(status, back.length ? back[back.length - 1] : "", back.slice(0, -1)),
  }, "← Newer");
  const older = h("button", {
    class: "btn", type: "button", id: "page-older", disabled: true,
    onclick: () => { if (next) show(status, next, [...back, after]); },
  }, "Older →");
  const where = h("span", { class: "muted", id: "page-number" }, after && !back.length ? "a later page" : `page ${back.length + 1}`);
  main(
    h("h1", {}, "Sagas"), counters,
    h("div", { class: "filters" }, h("label", { for: "status-filter" }, "Status"), select, searchForm,
      h("label", { for: "time-filter" }, "Updated"), sinceSelect, matching),
    table, empty,
    h("div", { class: "pager" }, newest, newer, where, older));

  async function load() {
    const q = new URLSearchParams({ limit: PAGE });
    if (status) q.set("status", status);
    if (prefix) q.set("prefix", prefix);
    if (since) q.set("since", new Date(Date.now() - SINCE_MS[since]).toISOString());
    if (broken) q.set("brokenChain", "true");
    if (after) q.set("after", after);
    const [page, overview] = await Promise.all([api(`sagas?${q}`), api("overview")]);
    if (!fresh()) return;
    keepingPlace(() => {
      next = page.next;
      older.disabled = !next;
      const n = status ? overview.counts[status] || 0 : overview.total;
      const searched = Boolean(prefix || since);
      matching.textContent = broken && !searched
        ? (status ? `${status.replaceAll("_", " ").toLowerCase()} sagas whose hash chain is broken`
          : `${plural(overview.brokenChains, "saga")} whose hash chain is broken`)
        : searched ? `showing the sagas that match the search and time filters${broken ? ", with a broken chain" : ""}`
        : status ? `${plural(n, "saga")} ${status.replaceAll("_", " ").toLowerCase()}` : plural(n, "saga");
      const counter = (key, label, c, active, onclick, extra = {}) => keyed(key, [label, c, active], h("button", {
        type: "button", class: `counter ${key}${active ? " active" : ""}`, "aria-pressed": String(active),
        "data-focus": `counter:${key}`, onclick, ...extra,
      }, h("span", { class: "count" }, c.toLocaleString("en")), h("span", { class: "label" }, label)));
      reconcile(counters, [
        ...[["", "All", overview.total], ...STATUSES.map(([s, label]) => [s, label, overview.counts[s] || 0])]
          .map(([s, label, c]) => counter(s || "ALL", label, c, !broken && s === status, () => show(s, "", [], { prefix, since }),
            { "data-status": s })),
        counter("BROKEN_CHAIN", "Broken chain", overview.brokenChains || 0, broken,
          () => show("", "", [], { prefix, since, broken: true }), { id: "broken-counter", title: "Sagas whose hash chain does not verify" }),
      ]);
      table.hidden = !page.sagas.length;
      empty.hidden = !!page.sagas.length;
      reconcile(rows, page.sagas.map((s) => keyed(s.sagaId, s, h("tr", {
        class: [s.inDoubt ? "in-doubt" : "", s.chainValid ? "" : "broken-chain"].join(" ").trim(), "data-saga": s.sagaId,
      },
        h("td", { class: "saga-id", "data-label": "saga" }, h("a", { href: `#/saga/${enc(s.sagaId)}`, "data-focus": `saga:${s.sagaId}` }, s.sagaId)),
        h("td", { "data-label": "status" }, pill(s.status)),
        h("td", { "data-label": "entries" }, s.entryCount),
        h("td", { "data-label": "awaiting" }, s.awaitingApproval || ""),
        h("td", { "data-label": "in doubt" }, s.inDoubt ? h("span", { class: "doubt-label" }, s.inDoubt) : ""),
        h("td", { class: "chain", "data-label": "chain" }, s.chainValid ? h("span", { class: "muted" }, "ok")
          : pill(`BROKEN at seq ${s.chainBrokenAt + 1}`, "broken")),
        h("td", { class: "mono", "data-label": "started" }, when(s.startedAt)),
        h("td", { class: "mono", "data-label": "updated" }, when(s.updatedAt))))));
    });
  }
  return { load, keys: () => false };
}

function sagaView(sagaId, fresh) {
  const head = h("div", { id: "saga-head" });
  const spans = h("div", { id: "saga-spans", class: "timeline-box" });
  const timeline = h("ol", { class: "timeline" });
  const missing = h("div", { class: "notice bad", id: "not-found", hidden: true });
  const body = h("div", { hidden: true }, head,
    h("h2", {}, "Timeline"), h("p", { class: "muted" }, "When each call started and how long it took, who decided what, and the compensations."),
    spans, h("h2", {}, "Journal"), timeline,
    h("p", {}, h("a", { href: new URL(`audit/${enc(sagaId)}`, API).pathname, class: "export", onclick: exportClick(sagaId) }, "Export JSON Lines")));
  main(h("p", {}, h("a", { href: "#/sagas" }, "← Sagas")), missing, body);
  async function load() {
    let saga = null;
    try {
      saga = await api(`sagas/${enc(sagaId)}`);
    } catch (err) {
      if (err.status !== 404) throw err;
    }
    if (!fresh()) return;
    keepingPlace(() => {
      missing.hidden = !!saga;
      body.hidden = !saga;
      missing.textContent = saga ? "" : `No saga “${sagaId}”: nothing is journaled under that id. Check the id (they are case-sensitive).`;
      if (!saga) return;
      const doubtful = new Set(saga.inDoubt.map((c) => c.seq));
      const decisions = new Map((saga.decisions || []).map((d) => [d.seq, d]));
      reconcile(head, [keyed("head", [saga.status, saga.verification, saga.entryCount, saga.inDoubt.length, saga.pendingApprovals.map(cardKey)],
        sagaHead(saga))]);
      reconcile(spans, [keyed("spans", [saga.calls, saga.gates, saga.decisions, saga.compensations, saga.updatedAt], sagaTimeline(saga))]);
      reconcile(timeline, saga.entries.map((e) => keyed(String(e.seq), [e, doubtful.has(e.seq), decisions.get(e.seq) || null],
        timelineEntry(e, doubtful.has(e.seq), decisions.get(e.seq)))));
    });
  }
  return { load, keys: () => false };
}

function sagaHead(saga) {
  const v = saga.verification;
  // The journal numbers entries by seq, from 1; breakAtIndex (SPEC §7) counts them from 0.
  const badge = v.valid ? pill("chain verified", "valid") : pill(`chain BROKEN at seq ${v.breakAtIndex + 1}`, "broken");
  const pending = saga.pendingApprovals;
  return h("div", {},
    h("div", { class: "card-head" }, h("h1", {}, saga.sagaId), copyButton(saga.sagaId, "saga id"),
      h("span", { class: "saga-status" }, pill(saga.status)),
      h("span", { class: "verification", title: v.message }, badge)),
    h("p", { class: "muted" }, `${saga.entryCount} entries · ${v.message}`),
    h("p", { class: "muted" }, `started ${when(saga.startedAt)} for `, h("strong", { class: "principal" }, saga.principal || "no principal journaled"),
      ` · last entry ${when(saga.updatedAt)}`),
    saga.inDoubt.length ? h("div", { class: "callout" },
      h("strong", {}, `${saga.inDoubt.length} call(s) in doubt. `),
      "An INTENT has no journaled outcome: the process died mid-call. Nothing compensates it automatically; ",
      "check the outside world and settle it with ", h("code", {}, "sagacity sagas resolve"), ".") : null,
    pending.length ? h("div", { class: "callout" },
      `${pending.length} approval request(s) pending: `,
      has("approver")
        ? pending.map((p, i) => [i ? ", " : "", h("a", { href: approvalHash(p), "data-focus": `review:${cardKey(p)}` }, `review request ${p.journalSeq}`)])
        : "an approver must decide") : null);
}

function timelineEntry(e, doubtful, decision) {
  return h("li", { class: `${e.phase} ${doubtful ? "in-doubt" : ""}`, "data-seq": e.seq },
    h("div", { class: "entry-head" },
      h("span", { class: "seq" }, `#${e.seq}`), pill(e.phase), h("strong", {}, e.toolName),
      doubtful ? h("span", { class: "doubt-label" }, "IN DOUBT: no outcome journaled") : null,
      h("span", { class: "time" }, when(e.timestamp))),
    h("div", { class: "entry-body" },
      decision ? decisionRows(decision) : null,
      e.input ? [h("span", {}, "input"), h("code", {}, e.input)] : null,
      e.payload ? [h("span", {}, "payload"), h("code", {}, e.payload)] : null,
      h("span", {}, "hash"), h("span", {}, h("code", { class: "muted entry-hash", title: e.hash }, `${e.hash.slice(0, 16)}…`), " ",
        copyButton(e.hash, `entry hash of #${e.seq}`))));
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

// -- routing: every view has a URL --------------------------------------------------------------
//   #/approvals                    pending approvals     #/approval/<sagaId>/<seq>  one request
//   #/sagas?status=S&after=CURSOR  a page of sagas       #/saga/<sagaId>            one saga
//   #/workflows                    workflow runs         #/workflow/<runId>         one run (workflows.js)
//   #/switch                       the kill switch (switch.js)
async function route() {
  lastRouted = location.href;
  if (!keepNotice) notice("");
  keepNotice = false;
  const mine = ++generation;
  const fresh = () => mine === generation;
  view = null;
  if (dialog) dialog.closeNow();
  const [path, queryString] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(queryString || "");
  // Who is signed in: asked even without a token, so a server without authentication (insecure
  // mode) opens straight away instead of asking for a token it would not check.
  const hadToken = !!sessionStorage.getItem(TOKEN_KEY);
  try {
    if (!me) me = await api("me");
  } catch (err) {
    me = null;
    chrome();
    if (err.status !== 401) loginPage(err.message);
    else loginPage(hadToken ? "Your session ended; sign in again." : undefined);
    return;
  }
  if (!fresh()) return;
  chrome();
  const parts = path.split("/").filter(Boolean);
  const section = { saga: "sagas", approval: "approvals", workflow: "workflows" }[parts[0]] || parts[0];
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", a.dataset.nav === section));
  const seq = parts[0] === "approval" && parts.length >= 3 ? parts[parts.length - 1] : null;
  let next;
  if (parts[0] === "saga" && parts[1]) next = sagaView(decodeURIComponent(parts.slice(1).join("/")), fresh);
  else if (parts[0] === "sagas") next = sagasView(params, fresh);
  else if (parts[0] === "approvals") next = approvalsView(fresh);
  else if (parts[0] === "workflows" || (parts[0] === "workflow" && parts[1])) next = workflowRoute(parts, params, fresh);
  else if (parts[0] === "switch") next = switchView(fresh);
  else if (seq && /^\d+$/.test(seq)) next = approvalView(decodeURIComponent(parts.slice(1, -1).join("/")), seq, fresh);
  else { history.replaceState(null, "", home()); route(); return; }
  try {
    await next.load();
    if (!fresh()) return;
    view = next;
    showRefresh(stamp());
  } catch (err) {
    if (err.status === 401 || !fresh()) return;
    main(h("div", { class: "notice bad" }, `${err.status ? `HTTP ${err.status}: ` : ""}${err.message}`));
  }
}

function chrome() {
  const signedIn = !!me;
  $("nav").hidden = !signedIn;
  $("who").hidden = !signedIn;
  $("logout").hidden = !signedIn || me.insecure; // nothing to sign out of without authentication
  $("refresh").hidden = !signedIn;
  $("lookup").hidden = !has("auditor");
  if (!signedIn) return;
  document.querySelector('[data-nav="approvals"]').hidden = !has("approver");
  document.querySelector('[data-nav="sagas"]').hidden = !has("auditor");
  document.querySelector('[data-nav="workflows"]').hidden = !has("auditor");
  document.querySelector('[data-nav="switch"]').hidden = !has("auditor");
  $("who-name").textContent = `${me.name} (${me.roles.join(", ") || "no roles"})`;
  const banner = $("banner");
  banner.hidden = !me.insecure;
  banner.textContent = me.insecure ? "This server runs WITHOUT AUTHENTICATION: anyone who reaches it can approve." : "";
  showRefresh();
}

$("logout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  me = null;
  notice("");
  navigate("#/login");
});
$("lookup").addEventListener("submit", (event) => {
  event.preventDefault();
  const id = $("lookup-id").value.trim();
  if (!id) return;
  notice("");
  $("lookup-id").value = "";
  navigate(`#/saga/${enc(id)}`);
});
$("refresh-toggle").addEventListener("click", togglePause);
document.querySelectorAll("[data-nav]").forEach((a) => a.addEventListener("click", () => notice("")));

// Shortcuts, never while typing in a field or with a dialog open (the dialog has its own keys).
document.addEventListener("keydown", (event) => {
  if (dialog || event.ctrlKey || event.metaKey || event.altKey || !me) return;
  if (event.target.closest && event.target.closest("input, textarea, select, [contenteditable]")) return;
  if (event.key === "/" && has("auditor")) { event.preventDefault(); $("lookup-id").focus(); return; }
  if (event.key === "p") { togglePause(); return; }
  if (view && view.keys(event.key)) event.preventDefault();
});
// Hash links fire popstate and hashchange: route once per new URL.
const onUrl = () => { if (location.href !== lastRouted) route(); };
window.addEventListener("hashchange", onUrl);
window.addEventListener("popstate", () => route());
setInterval(tick, REFRESH_MS);
// After every deferred script ran: a route read between app.js and queue.js would find no view.
document.addEventListener("DOMContentLoaded", () => route());
