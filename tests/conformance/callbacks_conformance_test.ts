/**
 * Callbacks that throw or call back into the allocator (the fourth
 * outside-in review, from the public API only): `SystemAllocator`'s and
 * `CpuAllocator`'s `reporter`, `WatermarkAllocator`'s `logger` and
 * `addCallback`. A callback that throws does not change what the allocator
 * did; one that allocates or frees from inside leaves the figures equal to
 * a recount, and everything comes back.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { DataPtr } from "@allot/core";
import {
  CpuAllocator,
  CpuHeap,
  HostSegmentSource,
  type MemoryReporter,
  SystemAllocator,
  type SystemMemory,
} from "@allot/cpu";
import { WatermarkAllocator } from "@allot/watermark";

const KiB = 1024;

for (
  const [name, make] of [
    [
      "SystemAllocator",
      (reporter: MemoryReporter) =>
        new SystemAllocator({ capacityBytes: 256 * KiB, reporter }),
    ],
    ["CpuAllocator", (reporter: MemoryReporter) =>
      new CpuAllocator({
        heap: new CpuHeap(64 * KiB, { maxByteLength: 256 * KiB }),
        maxByteLength: 256 * KiB,
        reporter,
      })],
  ] as const
) {
  Deno.test(`${name}: a reporter that throws changes nothing the allocator did`, () => {
    const boom = () => {
      throw new Error("reporter failed (injected)");
    };
    const a = make({ onAllocate: boom, onFree: boom, onOutOfMemory: boom });
    const p = a.allocate(1000);
    assert.equal(a.stats().current, 1000);
    assert.equal(a.tryAllocate(1024 * KiB), undefined);
    p.release();
    assert.equal(a.stats().current, 0);
    a.validate();
  });

  Deno.test(`${name}: a reporter that allocates and frees from inside keeps the figures`, () => {
    const inner: DataPtr[] = [];
    let depth = 0;
    // deno-lint-ignore prefer-const
    let a: SystemAllocator | CpuAllocator;
    const reporter: MemoryReporter = {
      onAllocate() {
        if (depth++ === 0 && inner.length < 3) inner.push(a.allocate(64));
        depth--;
      },
      onFree() {
        if (depth++ === 0 && inner.length > 0) inner.pop()!.release();
        depth--;
      },
    };
    a = make(reporter);
    const outer = [a.allocate(100), a.allocate(200)];
    const sum = () =>
      [...outer, ...inner].reduce((n, p) => n + p.byteLength, 0);
    assert.equal(a.stats().current, sum(), "figures equal a recount");
    a.validate();
    outer.pop()!.release();
    assert.equal(a.stats().current, sum());
    for (const p of outer.splice(0)) p.release();
    while (inner.length > 0) inner.pop()!.release();
    assert.equal(a.stats().current, 0);
    a.validate();
  });
}

Deno.test("WatermarkAllocator: a logger and a callback that throw, or re-enter, change nothing it did", () => {
  const source = new HostSegmentSource({ capacityBytes: 8 << 20 });
  let reenter: WatermarkAllocator<SystemMemory> | undefined;
  const w = new WatermarkAllocator(source, {
    debugVerbosity: 0xff,
    logger: () => {
      if (reenter !== undefined) {
        const r = reenter;
        reenter = undefined; // once
        r.free(r.allocateBuffer(64));
      }
      throw new Error("logger failed (injected)");
    },
  });
  let calls = 0;
  const remove = w.addCallback(() => {
    calls++;
    throw new Error("callback failed (injected)");
  });
  reenter = w;
  const a = w.allocateBuffer(1000);
  const b = w.allocateBuffer(70_000);
  assert.ok(calls > 0, "the callback ran");
  assert.equal(
    w.stats().allocatedBytes.current,
    a.byteLength + b.byteLength,
    "figures equal a recount",
  );
  w.validate();
  w.free(a);
  w.free(b);
  remove();
  w.emptyCache();
  w.validate();
  assert.equal(w.stats().allocatedBytes.current, 0);
  assert.equal(source.reservedBytes, 0);
});
