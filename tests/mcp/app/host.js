// The HOST side of an MCP App, for tests/mcp/app/render.mjs: the official
// AppBridge + PostMessageTransport of @modelcontextprotocol/ext-apps, bundled
// for the browser with esbuild at test time (render.mjs does it).
//
// Like a strict web host, it loads the view in an iframe with
// sandbox="allow-scripts" only (an opaque origin) from a second origin that
// sends the default MCP Apps CSP as a header (render.mjs serves it). It logs
// every JSON-RPC message on the wire, both ways, in order.
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

let current = null;

function withTimeout(promise, ms, what) {
  return Promise.race([
    promise,
    new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)),
  ]);
}

// Shows one tool call: loads the view, completes the handshake, sends the
// tool input and result, waits until the view says it rendered (its
// notifications/message log) and has reported its size after that.
// With partialInputs, sends tool-input-partial notifications first; with
// cancelReason, tool-cancelled instead of a result.
window.showCall = async function showCall({ viewUrl, theme, toolInput, toolResult, partialInputs = [], cancelReason = null, timeoutMs = 20000 }) {
  const wire = [];
  const sizes = [];
  const logs = [];
  const now = () => performance.now();
  const slot = document.getElementById("slot");
  slot.replaceChildren();
  const iframe = document.createElement("iframe");
  iframe.setAttribute("sandbox", "allow-scripts");
  iframe.setAttribute("title", "run_code view");
  iframe.style.cssText = "display:block;width:820px;height:60px;border:1px solid #8888;border-radius:6px";
  slot.appendChild(iframe);

  window.addEventListener("message", (e) => {
    if (e.source === iframe.contentWindow && e.data && typeof e.data === "object") {
      wire.push({ dir: "in", method: e.data.method ?? null, id: e.data.id ?? null, t: now() });
    }
  });

  const bridge = new AppBridge(
    null,
    { name: "prims-test-host", version: "1.0.0" },
    { openLinks: {}, logging: {} },
    {
      hostContext: {
        theme,
        platform: "web",
        displayMode: "inline",
        availableDisplayModes: ["inline"],
        containerDimensions: { maxWidth: 820 },
        locale: "en-US",
      },
    },
  );
  let rendered;
  const renderedP = new Promise((r) => (rendered = r));
  let sizedAfterRender;
  const sizedAfterRenderP = new Promise((r) => (sizedAfterRender = r));
  let renderedAt = null;
  bridge.onsizechange = ({ width, height }) => {
    sizes.push({ width, height, t: now() });
    if (height != null) iframe.style.height = `${height}px`;
    if (renderedAt !== null) sizedAfterRender();
  };
  bridge.onloggingmessage = (p) => {
    logs.push({ ...p, t: now() });
    if (p && p.data && p.data.event === "rendered") {
      renderedAt = now();
      rendered(p.data);
      // The size may not change after the render (no new notification then).
      setTimeout(sizedAfterRender, 500);
    }
  };
  let initialized;
  const initializedP = new Promise((r) => (initialized = r));
  bridge.oninitialized = () => initialized();

  const transport = new PostMessageTransport(iframe.contentWindow, iframe.contentWindow);
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    wire.push({ dir: "out", method: message.method ?? null, id: message.id ?? null, t: now() });
    return send(message, options);
  };
  await bridge.connect(transport);
  iframe.src = viewUrl;

  await withTimeout(initializedP, timeoutMs, "ui/notifications/initialized");
  for (const partial of partialInputs) await bridge.sendToolInputPartial({ arguments: partial });
  await bridge.sendToolInput({ arguments: toolInput });
  current = { bridge, iframe, sizes, wire };
  if (cancelReason !== null) {
    await bridge.sendToolCancelled({ reason: cancelReason });
    await new Promise((r) => setTimeout(r, 500));
    return { wire, sizes, logs, roundTripMs: null, renderMs: null, appVersion: bridge.getAppVersion(),
      appCapabilities: bridge.getAppCapabilities(), iframeHeight: iframe.getBoundingClientRect().height };
  }
  const sentAt = now();
  await bridge.sendToolResult(toolResult);
  const renderData = await withTimeout(renderedP, timeoutMs, "the view's rendered log message");
  const roundTripMs = renderedAt - sentAt;
  await withTimeout(sizedAfterRenderP, timeoutMs, "a size-changed after the render");
  return {
    wire,
    sizes,
    logs,
    roundTripMs,
    renderMs: renderData.renderMs,
    appVersion: bridge.getAppVersion(),
    appCapabilities: bridge.getAppCapabilities(),
    iframeHeight: iframe.getBoundingClientRect().height,
  };
};

// The view's size reports and the wire so far (after showCall returned).
window.hostState = () => (current ? { sizes: current.sizes, wire: current.wire, iframeHeight: current.iframe.getBoundingClientRect().height } : null);

// A host-context-changed notification (e.g. the user switched the theme).
window.changeContext = async (ctx) => {
  await current.bridge.sendHostContextChange(ctx);
  await new Promise((r) => setTimeout(r, 200));
};

// Tears the view down the way a host must: ui/resource-teardown, then waits for the answer.
window.teardownCall = async function teardownCall() {
  if (!current) return null;
  const answer = await withTimeout(current.bridge.teardownResource({ reason: "test done" }), 10000, "ui/resource-teardown's answer");
  await current.bridge.close();
  current = null;
  return answer;
};
