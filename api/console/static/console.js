/* The console's shell: who is signed in and what that role may do, the hash router, the
 * navigation, the sign-in page, and the timers of the page shown. */
"use strict";

/* mode: "open" (authentication off), "super" (a super-user, or authorization off), "tenant"
 * (a tenant admin: no tenant list, audit, fleet, broker settings or report runs), "signin". */
const Session = { mode: null, role: null, tenants: [] };

async function detectSession() {
  Session.role = Api.token() ? tokenRole(Api.token()) : null;
  Session.tenants = [];
  try {
    const me = await Api.get(ADMIN + "/whoami");
    Session.role = me.role || Session.role;
    Session.tenants = me.tenants;
    if (!me.authenticationEnabled) Session.mode = "open";
    else Session.mode = me.superUser ? "super" : "tenant";
  } catch (err) {
    if (err.status === 401) Session.mode = "signin";
    else throw err;
  }
}

function announce(text) {
  const status = document.getElementById("status");
  status.textContent = "";
  setTimeout(() => { status.textContent = text; }, 50);
}

/* A message for the next page shown (the outcome of a change, after the page reloads). */
let flashed = null;
function flash(text) { flashed = text; }

function renderChrome() {
  const items = [["#/", "Tenants"]];
  if (Session.mode === "open" || Session.mode === "super") {
    items.push(["#/broker", "Broker rates"], ["#/groups", "Resource groups"],
      ["#/runs", "Report runs"], ["#/audit", "Audit log"], ["#/fleet", "Workers"]);
  }
  const nav = document.getElementById("nav");
  const current = location.hash.split("?")[0] || "#/";
  nav.replaceChildren(...items.map(([href, text]) => h("li", null, h("a", { href,
    "aria-current": current === href || (href !== "#/" && current.startsWith(href)) ? "page"
      : null }, text))));
  const who = document.getElementById("who");
  if (Session.mode === "open") {
    who.replaceChildren(h("span", null, "Authentication off"));
  } else if (Session.mode === "signin") {
    who.replaceChildren(h("a", { href: "#/signin" }, "Sign in"));
  } else {
    const out = h("button.link", { type: "button" }, "Sign out");
    out.addEventListener("click", async () => {
      Api.clearToken();
      sessionStorage.removeItem("sluice.tenants");
      await detectSession();
      location.hash = "#/signin";
      route();
    });
    who.replaceChildren(h("span", null, "Signed in as " + (Session.role || "?") + " (" +
      (Session.mode === "super" ? "super-user" : "tenant admin") + ")"), " ", out);
  }
}

async function viewSignIn(ctx) {
  ctx.main.append(...heading("Sign in"));
  const area = h("textarea", { id: "token", name: "token", rows: "4", required: true,
    autocomplete: "off", spellcheck: "false", "aria-describedby": "token-hint" });
  const box = h("div.result", { "aria-live": "polite" });
  const form = h("form.signin", { "aria-label": "Sign in with a token" },
    h("label", { for: "token" }, "Token"), area,
    h("small", { id: "token-hint" }, "A token made by 'sluice tokens create'. It is kept " +
      "in this browser tab's session only, and forgotten when the tab closes."),
    h("div.buttons", null, h("button.primary", { type: "submit" }, "Sign in")), box);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const token = area.value.trim();
    if (!token) return;
    Api.setToken(token);
    try {
      await detectSession();
    } catch (err) {
      Api.clearToken();
      showError(box, err);
      return;
    }
    if (Session.mode === "signin") {
      let reason = "the token was refused";
      try { await Api.get(ADMIN + "/tenants"); } catch (err) { reason = err.reason; }
      Api.clearToken();
      Session.role = null;
      box.replaceChildren(h("p.error", { role: "alert" }, "Sign-in refused: " + reason));
      return;
    }
    location.hash = "#/";
  });
  ctx.main.append(form);
  if (ctx.session.mode === "open") {
    ctx.main.append(h("p", null, "Authentication is off on this service: no token is needed."));
  }
}

const ROUTES = [
  [/^\/?$/, viewHome],
  [/^\/signin$/, viewSignIn],
  [/^\/tenant\/([^/]+)$/, viewTenant],
  [/^\/ns\/([^/]+)\/([^/]+)$/, viewNamespace],
  [/^\/permissions\/([^/]+)\/([^/]+)$/, viewPermissions],
  [/^\/topic\/([^/]+)\/([^/]+)\/(.+)$/, viewTopic],
  [/^\/reports\/([^/]+)\/([^/]+)$/, viewReports],
  [/^\/advice\/([^/]+)\/([^/]+)$/, viewAdvice],
  [/^\/runs$/, viewRuns],
  [/^\/audit$/, viewAudit],
  [/^\/fleet$/, viewFleet],
  [/^\/broker$/, viewBroker],
  [/^\/groups$/, viewResourceGroups],
];

let timers = [];
let generation = 0;

async function route() {
  const mine = ++generation;
  timers.forEach((id) => { clearInterval(id); clearTimeout(id); });
  timers = [];
  const [path, search] = (location.hash.replace(/^#/, "") || "/").split("?");
  const main = document.getElementById("main");
  if (Session.mode === "signin" && path !== "/signin") {
    location.hash = "#/signin";
    return;
  }
  renderChrome();
  const page = h("div.page");
  main.replaceChildren(page);
  if (flashed) {
    main.prepend(h("p.ok.flash", { role: "status" }, flashed));
    flashed = null;
  }
  const ctx = {
    main: page,
    session: Session,
    query: new URLSearchParams(search || ""),
    every(ms, fn) {
      const id = setInterval(() => {
        if (mine === generation) fn().catch((err) => console.warn(err));
      }, ms);
      timers.push(id);
    },
    after(ms, fn) {
      timers.push(setTimeout(() => {
        if (mine === generation) fn().catch((err) => console.warn(err));
      }, ms));
    },
    reload() { if (mine === generation) route(); },
  };
  // Shown below what the view has drawn so far, until it has drawn everything.
  const loading = h("p.loading", { role: "status" }, "Loading…");
  main.append(loading);
  for (const [pattern, view] of ROUTES) {
    const m = path.match(pattern);
    if (!m) continue;
    try {
      await view(ctx, ...m.slice(1).map(decodeURIComponent));
      loading.remove();
    } catch (err) {
      loading.remove();
      if (mine !== generation) return;
      if (err.status === 401 && Api.token()) {
        Api.clearToken();
        await detectSession();
        location.hash = "#/signin";
        return;
      }
      page.append(errorBox(err));
    }
    if (mine === generation) announce(document.title.split(" — ")[0] + " loaded");
    return;
  }
  loading.remove();
  page.append(...heading("Not found"), h("p", null, "No such page. ", link("#/", "Tenants")));
}

document.addEventListener("DOMContentLoaded", async () => {
  try {
    await detectSession();
  } catch (err) {
    document.getElementById("main").replaceChildren(errorBox(err));
    return;
  }
  window.addEventListener("hashchange", () => {
    route();
    document.getElementById("main").focus({ preventScroll: true });
  });
  route();
});
