// GpuCachingAllocator with a leak detector that misbehaves (review 7): its
// watch() or forget() throws, or re-enters the allocator (ids, handles,
// emptyCache, the group's step mark, device loss) while the allocator is in
// the middle of an allocation or a release, under both reuse rules, in the
// device's group beside a member on the id path. After each case: every
// member validates, the pools' allocated bytes equal what is live, and
// everything goes back.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { LeakDetector } from "@allot/core";
import { GpuCachingAllocator, type GpuReuse } from "./gpu_caching_allocator.ts";
import type { GpuAllocation } from "./gpu_allocation.ts";
import { DeviceLostError } from "./device_lost_error.ts";
import { _Usage as U } from "./_flags.ts";
import { mockGpu } from "./_test_mock_device.ts";

const KiB = 1024;

type Misdeed =
  | "watch-throws"
  | "forget-throws"
  | "watch-allocates-id"
  | "watch-frees-id"
  | "watch-allocates"
  | "watch-empties"
  | "watch-steps"
  | "forget-allocates-id"
  | "forget-frees-id"
  | "forget-empties"
  | "watch-loses-device";

const MISDEEDS: readonly Misdeed[] = [
  "watch-throws",
  "forget-throws",
  "watch-allocates-id",
  "watch-frees-id",
  "watch-allocates",
  "watch-empties",
  "watch-steps",
  "forget-allocates-id",
  "forget-frees-id",
  "forget-empties",
  "watch-loses-device",
];

class Boom extends Error {}

describe("GpuCachingAllocator with a misbehaving leak detector (review 7)", () => {
  for (const reuse of ["queue-order", "after-fence"] as GpuReuse[]) {
    for (const misdeed of MISDEEDS) {
      it(`GpuCachingAllocator (${reuse}): a leak detector whose ${misdeed}: the pools stay exact, everything goes back`, async () => {
        const gpu = mockGpu();
        const group = GpuCachingAllocator.deviceGroup(gpu.device);
        let armed = false;
        const ids: number[] = [];
        const handles: GpuAllocation[] = [];
        // the id-path member of the same group
        const uploads = new GpuCachingAllocator(gpu.device, {
          source: { usage: U.COPY_SRC | U.COPY_DST },
        });
        const act = (when: "watch" | "forget") => {
          if (!armed || !misdeed.startsWith(when)) return;
          armed = false;
          switch (misdeed.slice(when.length + 1)) {
            case "throws":
              throw new Boom(`${when} failed`);
            case "allocates-id":
              ids.push(a.allocateId(3000));
              ids.push(uploads.allocateId(5000));
              break;
            case "frees-id":
              if (ids.length > 0) {
                const id = ids.shift()!;
                (a.liveIdCount > 0 && isLive(a, id) ? a : uploads).freeById(id);
              }
              break;
            case "allocates":
              handles.push(a.allocate(700));
              break;
            case "empties":
              a.emptyCache();
              uploads.emptyCache();
              break;
            case "steps":
              group.endStep();
              break;
            case "loses-device":
              gpu.device.destroy();
              break;
          }
        };
        class Detector extends LeakDetector {
          override watch(
            handle: object,
            info: { label: string; byteLength?: number },
          ): void {
            super.watch(handle, info);
            act("watch");
          }
          override forget(handle: object): boolean {
            const forgotten = super.forget(handle);
            act("forget");
            return forgotten;
          }
        }
        const detector = new Detector();
        const a = new GpuCachingAllocator(gpu.device, {
          reuse,
          leakDetector: detector,
        });
        ids.push(a.allocateId(2 * KiB), uploads.allocateId(8 * KiB));
        handles.push(a.allocate(4 * KiB));
        handles.splice(0, 1)[0].release();
        gpu.complete();
        await a.synchronize();
        // the misdeed, at an allocation and at a release
        armed = true;
        let h: GpuAllocation | undefined;
        try {
          h = a.allocate(1000);
        } catch (error) {
          if (misdeed === "watch-loses-device") {
            assert.ok(error instanceof DeviceLostError, String(error));
          } else {
            assert.ok(error instanceof Boom, String(error));
            assert.equal(misdeed, "watch-throws");
          }
        }
        if (misdeed === "watch-loses-device") {
          assert.ok(a.lost);
          // cleanup loops never throw after loss
          h?.release();
          for (const x of handles) x.release();
          for (const id of ids) {
            a.freeById(id);
            uploads.freeById(id);
          }
          a.validate();
          uploads.validate();
          return;
        }
        if (h !== undefined) handles.push(h);
        a.validate();
        uploads.validate();
        armed = true;
        for (const x of handles.splice(0)) {
          try {
            x.release();
          } catch (error) {
            assert.ok(error instanceof Boom, String(error));
            assert.equal(misdeed, "forget-throws");
          }
          assert.equal(x.released, true);
        }
        gpu.complete();
        await a.synchronize();
        a.validate();
        uploads.validate();
        // what is left live is the ids
        assert.equal(a.pendingFreeCount, 0);
        for (const id of ids) (isLive(a, id) ? a : uploads).freeById(id);
        gpu.complete();
        await a.synchronize();
        await uploads.synchronize();
        for (const x of [a, uploads]) {
          x.validate();
          assert.equal(x.liveIdCount, 0);
          assert.equal(x.caching.allocatedBytes, 0, `${x.caching.label}`);
          x.emptyCache();
        }
        assert.equal(gpu.live.size, 0);
        assert.equal(group.heldBytes, 0);
        assert.equal(detector.watching, 0, "every handle was forgotten");
      });
    }
  }
});

function isLive(a: GpuCachingAllocator, id: number): boolean {
  try {
    a.sizeOf(id);
    return true;
  } catch {
    return false;
  }
}
