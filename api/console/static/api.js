/* The console's only way to data: the public REST API, called with the user's token.
 * The token lives in sessionStorage (this tab's session) and nowhere else.  Also the DOM
 * helper h() (text is always set as text, never parsed as HTML) and number formatting. */
"use strict";

const TOKEN_KEY = "sluice.token";

class ApiError extends Error {
  constructor(status, reason) {
    super(reason);
    this.status = status;
    this.reason = reason;
  }
}

const Api = {
  token() { return sessionStorage.getItem(TOKEN_KEY); },
  setToken(token) { sessionStorage.setItem(TOKEN_KEY, token); },
  clearToken() { sessionStorage.removeItem(TOKEN_KEY); },

  /* fetch() a path of the REST API; resolves to the parsed JSON (null for 204), rejects with
   * an ApiError carrying the API's reason. */
  async call(method, path, { query, body } = {}) {
    let url = path;
    if (query) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) {
        if (v !== undefined && v !== null && v !== "") params.set(k, String(v));
      }
      const text = params.toString();
      if (text) url += "?" + text;
    }
    const headers = { Accept: "application/json" };
    const token = Api.token();
    if (token) headers.Authorization = "Bearer " + token;
    const init = { method, headers, credentials: "omit", cache: "no-store" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(url, init);
    } catch (err) {
      throw new ApiError(0, "The admin service cannot be reached (" + err.message + ")");
    }
    const text = await response.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch (_) { data = text; }
    }
    if (!response.ok) {
      const reason = data && typeof data === "object" && data.reason
        ? data.reason : (response.status + " " + response.statusText);
      throw new ApiError(response.status, reason);
    }
    return data;
  },
  get(path, query) { return Api.call("GET", path, { query }); },
};

/* Path segments, escaped. */
function seg(...parts) { return parts.map(encodeURIComponent).join("/"); }
const ADMIN = "/admin/v2";

/* h("tag.class", {attr: value, onclick: fn}, child, ...): an element; strings become text. */
function h(spec, attrs, ...children) {
  const [tag, ...classes] = spec.split(".");
  const el = document.createElement(tag);
  if (classes.length) el.className = classes.join(" ");
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (k === "text") el.textContent = v;
      else el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/* A table: headers (strings) and rows (arrays of cells: strings, nodes, or {th: text}). */
function table(caption, headers, rows, cls) {
  return h("div.table-wrap", { tabindex: "0", role: "region", "aria-label": caption },
    h("table" + (cls ? "." + cls.split(" ").join(".") : ""), null,
      h("caption", null, caption),
      h("thead", null, h("tr", null, headers.map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", null, rows.length ? rows.map((r) => h("tr", null, r.map((c, i) =>
        c && c.th !== undefined ? h("th", { scope: "row" }, c.th)
          : h("td", { "data-label": headers[i] }, c))))
        : h("tr", null, h("td", { colspan: headers.length }, "None")))));
}

const Fmt = {
  /* Numbers with thousands separators: 12,345.6 */
  num(v) { return v.toLocaleString("en-US", { maximumFractionDigits: 2 }); },
  rate(v) {
    if (v === null || v === undefined) return "—";
    return Fmt.num(Math.round(v * 10) / 10);
  },
  int(v) { return v === null || v === undefined ? "—" : Fmt.num(Math.round(v)); },
  /* A limit in msg/s or bytes/s: null, <= 0 mean no limit. */
  limit(v, unit) {
    if (v === null || v === undefined || v <= 0) return "unlimited";
    return Fmt.num(Math.round(v * 100) / 100) + " " + unit;
  },
  duration(seconds) {
    if (seconds === null || seconds === undefined) return "—";
    if (seconds < 90) return Math.round(seconds) + " s";
    if (seconds < 5400) return Math.round(seconds / 60) + " min";
    if (seconds < 172800) return Math.round(seconds / 360) / 10 + " h";
    return Math.round(seconds / 8640) / 10 + " d";
  },
  time(iso) {
    if (!iso) return "—";
    const d = new Date(iso);
    return isNaN(d) ? iso : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  },
  json(v) { return v === null || v === undefined ? "—" : JSON.stringify(v); },
  /* One value of an audited field: a number grouped, a string as is, "—" for none. */
  value(v) {
    if (v === null || v === undefined) return "—";
    if (typeof v === "number") return Fmt.num(v);
    return typeof v === "string" ? v : JSON.stringify(v);
  },
};

/* The fields a change touched, as [field, old, new]: objects compared field by field (dotted
   names), a bare value (an integer policy) under the name "value". */
function changedFields(before, after) {
  const flat = (v, prefix, out) => {
    if (v !== null && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length) {
      for (const [k, x] of Object.entries(v)) flat(x, prefix ? prefix + "." + k : k, out);
    } else if (v !== null && v !== undefined) {
      out.set(prefix || "value", v);
    }
    return out;
  };
  const old = flat(before, "", new Map());
  const now = flat(after, "", new Map());
  return [...new Set([...old.keys(), ...now.keys()])]
    .filter((k) => JSON.stringify(old.get(k)) !== JSON.stringify(now.get(k)))
    .map((k) => [k, old.get(k), now.get(k)]);
}

/* The role in a JWT's payload, for display only (the server verifies the token). */
function tokenRole(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const claims = JSON.parse(atob(part + "===".slice((part.length + 3) % 4)));
    return claims.sub || null;
  } catch (_) {
    return null;
  }
}
