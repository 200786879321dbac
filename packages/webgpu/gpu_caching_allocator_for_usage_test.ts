// GpuCachingAllocator.forUsage(device, usage): one allocator per device and
// usage, made with the defaults (in the device's own group); a usage that
// the default storage usage covers (copies, storage alone) gets the storage
// allocator, whose buffers can serve it, so copies reuse storage's cache.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidArgumentError } from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { _DEFAULT_SEGMENT_USAGE, _KNOWN_USAGE, _Usage } from "./_flags.ts";
import { mockGpu, mockGpuWithUniforms } from "./_test_mock_device.ts";

const U = _Usage;
const STORAGE = _DEFAULT_SEGMENT_USAGE;
const MAPPED = U.MAP_READ | U.MAP_WRITE;

describe("GpuCachingAllocator.forUsage", () => {
  it("copy usages and storage share the device's storage allocator; the rest get one each", () => {
    const gpu = mockGpuWithUniforms();
    const storage = GpuCachingAllocator.forUsage(gpu.device);
    assert.equal(storage.source.usage, STORAGE);
    for (
      const u of [
        undefined,
        STORAGE,
        U.COPY_SRC,
        U.COPY_DST,
        U.COPY_SRC | U.COPY_DST,
        U.STORAGE,
        U.STORAGE | U.COPY_DST,
      ]
    ) {
      assert.equal(GpuCachingAllocator.forUsage(gpu.device, u), storage);
    }
    const uniforms = GpuCachingAllocator.forUsage(
      gpu.device,
      U.UNIFORM | U.COPY_DST,
    );
    const vertex = GpuCachingAllocator.forUsage(gpu.device, U.VERTEX);
    assert.equal(uniforms.source.usage, U.UNIFORM | U.COPY_DST);
    assert.equal(vertex.source.usage, U.VERTEX);
    assert.notEqual(uniforms, storage);
    assert.notEqual(vertex, uniforms);
    assert.equal(
      GpuCachingAllocator.forUsage(gpu.device, U.UNIFORM | U.COPY_DST),
      uniforms,
    );
    // all in the device's own group, with the usage defaults
    const group = GpuCachingAllocator.deviceGroup(gpu.device);
    assert.ok(
      storage.group === group && uniforms.group === group &&
        vertex.group === group,
    );
    assert.equal(group.size, 3);
    using u = uniforms.allocate(64);
    assert.equal(u.size, 64);
    using v = vertex.allocate(64);
    using t = storage.allocate(64);
    assert.ok(u.size === 64 && v.size === 64 && t.size === 64);
    // each its own pool: three buffers
    assert.equal(gpu.live.size, 3);
    for (const a of [uniforms, vertex, storage]) {
      assert.equal(a.stats().reservedBytes.all.current, 256);
    }
  });

  it("another device gets its own allocators", () => {
    const a = mockGpu(), b = mockGpu();
    const sa = GpuCachingAllocator.forUsage(a.device, U.COPY_SRC);
    const sb = GpuCachingAllocator.forUsage(b.device, U.COPY_SRC);
    assert.notEqual(sa, sb);
    assert.equal(sb.group, GpuCachingAllocator.deviceGroup(b.device));
    assert.equal(GpuCachingAllocator.forUsage(a.device), sa);
  });

  it("an upload's block and a storage tensor reuse one buffer", () => {
    const gpu = mockGpu();
    const uploads = GpuCachingAllocator.forUsage(gpu.device, U.COPY_SRC);
    const storage = GpuCachingAllocator.forUsage(gpu.device, STORAGE);
    const up = uploads.allocate(1 << 20);
    assert.equal(gpu.live.size, 1);
    const [buffer] = gpu.live;
    // the buffer serves a copy source (and a copy destination, a binding)
    assert.equal(buffer.usage & U.COPY_SRC, U.COPY_SRC);
    assert.equal(buffer.usage, STORAGE);
    const upBuffer = up.buffer;
    up.release();
    using t = storage.allocate(1 << 20);
    assert.equal(gpu.live.size, 1, "the upload's cached block, no new buffer");
    assert.equal(t.buffer, upBuffer);
  });

  it("refuses mapped, empty or unknown usages and a non-device, making nothing", () => {
    const gpu = mockGpu();
    const bad = [
      0,
      -4,
      1.5,
      Number.NaN,
      _KNOWN_USAGE + 1,
      2 ** 31,
      "4",
      null,
      U.MAP_READ | U.COPY_DST,
      U.MAP_WRITE | U.COPY_SRC,
      U.MAP_READ,
    ];
    for (const usage of bad) {
      assert.throws(
        () =>
          GpuCachingAllocator.forUsage(gpu.device, usage as unknown as number),
        InvalidArgumentError,
        String(usage),
      );
    }
    for (const device of [undefined, null, 1, {}, { limits: {} }]) {
      assert.throws(
        () =>
          GpuCachingAllocator.forUsage(
            device as unknown as GPUDevice,
            U.COPY_SRC,
          ),
        InvalidArgumentError,
      );
    }
    assert.equal(GpuCachingAllocator.deviceGroup(gpu.device).size, 0);
    assert.equal(gpu.live.size, 0);
  });

  it("model: the same allocator for usages its buffers cover, and buffers that carry every bit asked for", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.integer({ min: 1, max: _KNOWN_USAGE }).map((u) =>
            (u & ~MAPPED) || U.COPY_SRC
          ),
          { minLength: 1, maxLength: 12 },
        ),
        (usages) => {
          const gpu = mockGpuWithUniforms();
          const seen = new Map<number, GpuCachingAllocator>();
          for (const usage of usages) {
            const a = GpuCachingAllocator.forUsage(gpu.device, usage);
            // the pool's usage covers the request, and is storage's exactly
            // when storage's covers it
            assert.equal(a.source.usage & usage, usage);
            assert.equal(
              a.source.usage === STORAGE,
              (usage & ~STORAGE) === 0,
            );
            const first = seen.get(a.source.usage);
            if (first !== undefined) assert.equal(a, first);
            seen.set(a.source.usage, a);
            using b = a.allocate(256);
            assert.equal(b.buffer.usage & usage, usage);
          }
          assert.equal(
            GpuCachingAllocator.deviceGroup(gpu.device).size,
            seen.size,
          );
        },
      ),
      { numRuns: 100 },
    );
  });
});
