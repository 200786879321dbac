// The browser check of the npm build (`deno task test:browser`), run by Node
// inside the scratch project where the tarballs were installed. It serves the
// project on 127.0.0.1 with an import map for every installed `@allot/*`
// package, opens the page in Debian's chromium through playwright-core with
// WebGPU enabled (SwiftShader), and asserts the page's results.
//
//   node browser_check.mjs <path of tools/npm/>
import { createServer } from "node:http";
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { extname, join, normalize } from "node:path";

const toolsDir = process.argv[2];
const { chromium } = createRequire(join(toolsDir, "package.json"))(
  "playwright-core",
);
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";

const manifest = JSON.parse(readFileSync("package.json", "utf8"));
const names = Object.keys(manifest.dependencies)
  .filter((name) => name.startsWith("@allot/"))
  .sort();

/** Import map entries for a package's `exports` (the `import` conditions). */
function mapPackage(name, imports) {
  const dir = `/node_modules/${name}`;
  const pkg = JSON.parse(readFileSync(`.${dir}/package.json`, "utf8"));
  for (const [subpath, target] of Object.entries(pkg.exports ?? {})) {
    if (subpath === "./package.json") continue;
    const file = typeof target === "string"
      ? target
      : target.browser ?? target.import ?? target.default;
    imports[`${name}${subpath.slice(1)}`] = `${dir}/${
      file.replace(/^\.\//, "")
    }`;
  }
  for (
    const dep of [
      ...Object.keys(pkg.dependencies ?? {}),
      ...Object.keys(pkg.peerDependencies ?? {}),
    ]
  ) {
    if (!(dep in imports) && !dep.startsWith("@webgpu/")) {
      mapPackage(dep, imports);
    }
  }
}
const imports = {};
for (const name of names) mapPackage(name, imports);
const packages = names.map((name) => name.slice("@allot/".length));
// Modules meant for Node and Deno only (command-line programs reading files).
const NODE_ONLY = new Set(["trace/cli.js"]);
// Every module file of every package, so the page can load each one.
const modules = Object.fromEntries(packages.map((pkg) => [
  pkg,
  readdirSync(`node_modules/@allot/${pkg}`, { recursive: true })
    .map(String)
    .filter((file) => file.endsWith(".js") && !NODE_ONLY.has(`${pkg}/${file}`))
    .map((file) => `/node_modules/@allot/${pkg}/${file}`),
]));

const page = `<!doctype html>
<html>
<head>
<meta charset="utf-8">
<title>allot browser check</title>
<script type="importmap">${JSON.stringify({ imports }, null, 2)}</script>
<link rel="icon" href="data:,">
<script type="application/json" id="allot-packages">${
  JSON.stringify({ packages, modules })
}</script>
<script type="module" src="/browser_page.mjs"></script>
</head>
<body>allot browser check</body>
</html>`;

const types = {
  ".html": "text/html",
  ".js": "text/javascript",
  ".mjs": "text/javascript",
  ".json": "application/json",
  ".map": "application/json",
};
const root = process.cwd();
// Cross-origin isolation, so the page gets SharedArrayBuffer (@allot/threads).
const isolation = {
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-embedder-policy": "require-corp",
};
const server = createServer((req, res) => {
  const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
  if (path === "/" || path === "/index.html") {
    res.writeHead(200, { "content-type": types[".html"], ...isolation });
    res.end(page);
    return;
  }
  const file = normalize(join(root, path));
  if (
    !file.startsWith(root) ||
    !statSync(file, { throwIfNoEntry: false })?.isFile()
  ) {
    res.writeHead(404);
    res.end("not found");
    return;
  }
  res.writeHead(200, {
    "content-type": types[extname(file)] ?? "application/octet-stream",
    ...isolation,
  });
  res.end(readFileSync(file));
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${server.address().port}/`;

const userDataDir = mkdtempSync(join(tmpdir(), "allot-chromium-"));
let context;
let failed = 1;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--enable-unsafe-webgpu",
      "--enable-features=Vulkan",
      "--use-angle=swiftshader",
      "--use-webgpu-adapter=swiftshader",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
  const tab = context.pages()[0] ?? await context.newPage();
  tab.on("pageerror", (error) => console.log(`page error: ${error.message}`));
  tab.on("console", (message) => {
    if (message.type() === "error") console.log(`console: ${message.text()}`);
  });
  tab.on("response", (response) => {
    if (response.status() >= 400) {
      console.log(`http ${response.status()}: ${response.url()}`);
    }
  });
  console.log(
    `browser: ${context.browser()?.version() ?? executablePath} at ${url}`,
  );
  await tab.goto(url);
  await tab.waitForFunction(
    () => globalThis.__allotResult !== undefined,
    null,
    {
      timeout: 120_000,
    },
  );
  const result = await tab.evaluate(() => globalThis.__allotResult);
  for (const line of result.lines) console.log(line);
  console.log(`user agent: ${result.userAgent}`);
  // What the test asserts: every check passed, the WebGPU environment check
  // ran, and every installed package had its section run.
  const ran = new Set(result.results.map((r) => r.name));
  const missing = packages.filter((pkg) =>
    ![...ran].some((name) => name.startsWith(`@allot/${pkg}:`))
  );
  if (missing.length) {
    console.log(`FAIL: no result for ${missing.join(", ")}`);
    result.failed++;
  }
  if (!result.results.some((r) => r.ok && r.name.startsWith("WebGPU:"))) {
    console.log("FAIL: the page had no working WebGPU device");
    result.failed += result.results.some((r) => r.name.startsWith("WebGPU:"))
      ? 0
      : 1;
  }
  failed = result.failed;
  console.log(
    `browser check: ${result.passed} passed, ${result.failed} failed`,
  );
} catch (error) {
  console.log(`browser check: ${error?.stack ?? error}`);
} finally {
  await context?.close();
  server.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
