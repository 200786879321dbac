/**
 * {@linkcode CachingGroup}: one held-bytes bound for several
 * {@linkcode CachingAllocator}s on one device.
 *
 * @module
 */

import { describeValue, InvalidArgumentError } from "@allot/core";
import { _groupCore, _newGroupCore } from "./_caching_group.ts";

/**
 * The caching allocators of one device that share a held bound: a WebGPU
 * buffer's usage is fixed when it is made, so a runtime keeps one allocator
 * per usage (storage, uniforms, uploads, readbacks), and their peaks fall at
 * different times. Alone, each keeps segments up to its own peak, and
 * together they hold the sum of their peaks.
 *
 * In a group, a member's miss whose new segment would raise the members'
 * held bytes together above the most they held after any earlier miss first
 * gives back whole free segments of the other members: the smallest one that
 * covers the excess, else the largest first. Once the member's own misses
 * cycle (a miss at a low after a peak), any other member's segments may go,
 * but not those of a member that holds blocks now and more than 8 times what
 * the asking member will hold with its miss (a small staging pool does not
 * take an active storage pool's cache) unless it made no request during the
 * group's last 32 misses; before, only those of members that made no request during the group's last
 * 32 misses (uploads idle since a load phase, say), or of members that hold
 * nothing lately (no block allocated now, and none at each of the group's
 * last 12 misses or through a whole step between {@linkcode
 * CachingGroup.endStep} marks: staging copies and uniforms between their
 * uses), then not their segments under a quarter of the excess. A member
 * whose segment given back that way would have served one of its own later
 * misses (the give-back was regretted: a buffer made again; for a member
 * holding nothing, within one step mark) is not asked again that way, nor
 * one whose source threw while giving back; so steps that repeat make no
 * new buffers once each member's regret is spent. A member holding nothing
 * whose give-back was regretted backs off instead: its streak of misses
 * starts again and must be twice as long (24, 48, ... up to 1024) before it
 * is asked without marks again (a session's weights are uploaded in bursts
 * many misses apart while storage grows a buffer per miss, then the upload
 * pool stays idle for good).
 *
 * Join a group with the `group` option of {@linkcode CachingAllocator};
 * leave it with {@linkcode CachingGroup.delete}.
 *
 * @example An idle upload segment goes before storage raises the bound
 * ```ts
 * import { CachingAllocator, CachingGroup } from "@allot/caching";
 * import { MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const MiB = 2 ** 20;
 * const group = new CachingGroup();
 * const storage = new CachingAllocator(new MockSegmentSource(), { group });
 * const uploads = new CachingAllocator(new MockSegmentSource(), { group });
 * // storage's misses cycle: a peak, then a miss at a low
 * const a = storage.allocate(MiB), b = storage.allocate(MiB);
 * a.release();
 * b.release();
 * storage.emptyCache();
 * using small = storage.allocate(64 * 1024);
 * uploads.allocate(4 * MiB).release(); // an upload, idle now
 * // storage grows past the most the group held: the upload segment goes
 * using big = storage.allocate(group.peakHeldBytes);
 * assert.equal(group.givenBackSegments, 1);
 * assert.equal(uploads.stats().reservedBytes.all.current, 0);
 * assert.ok(group.heldBytes <= group.peakHeldBytes);
 * ```
 */
export class CachingGroup {
  /** Makes an empty group. */
  constructor() {
    _newGroupCore(this);
  }

  /** Members now. */
  get size(): number {
    return _core(this, "size").members.size;
  }

  /** Bytes the members' segments hold together now. */
  get heldBytes(): number {
    return _core(this, "heldBytes").held();
  }

  /**
   * The bound: the most bytes the members held together after any member's
   * miss.
   */
  get peakHeldBytes(): number {
    return _core(this, "peakHeldBytes").peak;
  }

  /** Segments given back from one member for another's miss so far. */
  get givenBackSegments(): number {
    return _core(this, "givenBackSegments").givenBackSegments;
  }

  /** Bytes of those segments. */
  get givenBackBytes(): number {
    return _core(this, "givenBackBytes").givenBackBytes;
  }

  /**
   * Whether `allocator` is a member.
   *
   * @param allocator A `CachingAllocator` (or anything: `false`).
   * @returns Whether it is in this group.
   */
  has(allocator: unknown): boolean {
    const core = _core(this, "has()");
    return typeof allocator === "object" && allocator !== null &&
      core.memberOf(allocator) !== undefined;
  }

  /**
   * Takes `allocator` out of the group: its segments no longer count in the
   * group's held bytes, and the group no longer gives them back. The bound
   * stays (call {@linkcode CachingGroup.resetPeak} to lower it). A group
   * left empty takes allocators of any device.
   *
   * @param allocator A member.
   * @returns Whether it was a member.
   */
  delete(allocator: unknown): boolean {
    const core = _core(this, "delete()");
    if (typeof allocator !== "object" || allocator === null) return false;
    const p = core.memberOf(allocator);
    if (p === undefined) return false;
    core.remove(p);
    return true;
  }

  /**
   * Marks the end of a step (a pass of a model, a `session.run`, a training
   * step, a generated token): a member that holds nothing and has been in
   * the group through a whole step (two marks) may give its whole free
   * segments for another member's miss (see above), as one that held
   * nothing at the group's last 12 misses may without marks. A runtime
   * whose steps make few misses gets there sooner with marks. Cheap: it
   * counts each member's marks.
   *
   * @example
   * ```ts
   * import { CachingAllocator, CachingGroup } from "@allot/caching";
   * import { MockSegmentSource } from "@allot/core";
   * import assert from "node:assert/strict";
   *
   * const MiB = 2 ** 20;
   * const group = new CachingGroup();
   * const storage = new CachingAllocator(new MockSegmentSource(), { group });
   * const uploads = new CachingAllocator(new MockSegmentSource(), { group });
   * const weights = storage.allocate(MiB);
   * uploads.allocate(4 * MiB).release(); // the weights' upload, at load
   * group.endStep(); // the session is made
   * using a = storage.allocate(MiB); // the first run
   * group.endStep();
   * using b = storage.allocate(MiB); // the upload pool held nothing through a run
   * assert.equal(group.givenBackBytes, 4 * MiB);
   * weights.release();
   * ```
   */
  endStep(): void {
    _core(this, "endStep()").endStep();
  }

  /** Sets the bound to the bytes held now (the next misses raise it again). */
  resetPeak(): void {
    const core = _core(this, "resetPeak()");
    core.peak = core.held();
  }
}

// Internal to allot (kept off the exports): a wrapper that owns a member
// (`GpuCachingAllocator` its `caching`) names itself to the group, so that
// `has()` and `delete()` take the wrapper too.
Object.defineProperty(CachingGroup, Symbol.for("allot.caching.groupAlias"), {
  value: (group: object, alias: object, allocator: object): void => {
    const core = _groupCore(group);
    const p = core?.memberOf(allocator);
    if (core !== undefined && p !== undefined) core.byAllocator.set(alias, p);
  },
});

// Internal to allot: pins a group to one device key (a device's own group
// takes only that `GPUDevice`'s allocators, even while empty).
Object.defineProperty(CachingGroup, Symbol.for("allot.caching.groupPin"), {
  value: (group: object, key: object): void => {
    const core = _groupCore(group);
    if (core !== undefined) core.ownKey = key;
  },
});

/**
 * The group's state, or a typed refusal when `group` (the `this` of a
 * `CachingGroup` method or getter named by `what`) is not a group this class
 * made: an `Object.create(CachingGroup.prototype)` look-alike, a Proxy of a
 * group, a method called on something else.
 */
function _core(group: CachingGroup, what: string) {
  const core = _groupCore(group);
  if (core === undefined) {
    throw new InvalidArgumentError(
      `Cannot use CachingGroup.${what}: \`this\` is not a CachingGroup (a Proxy of one, or an object made from its prototype), received ${
        describeValue(group)
      }`,
      { name: "this", value: group, limit: "a CachingGroup" },
    );
  }
  return core;
}
