import { describe, it } from "node:test";
import assert from "node:assert/strict";

/**
 * Runs `body` in a child Deno with natives syntax and `gc()`: it optimizes
 * `use` on one allocator, drops the allocator, runs full GCs, and prints
 * whether `use` was optimized before and is still optimized after (V8's
 * `kOptimized` status bit, 8 in Deno 2's V8).
 */
async function survivesDrop(make: string, use: string): Promise<string> {
  const code = `
    import { GpuCachingAllocator, GpuPlannedAllocator } from "${
    new URL("./mod.ts", import.meta.url).href
  }";
    import { CachingAllocator, StepPlannedPool } from "${
    new URL("../caching/mod.ts", import.meta.url).href
  }";
    import { MockSegmentSource } from "${
    new URL("../core/mod.ts", import.meta.url).href
  }";
    import { mockGpu } from "${
    new URL("./_test_mock_device.ts", import.meta.url).href
  }";
    void [GpuCachingAllocator, GpuPlannedAllocator, CachingAllocator,
      StepPlannedPool, MockSegmentSource, mockGpu];
    const status = new Function("f", "return %GetOptimizationStatus(f)");
    const prepare = new Function("f", "%PrepareFunctionForOptimization(f)");
    const optimize = new Function("f", "%OptimizeFunctionOnNextCall(f)");
    const make = () => ${make};
    const use = ${use};
    let pool = make();
    prepare(use);
    use(pool);
    use(pool);
    optimize(use);
    use(pool);
    const before = (status(use) & 8) !== 0;
    pool = undefined;
    for (let i = 0; i < 4; i++) globalThis.gc();
    const after = (status(use) & 8) !== 0;
    console.log(JSON.stringify({ before, after }));
  `;
  const { code: exit, stdout, stderr } = await new Deno.Command(
    Deno.execPath(),
    {
      args: [
        "eval",
        "--no-check",
        "--v8-flags=--allow-natives-syntax,--expose-gc,--no-concurrent-recompilation",
        code,
      ],
      stdout: "piped",
      stderr: "piped",
      cwd: new URL(".", import.meta.url).pathname,
    },
  ).output();
  assert.equal(exit, 0, new TextDecoder().decode(stderr));
  return new TextDecoder().decode(stdout).trim();
}

describe("shape anchors", () => {
  // Without the anchors, dropping the last allocator lets V8 collect its
  // maps at full GC and throw away the optimized code that checked them.
  for (
    const [name, make, use] of [
      [
        "CachingAllocator",
        "new CachingAllocator(new MockSegmentSource())",
        "(a) => a.allocate(512).release()",
      ],
      [
        "StepPlannedPool",
        "new StepPlannedPool(new MockSegmentSource())",
        "(p) => p.free(p.allocate(512))",
      ],
      [
        "GpuCachingAllocator",
        "new GpuCachingAllocator(mockGpu().device)",
        "(a) => a.allocate(512).release()",
      ],
      [
        "GpuPlannedAllocator",
        "new GpuPlannedAllocator(mockGpu().device)",
        "(a) => a.allocate(512).release()",
      ],
    ]
  ) {
    it(`${name}: code optimized on a dropped allocator stays optimized after full GC`, async () => {
      assert.equal(
        await survivesDrop(make, use),
        JSON.stringify({ before: true, after: true }),
      );
    });
  }
});
