/**
 * The allocator contract of allot, stated once, and the tests that run it
 * against one allocator through a small adapter (a {@linkcode Subject}):
 * the verb audit, the model property (`_model.ts`), the hand-written
 * hostile cases.
 *
 * Written from the public API only: the adapters import each package's
 * `mod.ts` as a user would. See README.md beside this file for the contract
 * in words and the gaps each allocator still has.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import {
  AllotError,
  describeValue,
  DoubleFreeError,
  formatBytes,
  InvalidArgumentError,
  ManualStream,
  OutOfMemoryError,
} from "@allot/core";
import { drain, Model, opArbitrary, step } from "./_model.ts";
import {
  assertInvalidArgument,
  hostileNumbers,
  runs,
  type Subject,
  throwsTyped,
  VERBS,
} from "./_subject.ts";

export * from "./_subject.ts";
export { Model } from "./_model.ts";

/** Closes a subject after a failure without hiding the failure. */
function closeQuietly(s: Subject<unknown>): void {
  try {
    s.close();
  } catch {
    // the failure that brought us here is the one to report
  }
}

/** Options of {@linkcode conformance}. */
export interface ConformanceOptions {
  /** fast-check runs of the model property. */
  runs?: number;
  /** Whether Deno's resource and op sanitizers run (off on a real GPU). */
  sanitizeResources?: boolean;
}

/**
 * Registers the conformance tests of one allocator: the verb audit, a
 * fast-check model of random operation sequences, and the hand-written
 * hostile cases.
 */
export function conformance<H>(
  name: string,
  make: () => Subject<H>,
  options: ConformanceOptions = {},
): void {
  const sanitize = options.sanitizeResources ?? true;
  /** One test on a fresh subject, closed after (quietly after a failure). */
  const test = (
    title: string,
    body: (s: Subject<H>) => Promise<void> | void,
  ) =>
    Deno.test({
      name: `${name} ${title}`,
      sanitizeResources: sanitize,
      sanitizeOps: sanitize,
      async fn() {
        const s = make();
        try {
          await body(s);
        } catch (e) {
          closeQuietly(s);
          throw e;
        }
        s.close();
      },
    });
  test("has the contract's verbs, but for its listed gaps", (s) => {
    const t = s.target as Record<string, unknown>;
    const na = s.notApplicable ?? {};
    const gaps = VERBS.filter((v) =>
      typeof t[v] !== "function" && na[v] === undefined
    );
    assert.deepEqual(
      gaps,
      [...s.knownGaps],
      `${name}: the gaps changed; update knownGaps and README.md`,
    );
    for (const [verb, why] of Object.entries(na)) {
      assert.ok(
        typeof why === "string" && why.length > 0,
        `${name}: ${verb} is not applicable, with a reason`,
      );
      assert.notEqual(
        typeof t[verb],
        "function",
        `${name}: ${verb} is listed as not applicable but exists`,
      );
    }
    // stats() and memorySummary() are universal (issue #15): never N/A
    for (const verb of ["stats", "memorySummary"] as const) {
      assert.equal(na[verb], undefined, `${name}: ${verb} is universal`);
    }
  });

  test("stats() reports current, peak, allocated and freed", (s) => {
    const t = s.target as { stats?: () => unknown };
    if (typeof t.stats !== "function") return; // a listed gap
    const record = t.stats();
    assert.ok(typeof record === "object" && record !== null, "a record");
    const model = new Model(s);
    model.add(s.allocate(100), 100);
    model.add(s.allocate(3000), 3000);
    model.check("setup");
    const f = s.bytesInUse();
    if (s.partialStats === undefined) {
      for (const k of ["current", "peak", "allocated", "freed"] as const) {
        assert.equal(typeof f[k], "number", `${name}: stats() has ${k}`);
      }
      assert.ok(f.peak! >= f.current, "peak >= current");
    }
    return drain(model, "stats");
  });

  test("serves a 0-byte request as an ordinary block, through both verbs", async (s) => {
    const model = new Model(s);
    model.add(s.allocate(64), 64);
    const a = s.allocate(0);
    model.add(a, 0);
    model.check("allocate(0)");
    const b = s.tryAllocate(0);
    assert.ok(b !== undefined && b !== null, "tryAllocate(0) gives a block");
    model.add(b, 0);
    const c = s.allocate(-0);
    model.add(c, 0);
    model.check("tryAllocate(0), allocate(-0)");
    await drain(model, "zero");
  });

  Deno.test({
    name: `${name} keeps the contract over random operation sequences`,
    sanitizeResources: sanitize,
    sanitizeOps: sanitize,
    async fn() {
      const probe = make();
      const maxBytes = probe.maxRequestBytes;
      const minBytes = 0;
      probe.close();
      await fc.assert(
        fc.asyncProperty(
          fc.array(opArbitrary(minBytes, maxBytes), { maxLength: 40 }),
          async (ops) => {
            const s = make();
            try {
              const model = new Model(s);
              model.check("fresh");
              let n = 0;
              for (const op of ops) await step(model, op, n++);
              await drain(model, "end");
            } catch (e) {
              closeQuietly(s);
              throw e;
            }
            s.close();
          },
        ),
        { numRuns: options.runs ?? runs() },
      );
    },
  });

  test("refuses hostile values with a typed error and no change", async (s) => {
    const model = new Model(s);
    model.add(s.allocate(100), 100);
    model.add(s.allocate(3000), 3000);
    model.add(s.allocate(64), 64);
    s.free(model.take(2).handle);
    await s.settle?.();
    model.settled = true;
    model.check("setup");
    const calls: {
      name: string;
      optional?: boolean;
      accepts?: readonly unknown[];
      call(v: unknown): unknown;
    }[] = [
      { name: "allocate", call: (v) => s.allocate(v as number) },
      { name: "tryAllocate", call: (v) => s.tryAllocate(v as number) },
      ...(s.extraParameters ?? []),
    ];
    for (const { name: param, call, optional, accepts } of calls) {
      for (const { label, value } of hostileNumbers()) {
        if (optional && value === undefined) continue;
        if (accepts?.includes(value)) continue;
        const before = s.state();
        let error: unknown;
        try {
          call(value);
        } catch (e) {
          error = e;
        }
        assertInvalidArgument(error, value, `${param}(${label})`);
        assert.deepEqual(
          s.state(),
          before,
          `${param}(${label}): a refused call changed the state`,
        );
        model.check(`${param}(${label})`);
      }
    }
    // -0 is 0
    const z = s.allocate(-0);
    model.add(z, 0);
    model.check("allocate(-0)");
    await drain(model, "hostile");
  });

  test("refuses stale, double and foreign frees with a typed error", async (s) => {
    const model = new Model(s);
    model.add(s.allocate(512), 512);
    const h = s.allocate(256);
    model.add(h, 256);
    s.free(model.take(1).handle);
    await s.settle?.();
    model.settled = true;
    model.check("setup");
    // the rule (README.md): a handle of the verb's kind that this allocator
    // does not hold now (freed already, or given out elsewhere):
    // DoubleFreeError; a value that is no handle of the verb's kind at all:
    // InvalidArgumentError
    if (s.releaseIsIdempotent) {
      const before = s.state();
      s.free(h);
      assert.deepEqual(s.state(), before, "a second release changed state");
      model.check("second release");
      await drain(model, "frees");
      return;
    }
    const raw = (v: unknown) => s.freeRaw ? s.freeRaw(v) : s.free(v as H);
    type Family = abstract new (...args: never[]) => Error;
    const stale: [string, () => void, Family][] = [[
      "double",
      () => s.free(h),
      DoubleFreeError,
    ]];
    if (s.foreign) {
      const f = s.foreign();
      stale.push(["foreign", () => s.free(f), DoubleFreeError]);
      // not a handle at all: what a user's bug passes
      for (
        const v of [NaN, -1, 1.5, 2 ** 53, "0", null, undefined, {}, 0n]
      ) {
        stale.push([
          `${describeValue(v)} as a handle`,
          () => raw(v),
          s.handleKind?.includes(v) ? DoubleFreeError : InvalidArgumentError,
        ]);
      }
    }
    for (const [what, call, family] of stale) {
      const before = s.state();
      throwsTyped(call, [family], `${what} free`);
      assert.deepEqual(s.state(), before, `${what} free changed state`);
      model.check(`${what} free`);
    }
    await drain(model, "frees");
  });

  test("recordStream: refuses a bad stream or a freed block, delays nothing live", async (s) => {
    const t = s.target as {
      recordStream?: (h: unknown, stream: unknown) => void;
      synchronize?: () => Promise<void>;
    };
    if (typeof t.recordStream !== "function") return; // N/A or a gap
    const model = new Model(s);
    const h = s.allocate(256);
    model.add(h, 256);
    const keep = s.allocate(100);
    model.add(keep, 100);
    for (const bad of [null, {}, 5, "stream"]) {
      const before = s.state();
      throwsTyped(
        () => t.recordStream!.call(t, h, bad),
        [InvalidArgumentError],
        `recordStream(block, ${describeValue(bad)})`,
      );
      assert.deepEqual(s.state(), before, "a refused recordStream changed");
    }
    const stream = new ManualStream();
    t.recordStream.call(t, h, stream);
    model.check("recorded");
    s.free(model.take(0).handle);
    // freed, its stream's work not done: it may stay counted, never less
    const n = s.bytesInUse().current;
    assert.ok(n >= 100, "the live block stays counted");
    throwsTyped(
      () => t.recordStream!.call(t, h, stream),
      [AllotError],
      "recordStream on a freed block",
    );
    stream.completeAll();
    await t.synchronize?.call(t);
    await s.settle?.();
    model.settled = true;
    model.check("after the stream's work");
    await drain(model, "recordStream");
  });

  test("snapshot() pictures every live block in segments its blocks tile", async (s) => {
    const t = s.target as { snapshot?: () => unknown };
    if (typeof t.snapshot !== "function") return; // N/A or a gap
    const model = new Model(s);
    for (const n of [64, 3000, 0, 70_000]) model.add(s.allocate(n), n);
    s.free(model.take(1).handle);
    await s.settle?.();
    model.settled = true;
    model.check("setup");
    const snap = t.snapshot.call(t) as {
      segments?: {
        byteLength: number;
        blocks: { offset: number; byteLength: number; state: string }[];
      }[];
    };
    assert.deepEqual(
      JSON.parse(JSON.stringify(snap)),
      snap,
      "plain data that JSON writes",
    );
    if (Array.isArray(snap.segments)) {
      let live = 0;
      for (const seg of snap.segments) {
        let at = 0;
        for (const b of seg.blocks) {
          assert.equal(b.offset, at, "blocks tile their segment in order");
          at += b.byteLength;
          if (b.state === "active_allocated") live += b.byteLength;
        }
        assert.equal(at, seg.byteLength, "blocks cover their segment");
      }
      assert.ok(
        live >= s.bytesInUse().current,
        `live blocks ${live} >= bytes in use ${s.bytesInUse().current}`,
      );
    }
    await drain(model, "snapshot");
  });

  test("says the same out of memory through both verbs", async (s) => {
    const model = new Model(s);
    model.add(s.allocate(1024), 1024);
    const big = s.capacityBytes + 1;
    const r = s.tryAllocate(big);
    assert.ok(r === undefined || r === null, "tryAllocate: no block");
    throwsTyped(() => s.allocate(big), [OutOfMemoryError], "allocate");
    model.check("out of memory");
    // valid but huge, at the int32 and uint32 edges that fast paths
    // test: out of memory (or a stated maximum), through both verbs
    for (
      const n of [
        2 ** 31 - 1,
        2 ** 31,
        2 ** 32 - 1,
        2 ** 32,
        2 ** 32 + 64,
        2 ** 53 - 1,
      ]
    ) {
      const e = throwsTyped(
        () => s.allocate(n),
        [OutOfMemoryError, InvalidArgumentError],
        `allocate(${n})`,
      );
      if (e instanceof InvalidArgumentError) {
        assert.ok(e.limit !== undefined, `allocate(${n}) states a limit`);
        throwsTyped(
          () => s.tryAllocate(n),
          [InvalidArgumentError],
          `tryAllocate(${n}) refuses as allocate does`,
        );
      } else {
        let t: unknown;
        try {
          t = s.tryAllocate(n);
        } catch (err) {
          assert.fail(`tryAllocate(${n}) threw ${err}`);
        }
        assert.ok(t === undefined || t === null, `tryAllocate(${n})`);
      }
      model.check(`allocate(${n})`);
    }
    await drain(model, "oom");
  });

  test("keeps live blocks through emptyCache and resets peaks", async (s) => {
    const model = new Model(s);
    for (const n of [1, 700, 5000, 64]) model.add(s.allocate(n), n);
    s.free(model.take(1).handle);
    s.emptyCache?.();
    model.check("emptyCache");
    if (s.resetPeakStats) {
      s.resetPeakStats();
      model.resetPeaks();
      const f = s.bytesInUse();
      assert.equal(f.peak, f.current, "peak == current after reset");
    }
    const summarize = (s.target as { memorySummary?: unknown })
      .memorySummary;
    if (typeof summarize === "function") {
      for (
        const bad of [null, 5, "x", { title: 5 }, { abbreviated: 1 }]
      ) {
        const before = s.state();
        throwsTyped(
          () => summarize.call(s.target, bad),
          [InvalidArgumentError],
          `memorySummary(${JSON.stringify(bad)})`,
        );
        assert.deepEqual(s.state(), before, "memorySummary changed state");
      }
    }
    const text = s.summary?.() ??
      (typeof summarize === "function"
        ? summarize.call(s.target) as string
        : undefined);
    if (text !== undefined) {
      const f = s.bytesInUse();
      assert.ok(
        text.includes(formatBytes(f.current)) ||
          text.includes(String(f.current)),
        `memorySummary() mentions ${f.current} bytes in use: ${text}`,
      );
    }
    await drain(model, "emptyCache");
  });
}
