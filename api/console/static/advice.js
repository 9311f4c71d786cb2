/* The limit advisor's page: each subscription's recommended dispatch limit with its
 * arithmetic and findings; each place a limit is set can be previewed (a dry run) and applied
 * in one step, audited as any change; and a recommendation can be simulated on the last hour
 * of recorded traffic, actual and simulated on one chart. */
"use strict";

function simulateSection(tenant, ns, sub, permits) {
  const box = h("div.result", { "aria-live": "polite" });
  const since = h("select", { id: "sim-since-" + (++formCounter) },
    ...[["15m", "Last 15 minutes"], ["1h", "Last hour"], ["6h", "Last 6 hours"],
      ["1d", "Last day"]].map(([v, t]) => h("option", { value: v }, t)));
  since.value = "1h";
  const run = h("button", { type: "button" }, "Simulate " + permits + " msg/s per partition");
  run.addEventListener("click", async () => {
    box.replaceChildren(h("p", null, "Replaying recorded traffic…"));
    try {
      const answer = await Api.call("POST", ADMIN + "/reports/simulate", { body: {
        tenant, namespace: ns, level: "subscription", topic: sub.topic,
        subscription: sub.subscription, dispatchThrottlingRateInMsg: permits,
        since: since.value } });
      const [one] = answer.subscriptions;
      if (!one) { box.replaceChildren(h("p.empty", null, "No recorded traffic in this range.")); return; }
      const at = (i) => new Date(i.end);
      box.replaceChildren(
        h("p", null, "Delivered " + Fmt.int(one.actual.delivered) + " (" +
          Fmt.rate(one.actual.deliveredRate) + " msg/s), throttled " +
          Fmt.duration(one.actual.throttledSeconds) + "; simulated " +
          Fmt.int(one.simulated.delivered) + " (" + Fmt.rate(one.simulated.deliveredRate) +
          " msg/s), throttled " + Fmt.duration(one.simulated.throttledSeconds) + "."),
        lineChart("Delivered rate, actual vs simulated", [
          { name: "actual", points: one.intervals.map((i) => [at(i), i.delivered / i.seconds]) },
          { name: "simulated", dashed: true,
            points: one.intervals.map((i) => [at(i), i.simulatedDelivered / i.seconds]) },
        ], { unit: "msg/s" }),
        lineChart("Backlog, actual vs simulated", [
          { name: "actual", points: one.intervals.map((i) => [at(i), i.backlog]) },
          { name: "simulated", dashed: true,
            points: one.intervals.map((i) => [at(i), i.simulatedBacklog]) },
        ], { unit: "msgs" }));
    } catch (err) {
      showError(box, err);
    }
  });
  return h("div.simulate", null, h("label", { for: since.id }, "Recorded traffic "), since, " ",
    run, box);
}

async function viewAdvice(ctx, tenant, ns) {
  ctx.main.append(...heading("Limit advice for " + tenant + "/" + ns, [["#/", "Tenants"],
    ["#/tenant/" + seg(tenant), tenant], ["#/ns/" + seg(tenant, ns), ns]]));
  const advice = await Api.get(ADMIN + "/reports/advice/" + seg(tenant, ns));
  if (!advice.subscriptions.length) {
    ctx.main.append(h("p.empty", null, "No advice yet: the advice report runs on a schedule " +
      "from the workers' stats (or start one from Report runs)."));
    return;
  }
  ctx.main.append(h("p", null, "From " + Fmt.time(advice.spanFrom) + " to " +
    Fmt.time(advice.spanTo) + " (run " + advice.runId + ")."));
  ctx.main.append(table("Recommendations (rates in msg/s; limits per partition)",
    ["Subscription", "Publish p95", "Backlog", "Target", "Capacity", "Limit now",
      "Recommended", "Arithmetic", "Findings"],
    advice.subscriptions.map((s) => [
      { th: s.topic + " — " + s.subscription }, Fmt.rate(s.publishRateP95),
      Fmt.int(s.backlogMsgs), Fmt.duration(s.recommendation.targetSeconds),
      Fmt.rate(s.capacity), Fmt.limit(s.limitPerPartition, "msg/s"),
      Fmt.int(s.recommendation.perPartition), s.recommendation.formula,
      s.findings.map((f) => f.text).join("; ") || "—"])));
  const reload = () => ctx.reload();
  for (const place of advice.limits) {
    const box = h("div.result", { "aria-live": "polite" });
    const preview = h("button.primary", { type: "button" }, "Preview and apply");
    const describe = place.level + " " + place.kind + " set to " + place.perPartition +
      " msg/s per partition";
    preview.addEventListener("click", () => confirmFlow(box, (dryRun) => Api.call("POST",
      place.path, { body: place.body, query: dryRun ? { dryRun: "true" } : null }),
      describe, reload));
    ctx.main.append(h("section.report", null,
      h("h2", null, place.level + " " + place.kind + ": " +
        Fmt.limit(place.currentPerPartition, "msg/s") + " → " + place.perPartition + " msg/s"),
      h("p", null, "Binds " + place.subscriptions.join(", ") + "."), preview, box));
  }
  for (const sub of advice.subscriptions) {
    ctx.main.append(h("section.report", null,
      h("h2", null, "Simulate: " + sub.topic + " — " + sub.subscription),
      simulateSection(tenant, ns, sub, sub.recommendation.perPartition)));
  }
}
