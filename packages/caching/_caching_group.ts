/**
 * Internal: {@linkcode _GroupCore}, the state of a {@linkcode CachingGroup}
 * that its members' policies drive at a miss: the group's held bytes (the
 * members' reserved bytes together), the most of them held after any
 * member's miss (the bound), the step marks, and the segments of one member
 * given back so that another's miss stays under it (ghosts, for the
 * back-off).
 *
 * @module
 */

import { type Device, InvalidArgumentError } from "@allot/core";
import { type _Block, FREE } from "./_block_pool.ts";
import type { _CachingPolicy } from "./_caching_policy.ts";
import { _releaseSegment } from "./_caching_segments.ts";

/** A member's policy (any memory type). */
// deno-lint-ignore no-explicit-any
type _Member = _CachingPolicy<any>;

/** A segment given back for the group, remembered after it is gone. */
interface _GroupGhost {
  member: _Member;
  small: boolean;
  size: number;
  idle: boolean;
  /**
   * The group's step count when it went for its member holding nothing
   * lately (see `makeRoom`), else -1.
   */
  step: number;
}

/**
 * A segment given back because its member held nothing is regretted when
 * the member wants it again within this many step marks (the same step or
 * the next); later, holding it through the steps between would have cost
 * more bytes than making it again.
 */
const STEP_REGRET_MARKS = 1;

/**
 * A member that held nothing at each of the group's last `EMPTY_MISSES`
 * misses holds nothing lately, without step marks (see `holdsNothing`).
 * Measured on the recorded traces, all buffers, without step marks, with
 * 4 KiB-granular adaptive segments and no back-off: 4 gave back a
 * session's weight uploads while it was being made (GRU 1.222); 8 GRU
 * 1.075, MLP 1.004; 16 MLP 1.116; 32 changed nothing. With segments of
 * just the request while nothing held is free (misses come more often) and
 * the back-off at a regret (`emptyNeed`), one pass / warm; buffers made
 * after the first pass: 4 GRU 1.043 / 1.205; 28; 8 GRU 1.109 / 1.200; 1, U-Net
 * multi-size 0 -> 2 made, detector +0.0007; 12 GRU 1.042 / 1.195; 1, MLP
 * 1.080; 16 GRU 1.054 / 1.208; 1, with marks conv 1.002 -> 1.007; 24 GRU
 * 25 made.
 */
const EMPTY_MISSES = 12;

/**
 * The most misses a member's holding-nothing streak must reach after its
 * give-backs were regretted (each regret doubles it from `EMPTY_MISSES`;
 * see `regret`).
 */
const MAX_EMPTY_MISSES = 1024;

/**
 * A member's whole free segment under 1/`TINY_SHARES` of the excess is not
 * given back for holding nothing: it does little toward the bound, and a
 * pool of small blocks (uniforms) would give back and make its segments one
 * by one (as the policy's own give-back keeps such segments last).
 */
const TINY_SHARES = 4;

/**
 * Once a member's misses cycle it may take any other member's whole free
 * segments, but not those of a member that holds blocks now and holds more
 * than `SIDE_SHARES` times what the asking member will hold with its miss,
 * unless that member made no request in the group's last
 * `SIDE_IDLE_MISSES` misses: a small pool's cycling (staging copies,
 * uniforms) says nothing of what the pool that holds the bytes needs, and
 * taking an active storage pool's free segments for a few KiB changed that
 * pool's later passes. Measured on the recorded traces, all buffers, default
 * pools (one pass, warm; buffers made after the first pass): wide-deep
 * 1.226, 1.491; 28 -> 1.231, 1.427; 25 (about its `group: null` figures),
 * ViT 1.034, 1.065; 12 -> 1.026, 1.063; 11, CRNN 1.069 -> 1.068, ResNet
 * 1.082, 1.223; 36 -> 1.087, 1.216; 38; the same within 0.0002 at 2 and 32
 * shares. Asking only idle members whenever the asker holds under 1/8 of
 * the group's bytes (the donor not looked at): the same bytes, but ResNet 36
 * -> 52 buffers made after the first pass, and a storage pool, small while
 * its misses cycle, kept from an idle upload pool's cache.
 */
const SIDE_SHARES = 8;
/** See {@linkcode SIDE_SHARES} (the policy's idle rule, 32 misses). */
const SIDE_IDLE_MISSES = 32;

/** Ghosts remembered; the oldest are forgotten past it. */
const MAX_GHOSTS = 64;

/** What the group keeps of one member (see `_GroupCore.members`). */
class _MemberState {
  /**
   * The group no longer gives back its segments: one of them was made
   * again soon after (a give-back regretted), or its source threw.
   */
  kept = false;
  /**
   * Its segment given back for being idle was regretted: not asked again for
   * being idle (still once the asking member's misses cycle).
   */
  keptIdle = false;
  /**
   * Its segment given back for holding nothing was wanted again within
   * `STEP_REGRET_MARKS` step marks: not asked again that way by step marks.
   */
  keptEmpty = false;
  /** Its request clock when last seen at a miss (hits included). */
  seenClock = 0;
  /** The group's tick at which that clock last changed; -1 before a miss. */
  seenTick = -1;
  /** Step marks seen since it joined. */
  marksSeen = 0;
  /** The group's misses in a row at which it held nothing. */
  emptyMisses = 0;
  /**
   * The streak of `emptyMisses` it must reach to hold nothing lately:
   * `EMPTY_MISSES`, doubled at each regretted give-back (up to
   * `MAX_EMPTY_MISSES`).
   */
  emptyNeed = EMPTY_MISSES;
}

/** The group's state (see `CachingGroup`). */
export class _GroupCore {
  /** The members' policies, in the order they joined, and their state. */
  readonly members: Map<_Member, _MemberState> = new Map();
  /**
   * Each member's policy by its allocator (the facade), held weakly: a
   * dropped allocator is not kept alive by its group (an entry counts only
   * while its policy is in `members`; see {@linkcode _GroupCore.memberOf}).
   */
  readonly byAllocator: WeakMap<object, _Member> = new WeakMap();
  /** The device of the first member: every member is on it. */
  device: Device | undefined = undefined;
  /**
   * The key that tells the members' device apart beyond `Device` (a
   * `GPUDevice`: the source's {@linkcode _DEVICE_KEY}).
   */
  deviceKey: object | undefined = undefined;
  /**
   * The key every member's source must have, even while the group is
   * empty: a device's own group (`GpuCachingAllocator.deviceGroup`).
   */
  ownKey: object | undefined = undefined;
  /** The most bytes the members held together after any member's miss. */
  peak = 0;
  /** Segments given back for the group, oldest first. */
  readonly ghosts: _GroupGhost[] = [];
  /** Step marks so far (`CachingGroup.endStep()`). */
  steps = 0;
  /** Segments and bytes given back for the group so far. */
  givenBackSegments = 0;
  givenBackBytes = 0;
  /** Whether a give-back is under way (a source re-entering waits). */
  busy = false;
  /** Misses of any member so far (the group's clock). */
  tick = 0;

  /** At a member's miss: the group's clock moves, activity is noted. */
  observe(): void {
    const t = ++this.tick;
    // (A member's clock counts its requests, hits included: seen at misses
    // only, the hit path stays as it is.)
    for (const [m, s] of this.members) {
      s.emptyMisses = m.stats.activeBytes === 0 ? s.emptyMisses + 1 : 0;
      if (s.seenTick < 0 || s.seenClock !== m.clock) {
        s.seenClock = m.clock;
        s.seenTick = t;
      }
    }
  }

  /** A step mark (`CachingGroup.endStep()`). */
  endStep(): void {
    this.steps++;
    for (const s of this.members.values()) s.marksSeen++;
  }

  /**
   * Whether `m` holds nothing lately: nothing now (no block allocated or
   * waiting for a fence), and it has been a member through a whole step
   * (two marks) or held nothing at each of the group's last
   * `EMPTY_MISSES` misses. A pool of staging copies or uniforms between
   * its uses, whose cached segments wait for the next transfer.
   */
  holdsNothing(m: _Member, s: _MemberState): boolean {
    return m.stats.activeBytes === 0 &&
      ((s.marksSeen >= 2 && !s.keptEmpty) || s.emptyMisses >= s.emptyNeed);
  }

  /** Bytes the members hold together now. */
  held(): number {
    let n = 0;
    for (const m of this.members.keys()) n += m.stats.reservedBytes;
    return n;
  }

  /**
   * At `p`'s miss, before it takes a segment of `segSize` bytes: when that
   * would raise the members' held bytes above the bound, gives back whole
   * free segments of the other members (not `kept`; with `idleTicks`, only
   * of members that made no request in the group's last `idleTicks` misses
   * and are not `keptIdle`, or that hold nothing lately (`holdsNothing`),
   * then not those under 1/`TINY_SHARES` of the excess): the smallest that
   * covers the excess, else the largest first until it is covered. With
   * `idleTicks` 0, a member holding blocks and more than `SIDE_SHARES` times
   * `p`'s bytes with the segment is asked only when idle for
   * `SIDE_IDLE_MISSES` misses.
   */
  makeRoom(p: _Member, segSize: number, idleTicks = 0): void {
    if (this.busy || this.peak === 0) return;
    const excess = this.held() + segSize - this.peak;
    if (excess <= 0) return;
    const mine = p.stats.reservedBytes;
    const whole: [_Member, _Block<unknown>][] = [];
    // the members asked because they hold nothing lately
    let empty: Set<_Member> | null = null;
    for (const [m, s] of this.members) {
      if (m === p || s.kept) continue;
      const idle = idleTicks === 0
        ? m.stats.activeBytes === 0 ||
          m.stats.reservedBytes <= SIDE_SHARES * (mine + segSize) ||
          (!s.keptIdle && s.seenTick <= this.tick - SIDE_IDLE_MISSES)
        : !s.keptIdle && s.seenTick <= this.tick - idleTicks;
      if (!idle) {
        if (!this.holdsNothing(m, s)) continue;
        (empty ??= new Set()).add(m);
      }
      for (const seg of m.segments) {
        const b = seg.head;
        if (
          b.state === FREE && b.next === null && !seg.expandable &&
          (idle || b.size * TINY_SHARES >= excess)
        ) {
          whole.push([m, b]);
        }
      }
    }
    if (whole.length === 0) return;
    // the smallest that covers the excess alone, else the largest first
    whole.sort((x, y) => x[1].size - y[1].size);
    const at = whole.findIndex((w) => w[1].size >= excess);
    const picked = at >= 0 ? [whole[at]] : whole.reverse();
    let freed = 0;
    this.busy = true;
    try {
      for (const [m, b] of picked) {
        if (freed >= excess) break;
        const small = b.segment.small, size = b.size;
        const step = empty !== null && empty.has(m) ? this.steps : -1;
        let ok = false;
        try {
          ok = _releaseSegment(m, b);
        } catch {
          // The source threw: the segment has left the member's books (as
          // its own give-back leaves it); the group asks that member no more
          // (if still one: the source may have taken it out of the group).
          const st = this.members.get(m);
          if (st !== undefined) st.kept = true;
          continue;
        }
        if (!ok) continue;
        freed += size;
        this.givenBackSegments++;
        this.givenBackBytes += size;
        this.ghosts.push({
          member: m,
          small,
          size,
          idle: idleTicks > 0 && step < 0,
          step,
        });
        if (this.ghosts.length > MAX_GHOSTS) this.ghosts.shift();
      }
    } finally {
      this.busy = false;
    }
  }

  /**
   * At `p`'s miss of `size` bytes in its small or large pool: when a
   * segment of `p` given back for the group would have served it (the
   * smallest such), that give-back is regretted, and the group gives back
   * no more of `p`'s segments that way (`kept`, `keptIdle`, `keptEmpty`);
   * one given back for holding nothing only within `STEP_REGRET_MARKS`
   * step marks (later, it is forgotten).
   */
  regret(p: _Member, small: boolean, size: number): void {
    const ghosts = this.ghosts;
    let best = -1;
    for (let i = 0; i < ghosts.length; i++) {
      const g = ghosts[i];
      if (
        g.member === p && g.small === small && g.size >= size &&
        (best < 0 || g.size < ghosts[best].size)
      ) best = i;
    }
    if (best < 0) return;
    const [g] = ghosts.splice(best, 1);
    // (a ghost's member is a member: `remove` forgets its ghosts)
    const st = this.members.get(p)!;
    if (g.step >= 0) {
      if (this.steps - g.step <= STEP_REGRET_MARKS) {
        st.keptEmpty = true;
        // The streak starts again, and must be twice as long (a back-off,
        // not a ban: a session's weights uploaded in bursts while storage
        // grows by exact segments, many misses apart, then idle for good).
        st.emptyMisses = 0;
        st.emptyNeed = Math.min(MAX_EMPTY_MISSES, 2 * st.emptyNeed);
      }
    } else if (g.idle) st.keptIdle = true;
    else st.kept = true;
  }

  /** After a member's miss: the bound follows the held bytes up. */
  afterMiss(): void {
    const h = this.held();
    if (h > this.peak) this.peak = h;
  }

  /** The member `allocator` names (itself or an alias), if still one. */
  memberOf(allocator: object): _Member | undefined {
    const p = this.byAllocator.get(allocator);
    return p !== undefined && this.members.has(p) ? p : undefined;
  }

  /**
   * Takes `p` (the policy of `allocator`) in, or refuses it, changing
   * nothing: another device's, or a member of another group.
   */
  join(
    allocator: object,
    p: _Member,
    deviceKey: object | undefined = _deviceKeyOf(p.source),
  ): void {
    const device = p.source.device;
    if (p.group !== null) {
      throw new InvalidArgumentError(
        `Cannot join a CachingGroup: the allocator is in another group`,
        { name: "group", value: allocator, limit: "one group" },
      );
    }
    if (this.ownKey !== undefined && deviceKey !== this.ownKey) {
      throw new InvalidArgumentError(
        `Cannot join a CachingGroup: it is the own group of another device object, this allocator is on ${device}`,
        { name: "group", value: String(device), limit: "the group's device" },
      );
    }
    if (
      this.device !== undefined &&
      (device.type !== this.device.type || device.index !== this.device.index ||
        deviceKey !== this.deviceKey)
    ) {
      throw new InvalidArgumentError(
        `Cannot join a CachingGroup: its allocators are on ${this.device}${
          deviceKey !== this.deviceKey ? " (another device object)" : ""
        }, this one on ${device}`,
        { name: "group", value: String(device), limit: String(this.device) },
      );
    }
    this.device = device;
    this.deviceKey = deviceKey;
    this.members.set(p, new _MemberState());
    this.byAllocator.set(allocator, p);
    p.group = this;
  }

  /**
   * Forgets a member (and its ghosts); the group's bound stays. A group
   * left empty forgets its device.
   */
  remove(p: _Member): void {
    p.group = null;
    this.members.delete(p);
    for (let i = this.ghosts.length - 1; i >= 0; i--) {
      if (this.ghosts[i].member === p) this.ghosts.splice(i, 1);
    }
    // a group left empty holds no device's allocators: it takes any device's
    if (this.members.size === 0) {
      this.device = undefined;
      this.deviceKey = undefined;
    }
  }
}

/**
 * A segment source's key that tells its device apart where `Device` does
 * not (every `GPUDevice` is `webgpu:0` unless told otherwise): a
 * `GpuSegmentSource` answers its `GPUDevice`.
 */
export const _DEVICE_KEY: symbol = Symbol.for("allot.caching.deviceKey");

/** The device key of `source`, if it has one. */
function _deviceKeyOf(source: object): object | undefined {
  let key: unknown;
  try {
    key = (source as Record<symbol, unknown>)[_DEVICE_KEY];
  } catch {
    return undefined; // a source (a Proxy) that throws for the key has none
  }
  return typeof key === "object" && key !== null ? key : undefined;
}

const cores = new WeakMap<object, _GroupCore>();

/** The state of a `CachingGroup` (made with it). */
export function _groupCore(group: object): _GroupCore | undefined {
  return cores.get(group);
}

/** Gives a new `CachingGroup` its state. */
export function _newGroupCore(group: object): _GroupCore {
  const core = new _GroupCore();
  cores.set(group, core);
  return core;
}
