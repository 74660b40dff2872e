// Renders run_code results through PRIMS's MCP App view (ui://prims/run-view.html)
// in a real headless Chromium, the way an MCP Apps host does, and reports what
// the view showed. Driven by tests/mcp/test_app_view.py; also the render benchmark.
//
//   node tests/mcp/app/render.mjs --url http://127.0.0.1:PORT/mcp --out DIR
//       tools/list, resources/read of the view, run_code of the test cells in one
//       session, each result shown through the host page (host.js: the official
//       AppBridge + PostMessageTransport) in Chromium; a screenshot per cell in DIR,
//       the JSON report on stdout and in DIR/report.json. Then hostile Markdown
//       (800 KB each): shown as outputs, and rendered directly by the view's
//       renderer, each timed (report.hostileMarkdown).
//
//   node tests/mcp/app/render.mjs --url http://127.0.0.1:PORT/mcp --out DIR --bench 20
//       The render benchmark (not a timed test): one run_code result holding a
//       1,000-row DataFrame (text/html) and a matplotlib figure (PNG), shown
//       20 times, each in a fresh view. For each round: from the host's
//       sendToolResult to the view's "rendered" log message (the view sends it
//       when the DOM is built, every image is decoded and a frame has been laid
//       out), and the view's own time from receiving the result to that point.
//       Prints p50/min/max of both and the HTML's size in bytes. The easy way,
//       with a server of the tests' own (as root):
//         target/mcp-test-venv/bin/python tests/mcp/app/bench.py --rounds 20
//
// Options: --chromium PATH (default /usr/bin/chromium), --view-file PATH (show
// this HTML instead of the resource's bytes, for developing the view).
import { createServer } from "node:http";
import { mkdtemp, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import * as esbuild from "esbuild";
import puppeteer from "puppeteer-core";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const VIEW_URI = "ui://prims/run-view.html";
const APP_MIME = "text/html;profile=mcp-app";
// The CSP a host applies to a view that declares no ui.csp (the spec's
// default, plus frame-src/object-src/base-uri as the reference host adds).
const HOST_CSP =
  "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; " +
  "img-src 'self' data:; media-src 'self' data:; connect-src 'none'; frame-src 'none'; " +
  "object-src 'none'; base-uri 'self'";

function parseArgs(argv) {
  const a = { chromium: "/usr/bin/chromium", bench: 0 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`${k} needs a value`);
      return argv[++i];
    };
    if (k === "--url") a.url = v();
    else if (k === "--out") a.out = v();
    else if (k === "--bench") a.bench = Number(v());
    else if (k === "--chromium") a.chromium = v();
    else if (k === "--view-file") a.viewFile = v();
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.url || !a.out) throw new Error("usage: render.mjs --url MCP_URL --out DIR [--bench N]");
  return a;
}

// ------------------------------------------------------------------ the cells

const DATAFRAME = `import pandas as pd
pd.set_option("display.max_rows", None)
df = pd.DataFrame({"n": range(1000), "square": [i * i for i in range(1000)],
                   "label": [f"row {i}" for i in range(1000)]})
df`;
const PLOT = `import matplotlib.pyplot as plt
plt.plot([1, 2, 3]); plt.show()`;
const PRINT = `print("hello from the PRIMS view test: 6 * 7 =", 6 * 7)`;
const ERROR = `1/0`;
const HOSTILE = `from IPython.display import HTML, SVG, display
display(HTML('<img src=x onerror="window.__pwned=1; parent.postMessage({jsonrpc: \\'2.0\\', method: \\'pwned\\'}, \\'*\\')">'),
        HTML('<script>window.__pwned=1</script>'),
        SVG('<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned=1"/>'),
        HTML('<a href="javascript:window.__pwned=1">click me</a> <iframe srcdoc="<script>parent.__pwned=1</script>"></iframe>'
             '<object data="data:text/html,<script>window.__pwned=1</script>"></object>'
             '<details open ontoggle="window.__pwned=1">toggle me</details>'))`;
const MARKDOWN = `from IPython.display import Markdown, JSON, display
display(Markdown("## Summary\\n\\n- **bold** item\\n- \`inline code\`\\n\\n| a | b |\\n|---|---|\\n| 1 | 2 |\\n\\nraw <img src=x onerror='window.__pwned=1'> <script>alert(1)</script>"), JSON({"answer": 42}))`;
const BENCH = `import pandas as pd, matplotlib.pyplot as plt
pd.set_option("display.max_rows", None)
bench = pd.DataFrame({"n": range(1000), "square": [i * i for i in range(1000)],
                      "label": [f"row {i}" for i in range(1000)]})
plt.plot(bench.n, bench.square); plt.title("squares"); plt.show()
bench`;

const CELLS = [
  { name: "dataframe", code: DATAFRAME, requirements: ["pandas"], theme: "light" },
  { name: "plot", code: PLOT, theme: "dark" },
  // The host streams the arguments first (tool-input-partial), then switches the theme.
  { name: "print", code: PRINT, theme: "light", partialInputs: [{ code: 'print("hello from' }], themeChange: "dark" },
  { name: "error", code: ERROR, theme: "light" },
  { name: "hostile", code: HOSTILE, theme: "light", clickLinks: true },
  { name: "markdown", code: MARKDOWN, theme: "dark" },
];

// Markdown that the view's first renderer (one regex for every inline rule,
// which backtracked) took minutes or forever on: 151 s for 800 KB of `[a](`,
// cubic in the spaces of a heading, quadratic in those of a table rule's
// line, a stack overflow on 800,000 nested quotes. Each is 800 KB, as much
// as one output may hold (a bundle is at most 900 KiB).
const HOSTILE_MD_CHARS = 800_000;
function hostileMarkdown(n) {
  return {
    links: "[a](".repeat(n / 4),
    stars: "*".repeat(n), // a thematic break (hr) line
    starsInText: "a" + "*".repeat(n - 1), // **strong** after strong
    backticks: "a" + "`".repeat(n - 1), // not a fence: one unclosed run
    underscores: "_a".repeat(n / 2),
    brackets: "[".repeat(n / 2) + "a](" + "x".repeat(n / 2 - 3),
    heading: "# a" + " ".repeat(n - 4) + "b",
    tableRule: "a | b\n" + " ".repeat(n - 7) + "x",
    quotes: ">".repeat(n),
  };
}
// The same through the server: a real cell's display(Markdown(...)).
const HOSTILE_MD_CELL = `from IPython.display import Markdown, display
display(Markdown("[a](" * ${HOSTILE_MD_CHARS / 4}))`;
// A render that takes longer is stopped (the tests want far less: 1 s).
const HOSTILE_MD_TIMEOUT_MS = 15_000;
// Rendered directly, without the view's cap: the inputs that make no
// elements (the stars in text make 160,000, which time the DOM, not the parser).
const DIRECT_MD = ["links", "backticks", "underscores", "brackets", "heading", "tableRule", "quotes"];

// ------------------------------------------------------------------ MCP

async function connect(url) {
  const client = new Client(
    { name: "prims-app-view-test", version: "1.0.0" },
    { capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [APP_MIME] } } } },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

async function discover(client) {
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  const runCode = tools.find((t) => t.name === "run_code");
  if (!runCode) throw new Error(`tools/list has no run_code: ${tools.map((t) => t.name)}`);
  const meta = runCode._meta || {};
  const read = await client.readResource({ uri: VIEW_URI });
  const content = read.contents[0] || {};
  const html = content.text ?? (content.blob ? Buffer.from(content.blob, "base64").toString("utf8") : "");
  return {
    toolMeta: meta,
    resourceUri: meta.ui?.resourceUri ?? null,
    legacyResourceUri: meta["ui/resourceUri"] ?? null,
    resource: {
      count: read.contents.length,
      uri: content.uri,
      mimeType: content.mimeType,
      meta: content._meta ?? null,
      bytes: Buffer.byteLength(html, "utf8"),
    },
    html,
  };
}

async function callRunCode(client, args) {
  return client.callTool({ name: "run_code", arguments: args }, { timeout: 600_000 });
}

// ------------------------------------------------------------------ the host page

async function buildHost(dir) {
  const result = await esbuild.build({
    entryPoints: [path.join(HERE, "host.js")],
    bundle: true,
    format: "iife",
    platform: "browser",
    target: "chrome120",
    write: false,
    logLevel: "silent",
  });
  const js = result.outputFiles[0].text;
  await writeFile(path.join(dir, "host.js"), js);
  return `<!doctype html><html><head><meta charset="utf-8"><title>PRIMS test host</title>
<style>body{margin:0;padding:12px;background:#e9e9e6;font:13px system-ui}</style></head>
<body><div id="slot"></div><script src="/host.js"></script></body></html>`;
}

function serve(routes) {
  const server = createServer((req, res) => {
    const route = routes[new URL(req.url, "http://x").pathname];
    if (!route) {
      res.writeHead(404).end();
      return;
    }
    const body = typeof route.body === "function" ? route.body() : route.body;
    res.writeHead(200, { "content-type": route.type, "cache-control": "no-store", ...(route.headers || {}) });
    res.end(body);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

// What the view shows, read inside its (out-of-process, sandboxed) frame.
function inspectView() {
  const q = (s) => Array.from(document.querySelectorAll(s));
  const v = window.primsView || {};
  return {
    primsView: v ? { events: v.events, renders: v.renders, lastRender: v.lastRender, lastSize: v.lastSize,
      initialized: v.initialized, tornDown: v.tornDown, blocked: v.blocked, protocolVersion: v.protocolVersion,
      hostContextTheme: v.hostContext && v.hostContext.theme } : null,
    theme: document.documentElement.getAttribute("data-theme"),
    status: document.querySelector("[data-status]")?.getAttribute("data-status") ?? null,
    text: document.body.innerText,
    code: q(".code pre").map((p) => p.textContent),
    stdout: q(".stdout pre").map((p) => p.textContent),
    errors: q(".error pre").map((p) => p.textContent),
    errorLabels: q(".error .label").map((p) => p.textContent),
    outputs: q(".output").map((o) => ({ kind: o.getAttribute("data-kind"), mime: o.getAttribute("data-mime"),
      text: o.innerText.slice(0, 3000) })),
    tables: q(".html-out table").map((t) => ({
      bodyRows: t.tBodies.length ? Array.from(t.tBodies).reduce((n, b) => n + b.rows.length, 0) : t.rows.length,
      headerCells: t.tHead && t.tHead.rows.length ? t.tHead.rows[t.tHead.rows.length - 1].cells.length : 0,
      firstRow: t.tBodies[0]?.rows[0] ? Array.from(t.tBodies[0].rows[0].cells).map((c) => c.textContent) : [],
      lastRow: t.tBodies[0]?.rows.length ? Array.from(t.tBodies[0].rows[t.tBodies[0].rows.length - 1].cells).map((c) => c.textContent) : [],
    })),
    images: q("img").map((i) => ({ src: i.getAttribute("src"), naturalWidth: i.naturalWidth, naturalHeight: i.naturalHeight,
      complete: i.complete })),
    markdown: q(".md").map((m) => ({ tags: Array.from(m.querySelectorAll("*")).map((e) => e.localName), text: m.innerText })),
    json: q("pre.json").map((p) => p.textContent),
    notes: q(".note").map((n) => n.textContent),
    sources: q("details.source").map((d) => ({ open: d.open, summary: d.querySelector("summary").textContent,
      text: d.querySelector("pre").textContent })),
    scripts: q("script").length,
    iframes: q("iframe, object, embed").length,
    handlerAttributes: q("*").filter((e) => Array.from(e.attributes).some((a) => /^on/i.test(a.name))).length,
    pwned: typeof window.__pwned,
    cspViolations: window.__cspViolations ?? "not recorded",
    documentBytes: document.documentElement.outerHTML.length,
  };
}

// What the view made of a hostile Markdown output (read inside its frame;
// the text of the folded rest comes back whole, to compare with the input).
function inspectMarkdown() {
  const q = (s) => Array.from(document.querySelectorAll(s));
  const rest = document.querySelector(".output details.md-rest");
  return {
    status: document.querySelector("[data-status]")?.getAttribute("data-status") ?? null,
    mimes: q(".output").map((o) => o.getAttribute("data-mime")),
    markdownElements: q(".md *").length,
    notes: q(".note").map((n) => n.textContent),
    errors: q("pre.error").map((p) => p.textContent.slice(0, 500)),
    rest: rest ? { open: rest.open, summary: rest.querySelector("summary").textContent, text: rest.querySelector("pre").textContent } : null,
  };
}

// Renders Markdown with the view's own renderer, without its cap, in its
// frame; times it there.
function renderMarkdownDirectly(md) {
  const t0 = performance.now();
  const box = window.primsView.renderMarkdown(md);
  const ms = performance.now() - t0;
  const tags = {};
  for (const e of box.querySelectorAll("*")) tags[e.localName] = (tags[e.localName] || 0) + 1;
  return { ms: Math.round(ms * 10) / 10, tags, textChars: box.textContent.length };
}

// Stops a script still running in the view's frame (its own renderer
// process) after a render overran, so that the next view starts clean.
async function stopView(browser, viewUrl) {
  for (const t of browser.targets()) {
    if (!t.url().startsWith(viewUrl)) continue;
    const s = await t.createCDPSession().catch(() => null);
    if (!s) continue;
    await s.send("Runtime.terminateExecution").catch(() => {});
    await s.detach().catch(() => {});
  }
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms))),
  ]).finally(() => clearTimeout(timer));
}

// ------------------------------------------------------------------ main

// Each hostile input as a run_code result's one Markdown output (made here,
// no call; the last one from a real cell), shown like the cells above; then
// each rendered directly in the last view's frame. A render that overruns
// is recorded as an error, and stopped.
async function hostileMarkdownStage(client, sessionId, show, page, browser, viewUrl) {
  const inputs = hostileMarkdown(HOSTILE_MD_CHARS);
  const results = {};
  for (const [name, md] of Object.entries(inputs)) {
    results[name] = {
      toolInput: { code: `display(Markdown(${name}))`, session_id: sessionId },
      toolResult: {
        content: [{ type: "text", text: "(made by render.mjs)" }],
        structuredContent: { status: "ok", stdout: "", stderr: "", session_id: sessionId, duration_ms: 1, artifacts: [],
          outputs: [{ type: "display", data: { "text/markdown": md, "text/plain": "<IPython.core.display.Markdown object>" } }] },
      },
      md,
    };
  }
  const toolInput = { code: HOSTILE_MD_CELL, session_id: sessionId };
  const cell = await callRunCode(client, toolInput);
  const cellOut = (cell.structuredContent?.outputs || [])[0];
  results.cell = { toolInput, toolResult: cell, md: cellOut?.data?.["text/markdown"] ?? "" };
  const cellResult = { status: cell.structuredContent?.status, cut: cellOut?.cut ?? null };

  const out = { chars: HOSTILE_MD_CHARS, cell: cellResult, view: {}, direct: {} };
  for (const [name, { toolInput: input, toolResult, md }] of Object.entries(results)) {
    const r = { markdownChars: md.length };
    out.view[name] = r;
    try {
      const shown = await show(`markdown-${name}`, input, toolResult, "light",
        { screenshot: false, inspect: inspectMarkdown, timeoutMs: HOSTILE_MD_TIMEOUT_MS });
      r.renderMs = shown.host.renderMs;
      r.roundTripMs = shown.host.roundTripMs;
      const v = shown.view;
      const rest = v.rest;
      r.view = { ...v, rest: rest && { open: rest.open, summary: rest.summary, chars: rest.text.length } };
      // The folded rest is the input's tail, every character of it.
      r.restIsTheTail = Boolean(rest) && md.slice(md.length - rest.text.length) === rest.text;
      r.pwned = shown.framePwned;
    } catch (e) {
      r.error = String(e && e.message ? e.message : e).slice(0, 1000);
      await stopView(browser, viewUrl);
    }
  }
  // Directly, in the frame of a fresh view.
  await show("markdown-direct", { code: "" }, { content: [], structuredContent: { status: "ok", outputs: [] } }, "light",
    { screenshot: false, inspect: false }).catch((e) => (out.directSetupError = String(e.message)));
  const frame = page.frames().find((f) => f.url().startsWith(viewUrl));
  for (const name of DIRECT_MD) {
    const md = results[name].md;
    try {
      if (!frame) throw new Error("no view frame");
      out.direct[name] = { markdownChars: md.length,
        ...(await withTimeout(frame.evaluate(renderMarkdownDirectly, md), HOSTILE_MD_TIMEOUT_MS, `rendering ${name}`)) };
    } catch (e) {
      out.direct[name] = { markdownChars: md.length, error: String(e && e.message ? e.message : e).slice(0, 1000) };
      await stopView(browser, viewUrl);
    }
  }
  return out;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  await mkdir(args.out, { recursive: true });
  const report = { ok: false, cells: {}, problems: [] };
  const client = await connect(args.url);
  const tmp = await mkdtemp(path.join(tmpdir(), "prims-app-view-"));
  let browser;
  let server;
  try {
    const found = await discover(client);
    const { html: served, ...discovery } = found;
    report.discovery = discovery;
    const viewHtml = args.viewFile ? await readFile(args.viewFile, "utf8") : served;
    report.viewBytes = Buffer.byteLength(viewHtml, "utf8");
    report.viewFromFile = Boolean(args.viewFile);
    await writeFile(path.join(args.out, "served-view.html"), served);

    const hostHtml = await buildHost(tmp);
    const hostJs = await readFile(path.join(tmp, "host.js"));
    server = await serve({
      "/": { type: "text/html; charset=utf-8", body: hostHtml },
      "/host.js": { type: "text/javascript", body: hostJs },
      "/favicon.ico": { type: "image/x-icon", body: "" },
      "/view": { type: "text/html; charset=utf-8", body: viewHtml, headers: { "content-security-policy": HOST_CSP } },
    });
    const port = server.address().port;
    // Two origins (two sites): the host on 127.0.0.1, the view on localhost.
    const hostUrl = `http://127.0.0.1:${port}/`;
    const viewUrl = `http://localhost:${port}/view`;

    browser = await puppeteer.launch({
      executablePath: args.chromium,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--site-per-process", "--hide-scrollbars"],
      defaultViewport: { width: 860, height: 1400 }, // tall enough for a real click anywhere in the view
      protocolTimeout: 120_000,
    });
    const page = await browser.newPage();
    const dialogs = [];
    const consoleMessages = [];
    const pageErrors = [];
    page.on("dialog", async (d) => {
      dialogs.push(d.message());
      await d.dismiss();
    });
    // Errors and warnings of every frame (the SDK's debug chatter left out).
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warn") consoleMessages.push({ type: m.type(), text: m.text(), url: m.location()?.url ?? null });
    });
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    // Every frame, the view's too, records the CSP violations it meets (a
    // blocked load is reported there, not on the console).
    await page.evaluateOnNewDocument(() => {
      window.__cspViolations = [];
      document.addEventListener("securitypolicyviolation", (e) => {
        window.__cspViolations.push(`${e.effectiveDirective} ${e.blockedURI}`);
      });
    });

    const show = async (name, toolInput, toolResult, theme,
      { screenshot = true, inspect = true, partialInputs = [], cancelReason = null, themeChange = null, clickLinks = false,
        timeoutMs = 20000 } = {}) => {
      await page.goto(hostUrl, { waitUntil: "load" });
      const hostSide = await page.evaluate(
        (p) => window.showCall(p),
        { viewUrl, theme, toolInput, toolResult, partialInputs, cancelReason, timeoutMs },
      );
      const frames = page.frames();
      const viewFrame = frames.find((f) => f.url().startsWith(viewUrl));
      if (!viewFrame) throw new Error(`no frame at ${viewUrl}: ${frames.map((f) => f.url())}`);
      const out = { host: hostSide };
      if (inspect) {
        out.view = await viewFrame.evaluate(typeof inspect === "function" ? inspect : inspectView);
        out.framePwned = await Promise.all(frames.map((f) => f.evaluate(() => typeof window.__pwned).catch((e) => `error: ${e.message}`)));
        out.frameCount = frames.length;
        // The view's frame is its own renderer target (an out-of-process iframe).
        const cdp = await page.createCDPSession();
        const { targetInfos } = await cdp.send("Target.getTargets");
        await cdp.detach();
        out.viewTargetType = targetInfos.find((t) => t.url.startsWith(viewUrl))?.type ?? null;
      }
      if (screenshot) {
        const file = path.join(args.out, `${name}.png`);
        await (await page.$("#slot")).screenshot({ path: file });
        out.screenshot = file;
      }
      if (clickLinks) {
        // Real clicks on every link a cell output left in the view.
        const links = await viewFrame.$$(".html-out a");
        for (const a of links) await a.click();
        await new Promise((r) => setTimeout(r, 300));
        out.linksClicked = links.length;
        out.framePwnedAfterClicks = await Promise.all(page.frames().map((f) => f.evaluate(() => typeof window.__pwned).catch((e) => `error: ${e.message}`)));
        out.viewUrlAfterClicks = viewFrame.url();
      }
      if (themeChange) {
        await page.evaluate((t) => window.changeContext({ theme: t }), themeChange);
        out.themeAfterChange = await viewFrame.evaluate(() => document.documentElement.getAttribute("data-theme"));
        out.backgroundAfterChange = await viewFrame.evaluate(() => getComputedStyle(document.getElementById("root")).backgroundColor);
      }
      if (inspect === true && (await viewFrame.$("button.more-rows"))) {
        // The rows past the cap: shown on the button's click, and the view grows.
        const before = await page.evaluate(() => window.hostState());
        await viewFrame.click("button.more-rows");
        await viewFrame.waitForFunction(() => !document.querySelector("button.more-rows"), { timeout: 10000 });
        await new Promise((r) => setTimeout(r, 300));
        const after = await page.evaluate(() => window.hostState());
        out.showAll = {
          tables: await viewFrame.evaluate(() => Array.from(document.querySelectorAll(".html-out table")).map((t) =>
            Array.from(t.tBodies).reduce((n, b) => n + b.rows.length, 0))),
          lastRowText: await viewFrame.evaluate(() => {
            const rows = document.querySelectorAll(".html-out table tbody tr");
            return rows.length ? rows[rows.length - 1].textContent : null;
          }),
          heightBefore: before.sizes.at(-1)?.height ?? null,
          heightAfter: after.sizes.at(-1)?.height ?? null,
          iframeHeightAfter: after.iframeHeight,
        };
      }
      out.teardown = await page.evaluate(() => window.teardownCall());
      if (inspect) out.tornDown = await viewFrame.evaluate(() => window.primsView.tornDown).catch(() => null);
      return out;
    };

    let sessionId;
    if (args.bench > 0) {
      const toolInput = { code: BENCH, requirements: ["pandas"] };
      const result = await callRunCode(client, toolInput);
      const sc = result.structuredContent || {};
      if (sc.status !== "ok") throw new Error(`the benchmark cell failed: ${JSON.stringify(sc).slice(0, 2000)}`);
      const rounds = [];
      for (let i = 0; i < args.bench + 1; i++) {
        const r = await show(`bench-${i}`, toolInput, result, "light", { screenshot: i === 0, inspect: i === 0 });
        if (i === 0) {
          // a warm-up round, also a check of what the benchmark renders
          report.benchView = { tables: r.view.tables.map((t) => t.bodyRows), images: r.view.images.length };
          continue;
        }
        rounds.push({ roundTripMs: r.host.roundTripMs, renderMs: r.host.renderMs, phases: r.host.logs.find((l) => l.data?.event === "rendered")?.data?.phases });
      }
      const stats = (xs) => {
        const s = [...xs].sort((a, b) => a - b);
        const round1 = (x) => Math.round(x * 10) / 10;
        return { p50: round1(s[Math.floor((s.length - 1) / 2)]), min: round1(s[0]), max: round1(s[s.length - 1]) };
      };
      report.bench = {
        rounds: rounds.length,
        resultBytes: Buffer.byteLength(JSON.stringify(result), "utf8"),
        sendToRenderedMs: stats(rounds.map((r) => r.roundTripMs)),
        inViewRenderMs: stats(rounds.map((r) => r.renderMs)),
        viewBytes: report.viewBytes,
        chromium: await browser.version(),
        perRound: rounds,
      };
    } else {
      for (const cell of CELLS) {
        const toolInput = { code: cell.code };
        if (cell.requirements) toolInput.requirements = cell.requirements;
        if (sessionId) toolInput.session_id = sessionId;
        const result = await callRunCode(client, toolInput);
        const sc = result.structuredContent || {};
        sessionId = sessionId || sc.session_id;
        const shown = await show(cell.name, toolInput, result, cell.theme,
          { partialInputs: cell.partialInputs, themeChange: cell.themeChange, clickLinks: cell.clickLinks });
        report.cells[cell.name] = {
          theme: cell.theme,
          result: { isError: result.isError ?? false, status: sc.status, stderr: sc.stderr, stdout: sc.stdout,
            outputs: (sc.outputs || []).map((o) => ({ type: o.type, mimes: Object.keys(o.data || {}), cut: o.cut })) },
          ...shown,
        };
      }
      // A call the host cancels: tool-cancelled instead of a result (no run_code call).
      const cancelled = await show("cancelled", { code: "import time\ntime.sleep(600)" }, null, "light",
        { cancelReason: "the user stopped the call" });
      report.cells.cancelled = { theme: "light", ...cancelled };
      report.hostileMarkdown = await hostileMarkdownStage(client, sessionId, show, page, browser, viewUrl);
    }
    report.dialogs = dialogs;
    report.pageErrors = pageErrors;
    report.console = consoleMessages;
    report.chromium = await browser.version();
    report.ok = true;
  } catch (e) {
    report.problems.push(String(e && e.stack ? e.stack : e));
  } finally {
    if (browser) await browser.close().catch(() => {});
    if (server) server.close();
    await client.close().catch(() => {});
    await rm(tmp, { recursive: true, force: true });
  }
  const text = JSON.stringify(report, null, 2);
  await writeFile(path.join(args.out, args.bench > 0 ? "bench.json" : "report.json"), text);
  if (args.bench > 0 && report.bench) {
    const b = report.bench;
    console.error(
      `render benchmark (${b.rounds} rounds, DataFrame 1000 rows + PNG, result ${b.resultBytes} bytes, view ${b.viewBytes} bytes, ${b.chromium}):\n` +
        `  sendToolResult -> view rendered: p50 ${b.sendToRenderedMs.p50} ms, min ${b.sendToRenderedMs.min} ms, max ${b.sendToRenderedMs.max} ms\n` +
        `  inside the view:                 p50 ${b.inViewRenderMs.p50} ms, min ${b.inViewRenderMs.min} ms, max ${b.inViewRenderMs.max} ms`,
    );
  }
  // Exit only once the report is flushed: a pipe's write is asynchronous.
  process.stdout.write(text + "\n", () => process.exit(report.ok ? 0 : 1));
}

main().catch((e) => {
  console.error(e);
  process.exit(2);
});
