// Loads pages that show an exported notebook (nbconvert's HTML, an inline
// viewer's page) in headless Chromium, and reports what the cells' outputs
// could do there. Driven by tests/mcp/test_notebook_inert.py.
//
//   node tests/mcp/pages/inspect.mjs --pages JSON [--chromium PATH] [--out DIR]
//
// JSON is a list of {name, url, cells, outputs}: `cells` selects each code
// cell of the page in order, `outputs` the containers of its outputs inside
// a cell (the page's own markup; what is inside them is the cell's). Every
// request to 127.0.0.1 goes through (the test's listener counts them);
// every other one (a template's CDN scripts, which this machine cannot
// reach) is refused at once and reported. For each page it prints, as JSON:
// the refused requests, the page's `data-ran` marks (set by any payload
// script that runs), the page's globals that an output shadows, and per
// cell: attributes of outputs that hold an outside URL, elements with a
// class, elements positioned out of the flow, styles that call url(), and
// images with a source that decoded (or did not).
import { mkdir } from "node:fs/promises";
import path from "node:path";

import puppeteer from "puppeteer-core";

// Globals the payloads try to shadow with ids and names.
const CLOBBER = ["CONFIG", "CONFIG2", "jupyter", "require", "MathJax", "prims_clobber"];
// Attributes that load or navigate.
const URL_ATTRIBUTES = ["href", "xlink:href", "src", "srcset", "action", "formaction", "data", "poster",
  "background", "cite", "ping", "longdesc"];

function parseArgs(argv) {
  const a = { chromium: "/usr/bin/chromium" };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`${k} needs a value`);
      return argv[++i];
    };
    if (k === "--pages") a.pages = JSON.parse(v());
    else if (k === "--chromium") a.chromium = v();
    else if (k === "--out") a.out = v();
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.pages) throw new Error("usage: inspect.mjs --pages JSON [--chromium PATH] [--out DIR]");
  return a;
}

// Runs in the page: what its outputs hold and do.
function survey(cellsSelector, outputsSelector, clobber, urlAttributes) {
  const report = { ran: document.documentElement.getAttribute("data-ran") || "", cells: [], clobbered: [] };
  for (const name of clobber) {
    let v;
    try { v = window[name]; } catch { v = undefined; }
    if (v instanceof Element || v instanceof HTMLCollection) report.clobbered.push(name);
  }
  for (const cell of document.querySelectorAll(cellsSelector)) {
    const c = { outputs: 0, urls: [], classes: [], positioned: [], styleUrls: [], elements: 0, images: 0, broken: 0 };
    for (const out of cell.querySelectorAll(outputsSelector)) {
      c.outputs++;
      for (const e of out.querySelectorAll("*")) {
        c.elements++;
        const tag = e.localName;
        for (const attr of e.attributes) {
          const name = attr.name.toLowerCase();
          const value = attr.value.trim();
          if (urlAttributes.includes(name) && !value.startsWith("#") && !/^data:image\//i.test(value)) {
            c.urls.push(`${tag} ${name}=${value.slice(0, 80)}`);
          }
          if (name === "style" && /url\(\s*['"]?\s*[^#'"\s]/i.test(value)) c.styleUrls.push(`${tag} ${value.slice(0, 80)}`);
        }
        if (tag === "img" && e.hasAttribute("src")) e.naturalWidth > 0 ? c.images++ : c.broken++;
        if (e.hasAttribute("class")) c.classes.push(`${tag}.${e.getAttribute("class")}`);
        const s = getComputedStyle(e);
        if (["fixed", "absolute", "sticky"].includes(s.position) || s.zIndex !== "auto") {
          c.positioned.push(`${tag} position=${s.position} z-index=${s.zIndex}`);
        }
      }
    }
    report.cells.push(c);
  }
  return report;
}

async function inspect(browser, page, args) {
  const tab = await browser.newPage();
  const refused = [];
  const console_ = [];
  await tab.setRequestInterception(true);
  tab.on("request", (r) => {
    const u = new URL(r.url());
    if (u.protocol === "data:" || u.hostname === "127.0.0.1") r.continue();
    else {
      refused.push(r.url());
      r.abort("blockedbyclient");
    }
  });
  tab.on("console", (m) => console_.push(m.text().slice(0, 200)));
  // A payload that navigates the page away ends the survey with an error, which the test reports.
  await tab.goto(page.url, { waitUntil: "load", timeout: 60_000 });
  // Let what loads late load, and timers fire (a payload could wait).
  await new Promise((r) => setTimeout(r, 1500));
  const report = await tab.evaluate(survey, page.cells, page.outputs, CLOBBER, URL_ATTRIBUTES);
  if (args.out) await tab.screenshot({ path: path.join(args.out, `${page.name}.png`), fullPage: true });
  await tab.close();
  return { name: page.name, url: page.url, refused, console: console_, ...report };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.out) await mkdir(args.out, { recursive: true });
  const browser = await puppeteer.launch({
    executablePath: args.chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
      "--disable-component-update", "--no-first-run", "--disable-sync"],
    defaultViewport: { width: 1000, height: 800 },
    protocolTimeout: 120_000,
  });
  const pages = [];
  try {
    for (const page of args.pages) pages.push(await inspect(browser, page, args));
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify({ pages }) + "\n");
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ error: String(e && e.stack || e) }) + "\n");
  process.exit(1);
});
