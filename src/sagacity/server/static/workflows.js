// Sagacity dashboard: the Workflows tab (runs, each run's stage flow, gate decisions).
// Loaded after app.js and built on its helpers (h, api, keyed, reconcile, confirmDecision, ...);
// the same safety rules hold: journal text only through textContent, a decision only through the
// confirmation that shows the exact input and its SHA-256.
"use strict";

const workflowHash = (runId) => `#/workflow/${enc(runId)}`;
const OPEN_GATE = new Set(["AWAITING_APPROVAL", "APPROVED"]);

// #/workflows and #/workflow/<runId>: called by app.js's route().
function workflowRoute(parts, params, fresh) {
  if (parts[0] === "workflow" && parts[1]) return workflowRunView(decodeURIComponent(parts.slice(1).join("/")), fresh);
  return workflowsView(fresh);
}

function stageFlow(stages, current) {
  return h("ol", { class: "stage-flow" }, stages.map((s) => h("li", {
    class: `stage ${s.status}${s.name === current ? " current" : ""}`, "data-stage": s.name,
  }, h("span", { class: "stage-name" }, s.gated ? `${s.name} (gate)` : s.name), " ", pill(s.status))));
}

function workflowsView(fresh) {
  const rows = h("tbody", { id: "workflow-rows" });
  const table = h("table", { class: "sagas workflows" },
    h("thead", {}, h("tr", {}, ["run", "workflow", "status", "stage flow", "updated"].map((t) => h("th", {}, t)))), rows);
  const empty = h("div", { class: "empty", hidden: true },
    "No workflow runs. (The server lists the runs of the workflows it imports: sagacity serve --import MODULE.)");
  main(h("h1", {}, "Workflows"), table, empty);
  async function load() {
    const runs = await api("workflows?limit=100");
    if (!fresh()) return;
    keepingPlace(() => {
      table.hidden = !runs.length;
      empty.hidden = !!runs.length;
      reconcile(rows, runs.map((r) => keyed(r.runId, r, h("tr", { "data-run": r.runId },
        h("td", {}, h("a", { href: workflowHash(r.runId), "data-focus": `run:${r.runId}` }, r.runId)),
        h("td", {}, r.workflow),
        h("td", {}, pill(r.status)),
        h("td", {}, stageFlow(r.stages, r.currentStage)),
        h("td", { class: "mono" }, when(r.updatedAt))))));
    });
  }
  return { load, keys: () => false };
}

// The item confirmDecision shows and sends: the gate's request, decided through the workflow route.
function gateItem(run, stage) {
  const gate = stage.gate;
  return {
    sagaId: run.runId, journalSeq: gate.journalSeq, toolName: `${run.workflow} / ${stage.name}`,
    input: gate.input, inputHash: gate.inputHash, approvers: gate.approvers, approvalsRequired: gate.approvalsRequired,
    decidePath: (kind) => `workflows/${enc(run.runId)}/gates/${enc(stage.name)}/${kind}`,
  };
}

function stageCard(run, stage, reload) {
  const gate = stage.gate;
  const open = gate && OPEN_GATE.has(stage.status);
  const decide = (kind) => confirmDecision(gateItem(run, stage), kind, async (answer) => {
    notice(kind === "approve"
      ? `Approved the gate before ${stage.name}: the run is ${answer.run.status.replaceAll("_", " ").toLowerCase()}.`
      : `Rejected the gate before ${stage.name}: the run is ${answer.run.status.replaceAll("_", " ").toLowerCase()}.`, "ok");
    await reload();
  });
  return h("section", { class: `stage-card ${stage.status}`, "data-stage": stage.name },
    h("div", { class: "card-head" }, h("h2", {}, stage.name), pill(stage.status), gate ? pill("gated", "warn") : null),
    stage.status === "IN_DOUBT" ? h("p", { class: "notice warn in-doubt" },
      "In doubt: the process running this stage died before journaling an outcome, so whether it took effect is unknown. ",
      "Check, then settle it (the run's journal, or sagacity sagas resolve) and resume the run.") : null,
    stage.policy ? h("p", { class: "policy" }, h("strong", {}, "Policy: "), `${stage.policy.action} by rule ${stage.policy.rule}`,
      stage.policy.approvals ? ` (${stage.policy.approvals} approval(s))` : "",
      stage.policy.reason ? ` · ${stage.policy.reason}` : "") : null,
    stage.checks.length ? h("ul", { class: "checks" }, stage.checks.map((c) =>
      h("li", {}, `check ${c.name}: `, pill(c.status, { PASSED: "valid", FAILED: "bad" }[c.status] || ""),
        c.reason ? ` ${c.reason}` : ""))) : null,
    gate ? h("div", { class: "gate" },
      h("p", {}, h("strong", {}, "Gate: "), gate.reason || "a human approves before this stage runs",
        ` · ${gate.approvers.length} of ${gate.approvalsRequired} approval(s)`,
        gate.approvers.length ? ` (${gate.approvers.join(", ")})` : "",
        gate.rejectedBy ? ` · rejected by ${gate.rejectedBy}: ${gate.rejectionReason || ""}` : ""),
      h("p", { class: "muted" }, "The exact input this gate approves (workflow, stage, code version and input):"),
      h("pre", { class: "payload gate-input" }, pretty(gate.input)),
      h("dl", { class: "grid" }, h("dt", {}, "inputHash"), hashCell(gate.input, gate.inputHash)),
      open && has("approver") ? h("div", { class: "actions" },
        h("button", { class: "btn approve", type: "button", "data-focus": `approve:${stage.name}`, onclick: () => decide("approve") }, "Approve…"),
        h("button", { class: "btn reject", type: "button", "data-focus": `reject:${stage.name}`, onclick: () => decide("reject") }, "Reject…")) : null) : null,
    stage.output !== null && stage.output !== undefined
      ? h("details", {}, h("summary", {}, "output"), h("pre", { class: "payload" }, JSON.stringify(stage.output, null, 2))) : null,
    stage.error ? h("p", { class: "notice bad" }, stage.error) : null);
}

function workflowRunView(runId, fresh) {
  const head = h("div", { id: "run-head" });
  const flow = h("div", { id: "run-flow" });
  const cards = h("div", { id: "run-stages" });
  const missing = h("div", { class: "notice bad", id: "not-found", hidden: true });
  main(h("p", {}, h("a", { href: "#/workflows" }, "← Workflows")), missing, head, flow, cards);
  async function load() {
    let run = null;
    try {
      run = await api(`workflows/${enc(runId)}`);
    } catch (err) {
      if (err.status !== 404) throw err;
    }
    if (!fresh()) return;
    keepingPlace(() => {
      missing.hidden = !!run;
      missing.textContent = run ? "" : `No workflow run “${runId}” (or its workflow is not imported by this server).`;
      if (!run) { head.replaceChildren(); flow.replaceChildren(); cards.replaceChildren(); return; }
      reconcile(head, [keyed("head", [run.status, run.currentStage, run.chainValid], h("div", {},
        h("div", { class: "card-head" }, h("h1", {}, run.runId), pill(run.status),
          run.chainValid ? pill("chain verified", "valid") : pill("chain BROKEN", "broken")),
        h("p", { class: "muted" }, `workflow ${run.workflow} · `,
          run.currentStage ? `stands at ${run.currentStage} · ` : "", "started ", when(run.startedAt),
          has("auditor") ? [" · ", h("a", { href: `#/saga/${enc(run.runId)}` }, "the run's journal")] : null)))]);
      reconcile(flow, [keyed("flow", run.stages.map((s) => [s.name, s.status]), stageFlow(run.stages, run.currentStage))]);
      reconcile(cards, run.stages.map((s) => keyed(s.name, s, stageCard(run, s, load))));
    });
  }
  return { load, keys: () => false };
}
