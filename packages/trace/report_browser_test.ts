import assert from "node:assert/strict";
import { gunzipSync } from "node:zlib";
import { formatBytes } from "@allot/core";
import { memoryReport, memoryTimeline, parseTrace } from "./mod.ts";
import { haveBrowser, launch } from "./_test_browser.ts";

const OUT = new URL("../../.out/", import.meta.url);

Deno.test({
  name:
    "the HTML report in real chromium: no console errors, counts and peak shown, hover shows a stack",
  ignore: !haveBrowser(),
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const gz = await Deno.readFile(
      new URL(
        "../../traces/tfjs-webgpu/cnn-training.jsonl.gz",
        import.meta.url,
      ),
    );
    const trace = parseTrace(new TextDecoder().decode(gunzipSync(gz)));
    const tl = memoryTimeline(trace);
    const html = memoryReport(trace, { repeat: 1 });
    await Deno.mkdir(OUT, { recursive: true });
    const file = new URL("trace-report.html", OUT);
    await Deno.writeTextFile(file, html);
    const browser = await launch();
    try {
      const page = await browser.newPage({
        viewport: { width: 1200, height: 900 },
      });
      const errors: string[] = [];
      page.on(
        "pageerror",
        (e: Error) => errors.push(`page error: ${e.message}`),
      );
      page.on("console", (m: { type(): string; text(): string }) => {
        if (m.type() === "error") errors.push(`console: ${m.text()}`);
      });
      page.on("request", (r: { url(): string }) => {
        if (!r.url().startsWith("file:") && !r.url().startsWith("data:")) {
          errors.push(`network: ${r.url()}`);
        }
      });
      await page.goto(file.href);
      await page.waitForSelector("#whatif-table");
      assert.equal(
        await page.textContent("#alloc-count"),
        String(tl.allocations.length),
      );
      assert.equal(
        await page.textContent("#peak-live"),
        formatBytes(tl.peakLive),
      );
      assert.equal(
        await page.textContent("#peak-held"),
        formatBytes(tl.peakHeld),
      );
      const rows = await page.$$eval(
        "#whatif-table tbody tr",
        (trs: unknown[]) => trs.length,
      );
      assert.equal(rows, 6); // the app itself and five policies
      const segs = await page.$$eval(
        "#segmap .seg",
        (d: unknown[]) => d.length,
      );
      assert.ok(segs > 0);
      // hover the column of the live peak: the tooltip shows the allocation's stack
      const box = await page.$eval(
        "#tl",
        (
          c: {
            getBoundingClientRect(): {
              left: number;
              top: number;
              width: number;
              height: number;
            };
          },
        ) => {
          const r = c.getBoundingClientRect();
          return { x: r.left, y: r.top, w: r.width, h: r.height };
        },
      );
      const n = tl.time.length, plot = box.w - 76;
      let tip = "";
      for (let k = 0; k < 40 && !/stack:\n {2}\S/.test(tip); k++) {
        const x = box.x + 70 + ((tl.peakLiveAt + k) / n) * plot + 0.5;
        await page.mouse.move(x, box.y + box.h - 40);
        tip = await page.textContent("#tip") ?? "";
      }
      assert.match(tip, /alloc|free/);
      assert.match(tip, /stack:\n {2}\S/);
      assert.match(tip, /tag /);
      // zoom in with the wheel, then the page still draws without errors
      await page.mouse.wheel(0, -300);
      await page.screenshot({
        path: new URL("trace-report.png", OUT).pathname,
        fullPage: false,
      });
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
    }
  },
});
