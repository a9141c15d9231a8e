// Sagacity dashboard: the approval queue, a compact sortable table (one line per request, each
// expandable to its card: the exact input, the decisions, the tool's description and the saga's
// context), and a chart of decisions and pending approvals over time.
// Loaded after app.js and built on its helpers (h, api, keyed, reconcile, approvalCard, cardKeys,
// confirmDecision, ...); the same safety rules hold: journal text only through textContent, a
// decision only through the confirmation that shows the exact input and its SHA-256.
"use strict";

const SORT_KEY = "sagacity.queueSort";
const CHART_MS = 60000; // the chart is re-read at most once a minute (it reads many sagas)

// The queue's columns: [id, header, server order (null: not sortable), default direction]. The
// server sorts and pages (GET /approvals?sort=&desc=), so an order covers every pending request,
// not just the page shown. "waiting" is the request's age: descending (the default) is the
// longest waiting first, the oldest requests, so the API's created order ascending.
const QUEUE_COLUMNS = [
  ["saga", "saga", "saga", "asc"],
  ["tool", "tool", "tool", "asc"],
  ["waiting", "waiting", "created", "desc"],
  ["approvals", "approvals", null, null],
  ["expires", "expires", "expires", "asc"],
];
const SORTABLE = QUEUE_COLUMNS.filter(([, , order]) => order);
const DEFAULT_SORT = { column: "waiting", dir: "desc" };
const FILTER_KEY = "sagacity.queueFilters";
const NO_FILTERS = { tool: "", prefix: "", requester: "", needsMe: false };
const openRequests = new Set(); // rows shown expanded: kept across refreshes and a return to the list

function readSort() {
  try {
    const saved = JSON.parse(sessionStorage.getItem(SORT_KEY));
    if (saved && SORTABLE.some(([id]) => id === saved.column) && ["asc", "desc"].includes(saved.dir)) return saved;
  } catch (_) { /* the default */ }
  return { ...DEFAULT_SORT };
}

function readFilters() {
  try {
    const saved = JSON.parse(sessionStorage.getItem(FILTER_KEY));
    if (saved && typeof saved === "object") {
      return { tool: String(saved.tool || ""), prefix: String(saved.prefix || ""),
        requester: String(saved.requester || ""), needsMe: saved.needsMe === true };
    }
  } catch (_) { /* none */ }
  return { ...NO_FILTERS };
}

// GET /approvals's query for a page: the order, the filters and where the page starts.
function queueQuery(sort, filters, after) {
  const [, , order] = QUEUE_COLUMNS.find(([id]) => id === sort.column);
  const reversed = sort.column === "waiting" ? sort.dir === "asc" : sort.dir === "desc";
  const query = new URLSearchParams({ limit: String(CARDS), sort: order, desc: String(reversed) });
  for (const name of ["tool", "prefix", "requester"]) if (filters[name]) query.set(name, filters[name]);
  if (filters.needsMe) query.set("needsMe", "true");
  if (after) query.set("after", after);
  return `approvals?${query}`;
}

// Compact clocks for a row: "3m 12s", "in 23h 59m", "never", "expired".
const ago = (iso) => duration((Date.now() - Date.parse(iso)) / 1000);
function expiresShort(expiresAt) {
  if (!expiresAt) return "never";
  const left = (Date.parse(expiresAt) - Date.now()) / 1000;
  return left <= 0 ? "expired" : `in ${duration(left)}`;
}
function redrawQueueClocks(root) {
  for (const el of root.querySelectorAll(".ago[data-since]")) el.textContent = ago(el.dataset.since);
  for (const el of root.querySelectorAll(".left[data-expires]")) el.textContent = expiresShort(el.dataset.expires || null);
}

// One request: its line, and when expanded its card (GET /requests read on expanding).
function queueGroup(item, state) {
  const key = cardKey(item);
  const open = openRequests.has(key);
  const known = state.details.get(key);
  const detail = open && known ? known.detail : null;
  const toggle = h("button", {
    type: "button", class: "toggle", "aria-expanded": String(open), "data-focus": `toggle:${key}`,
    "aria-label": `${open ? "Hide" : "Show"} request ${item.journalSeq} of saga ${item.sagaId}`,
    onclick: (event) => { event.stopPropagation(); state.toggle(key); },
  }, open ? "▾" : "▸");
  const row = h("tr", {
    class: "request", tabindex: 0, "data-key": key, "data-saga": item.sagaId, "data-seq": item.journalSeq,
    "data-focus": `row:${key}`, "aria-expanded": String(open),
    onclick: (event) => { if (!event.target.closest("a, button")) state.toggle(key); },
  },
  h("td", { class: "saga", "data-label": "saga" }, toggle, " ", h("span", { class: "saga-id" }, item.sagaId), " ",
    copyButton(item.sagaId, "saga id")),
  h("td", { "data-label": "tool" }, h("strong", {}, item.toolName)),
  h("td", { class: "mono", "data-label": "waiting" }, h("span", { class: "ago", "data-since": item.createdAt }, ago(item.createdAt))),
  h("td", { class: "mono approvals-count", "data-label": "approvals" }, `${item.approvers.length}/${item.approvalsRequired}`,
    item.expired ? [" ", pill("EXPIRED", "bad")] : null, item.toolImported ? null : [" ", pill("not imported", "warn")]),
  h("td", { class: "mono", "data-label": "expires" }, h("span", { class: "left", "data-expires": item.expiresAt || "" }, expiresShort(item.expiresAt))));
  const body = h("tbody", { class: `request-group${open ? " open" : ""}` }, row,
    open ? h("tr", { class: "request-detail" }, h("td", { colspan: QUEUE_COLUMNS.length },
      approvalCard(item, detail, state.outcomes, false))) : null);
  const { waitingSeconds, ...stable } = item; // the clock is redrawn, not part of the data
  return keyed(key, [stable, open, known ? known.sig : null], body);
}

function approvalsView(fresh) {
  const count = h("span", { class: "muted", id: "approvals-count" });
  const empty = h("div", { class: "empty", hidden: true });
  let sort = readSort();
  let filters = readFilters();
  let starts = [null]; // the cursor each page read so far starts after (null: the first page)
  let next = null; // the X-Next-Cursor of the page shown
  const headers = QUEUE_COLUMNS.map(([id, label, order]) => {
    if (!order) return h("th", { scope: "col", "data-col": id }, h("span", { class: "sort" }, label));
    const button = h("button", { type: "button", class: "sort", "data-sort": id, "data-focus": `sort:${id}`,
      onclick: () => sortBy(id) }, label, h("span", { class: "arrow", "aria-hidden": "true" }));
    return h("th", { scope: "col", "data-sort": id }, button);
  });
  const field = (name, label, hint) => h("label", {}, `${label} `, h("input", { type: "search", name, id: `filter-${name}`,
    autocomplete: "off", spellcheck: "false", placeholder: hint, value: filters[name] }));
  const mine = h("input", { type: "checkbox", name: "needsMe", id: "filter-needs-me", checked: filters.needsMe });
  const filterForm = h("form", { class: "filters queue-filters", id: "queue-filters", role: "search",
    "aria-label": "Filter pending requests", onsubmit: (event) => { event.preventDefault(); applyFilters(); },
    onchange: () => applyFilters() },
  field("tool", "Tool", "exact name"), field("prefix", "Saga", "id starts with"),
  field("requester", "Requester", "exact principal"),
  h("label", { title: "Requests that want your approval now: not expired, short of approvals, not approved by you, and not yours to refuse as their requester" },
    mine, " Needs me"),
  h("button", { type: "button", class: "btn small", id: "filter-clear", onclick: () => {
    for (const input of filterForm.querySelectorAll("input[type=search]")) input.value = "";
    mine.checked = false;
    applyFilters();
  } }, "Clear"));
  const prev = h("button", { type: "button", class: "btn small", id: "page-prev", onclick: () => turn(-1) }, "← Previous");
  const more = h("button", { type: "button", class: "btn small", id: "page-next", onclick: () => turn(1) }, "Next →");
  const range = h("span", { class: "muted", id: "page-range" });
  const pager = h("nav", { class: "pager", id: "queue-pager", "aria-label": "Pages of the queue" }, prev, range, more);
  const thead = keyed("head", "head", h("thead", {}, h("tr", {}, headers)));
  const table = h("table", { class: "queue", id: "queue", "aria-label": "Pending approval requests" }, thead);
  const expandAll = h("button", { type: "button", class: "btn small", id: "expand-all", onclick: () => {
    const all = Array.from(items.keys());
    const opening = all.some((k) => !openRequests.has(k));
    for (const k of all) { if (opening) openRequests.add(k); else openRequests.delete(k); }
    draw();
    if (opening) for (const k of all) readDetail(k);
  } }, "Expand all");
  const chart = activityChart();
  main(h("div", { class: "queue-head" }, h("h1", {}, "Pending approvals ", count), expandAll),
    h("p", { class: "muted keys" }, "j/k or ↓/↑ select · Enter or o open/close · a approve… · r reject… · s sort by the next column, ",
      "S reverse · n / N next / previous page · Enter confirms · Esc cancels · / open a saga"),
    chart.node, filterForm, empty, table, pager);
  const items = new Map();
  const details = new Map(); // key -> { sig, detail }: a request's GET /requests, read when expanded
  let shown = [];
  const state = { details, outcomes: decisionOutcomes(() => load()), toggle };
  const nav = cardKeys(table, items, "tr.request", (item, kind) =>
    confirmDecision(item, kind, kind === "approve" ? state.outcomes.approved : state.outcomes.rejected));

  function showSort() {
    for (const th of headers.filter((x) => x.dataset.sort)) {
      const on = th.dataset.sort === sort.column;
      th.setAttribute("aria-sort", on ? (sort.dir === "asc" ? "ascending" : "descending") : "none");
      th.querySelector(".arrow").textContent = on ? (sort.dir === "asc" ? " ▲" : " ▼") : "";
    }
  }
  function sortBy(column, dir) {
    const [, , , first] = QUEUE_COLUMNS.find(([id]) => id === column);
    sort = { column, dir: dir || (sort.column === column ? (sort.dir === "asc" ? "desc" : "asc") : first) };
    sessionStorage.setItem(SORT_KEY, JSON.stringify(sort));
    showSort();
    starts = [null]; // another order: from its first page
    load();
  }
  function applyFilters() {
    const form = new FormData(filterForm);
    const text = (name) => String(form.get(name) || "").trim();
    const chosen = { tool: text("tool"), prefix: text("prefix"), requester: text("requester"), needsMe: mine.checked };
    if (JSON.stringify(chosen) === JSON.stringify(filters)) return;
    filters = chosen;
    sessionStorage.setItem(FILTER_KEY, JSON.stringify(filters));
    starts = [null];
    load();
  }
  function turn(step) {
    if (step > 0 && next) starts.push(next);
    else if (step < 0 && starts.length > 1) starts.pop();
    else return false;
    load();
    return true;
  }
  function draw() {
    keepingPlace(() => {
      showSort();
      reconcile(table, [thead, ...shown.map((item) => queueGroup(item, state))]);
      redrawQueueClocks(table);
      redrawClocks(table);
      nav.reselect();
    });
  }
  async function readDetail(key) {
    const item = items.get(key);
    if (!item || !openRequests.has(key)) return;
    const { waitingSeconds, ...stable } = item;
    const sig = JSON.stringify(stable);
    const known = details.get(key);
    if (known && known.sig === sig) return;
    try {
      const detail = await api(`requests/${enc(item.sagaId)}/${item.journalSeq}`);
      if (!fresh()) return;
      details.set(key, { sig, detail });
    } catch (err) {
      if (err.status === 401 || !fresh()) return;
      details.set(key, { sig, detail: null });
      notice(`Could not read request ${item.journalSeq} of saga ${item.sagaId}: ${err.message}`, "bad");
    }
    draw();
  }
  function toggle(key) {
    if (openRequests.has(key)) openRequests.delete(key);
    else openRequests.add(key);
    draw();
    const row = table.querySelector(`tr.request[data-key="${CSS.escape(key)}"]`);
    if (row) row.focus({ preventScroll: true });
    readDetail(key);
  }
  function keys(key) {
    const active = document.activeElement;
    if (key === "Enter") {
      if (!active || !active.matches("tr.request")) return false; // Enter on a button clicks it
      toggle(active.dataset.key);
      return true;
    }
    if (key === "o") {
      const row = nav.selected();
      if (row) toggle(row.dataset.key);
      return !!row;
    }
    if (key === "s" || key === "S") {
      const at = SORTABLE.findIndex(([id]) => id === sort.column);
      const [column, , , first] = SORTABLE[(at + 1) % SORTABLE.length];
      if (key === "s") sortBy(column, first);
      else sortBy(sort.column, sort.dir === "asc" ? "desc" : "asc");
      return true;
    }
    if (key === "n") return turn(1);
    if (key === "N") return turn(-1);
    return nav.keys(key);
  }
  let reads = 0; // loads asked for: only the latest may draw (a refresh can overtake a new order)
  async function load() {
    const read = ++reads;
    const page = await api(queueQuery(sort, filters, starts[starts.length - 1]));
    if (!fresh() || read !== reads) return; // another order, filter or page was asked for meanwhile
    if (!page.length && starts.length > 1) { // its requests were decided: the page before
      starts.pop();
      return load();
    }
    const total = page.total ?? page.length;
    const first = (starts.length - 1) * CARDS;
    next = page.next;
    items.clear();
    for (const item of page) items.set(cardKey(item), item);
    shown = page;
    const filtered = filters.tool || filters.prefix || filters.requester || filters.needsMe;
    const matching = filtered ? " matching" : "";
    count.textContent = total > page.length || first
      ? `(${(first + 1).toLocaleString("en")}–${(first + page.length).toLocaleString("en")} of ${total.toLocaleString("en")}${matching})`
      : `(${total.toLocaleString("en")}${matching})`;
    empty.textContent = filtered ? "No pending request matches these filters." : "Nothing is waiting for a human.";
    empty.hidden = page.length > 0;
    table.hidden = !page.length;
    expandAll.hidden = !page.length;
    pager.hidden = starts.length === 1 && !(next && first + page.length < total);
    prev.disabled = starts.length === 1;
    more.disabled = !(next && first + page.length < total);
    range.textContent = `page ${starts.length} of ${Math.max(1, Math.ceil(total / CARDS))}`;
    draw();
    for (const key of openRequests) if (items.has(key)) readDetail(key);
    chart.load(fresh).catch(() => {}); // the chart says itself why it could not be drawn
  }
  return { load, keys };
}

// -- the chart: decisions and pending approvals over the last 24 hours (GET /activity) ---------
const SVG_NS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) el.setAttribute(key, String(value));
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}
const hourMinute = (iso) => (iso ? iso.slice(11, 16) : "");
const dayHourMinute = (iso) => (iso ? `${iso.slice(0, 10)} ${hourMinute(iso)}` : ""); // the axis spans two dates

function activityChart() {
  const caption = h("figcaption", { id: "activity-summary" }, "Loading decisions and pending approvals…");
  const plot = h("div", { class: "chart-plot" });
  const legend = h("p", { class: "legend muted", "aria-hidden": "true" },
    h("span", { class: "swatch approved" }), " approved ", h("span", { class: "swatch rejected" }), " rejected ",
    h("span", { class: "swatch pending" }), " pending (at the end of each hour)");
  const node = h("figure", { class: "activity", id: "activity" }, caption, plot, legend);
  let readAt = 0;
  async function load(fresh) {
    if (Date.now() - readAt < CHART_MS) return;
    readAt = Date.now();
    let body;
    try {
      body = await api("activity?hours=24");
    } catch (err) {
      if (fresh()) caption.textContent = `The chart could not be read: ${err.message}`;
      throw err;
    }
    if (!fresh()) return;
    draw(body);
  }
  function draw(body) {
    const buckets = body.buckets;
    const approved = buckets.reduce((n, b) => n + b.approved, 0);
    const rejected = buckets.reduce((n, b) => n + b.rejected, 0);
    const peak = Math.max(0, ...buckets.map((b) => b.pending));
    const now = buckets.length ? buckets[buckets.length - 1].pending : 0;
    caption.textContent = `Last 24 hours: ${plural(approved, "approval")}, ${plural(rejected, "rejection")}; `
      + `${now.toLocaleString("en")} pending now, at most ${peak.toLocaleString("en")}`
      + (body.complete ? "." : ` (counted over the ${body.sagasRead} most recently updated sagas: at least this many).`);
    const [W, H, left, top, bottom] = [480, 130, 28, 8, 20];
    const width = (W - left - 4) / Math.max(1, buckets.length);
    const most = Math.max(1, peak, ...buckets.map((b) => b.approved + b.rejected));
    const y = (v) => top + (H - top - bottom) * (1 - v / most);
    const bars = buckets.map((b, i) => {
      const x = left + i * width;
      const title = `${dayHourMinute(b.start)}–${hourMinute(buckets[i + 1] ? buckets[i + 1].start : body.until)} UTC: `
        + `${b.approved} approved, ${b.rejected} rejected, ${b.pending} pending at the end`;
      return svg("g", { class: "bucket", "data-index": i, "data-approved": b.approved, "data-rejected": b.rejected, "data-pending": b.pending },
        svg("title", {}, title),
        svg("rect", { class: "hit", x, y: top, width, height: H - top - bottom }),
        b.approved ? svg("rect", { class: "approved", x: x + 1, y: y(b.approved), width: width - 2, height: y(0) - y(b.approved) }) : null,
        b.rejected ? svg("rect", { class: "rejected", x: x + 1, y: y(b.approved + b.rejected), width: width - 2, height: y(b.approved) - y(b.approved + b.rejected) }) : null);
    });
    const line = buckets.map((b, i) => `${(left + (i + 1) * width).toFixed(1)},${y(b.pending).toFixed(1)}`).join(" ");
    plot.replaceChildren(svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": "activity-summary", class: "chart" },
      svg("line", { class: "axis", x1: left, y1: y(0), x2: W - 4, y2: y(0) }),
      svg("text", { class: "tick", x: left - 4, y: y(most) + 4, "text-anchor": "end" }, most),
      svg("text", { class: "tick", x: left - 4, y: y(0) + 4, "text-anchor": "end" }, 0),
      svg("text", { class: "tick from", x: left, y: H - 4 }, `${dayHourMinute(body.from)} UTC`),
      svg("text", { class: "tick until", x: W - 4, y: H - 4, "text-anchor": "end" }, `now, ${dayHourMinute(body.until)} UTC`),
      bars,
      buckets.length ? svg("polyline", { class: "pending", points: `${left},${y(buckets[0].pending).toFixed(1)} ${line}` }) : null));
  }
  return { node, load };
}
