/**
 * Which byte ranges of which memories a live {@linkcode CpuHeap} manages, so
 * that a second heap over the same bytes is refused. A claim lasts until its
 * heap is disposed or collected (it holds the heap by a `WeakRef`).
 *
 * @module
 */

import { InvalidArgumentError } from "@allot/core";

interface Claim {
  begin: number;
  end: number;
  owner: WeakRef<object>;
}

const claims = new WeakMap<object, Claim[]>();

function live(list: Claim[]): Claim[] {
  return list.filter((c) => c.owner.deref() !== undefined);
}

/**
 * Claims bytes `[begin, end)` of `memory` for `owner`.
 *
 * @throws {InvalidArgumentError} When a live owner claimed any of them.
 */
export function claimMemory(
  memory: object,
  begin: number,
  end: number,
  owner: object,
): void {
  const list = live(claims.get(memory) ?? []);
  for (const c of list) {
    if (begin < c.end && c.begin < end) {
      throw new InvalidArgumentError(
        `Invalid memory: bytes [${begin}, ${end}) overlap bytes [${c.begin}, ${c.end}) that another live CpuHeap manages (dispose it first)`,
        { name: "memory", value: memory, limit: c.begin },
      );
    }
  }
  list.push({ begin, end, owner: new WeakRef(owner) });
  claims.set(memory, list);
}

/** Gives back every claim of `owner` on `memory`. */
export function releaseMemory(memory: object, owner: object): void {
  const list = claims.get(memory);
  if (list === undefined) return;
  claims.set(memory, live(list).filter((c) => c.owner.deref() !== owner));
}
