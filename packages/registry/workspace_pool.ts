/**
 * {@linkcode WorkspacePool}: one preallocated scratch array per worker rank.
 *
 * @module
 */

import {
  InvalidArgumentError,
  UseAfterFreeError,
  validateInteger,
} from "@allot/core";
import type { Dtype, TypedArrayOf } from "@allot/storage";
import {
  type NewArrayOptions,
  OwnershipRegistry,
} from "./ownership_registry.ts";
import { checkInstance, describeValue, readOptions } from "./_describe.ts";

/** Options of {@linkcode WorkspacePool}. */
export interface WorkspacePoolOptions extends NewArrayOptions {
  /**
   * Number of ranks (workers, or tasks running at once): one workspace each.
   *
   * @default {1}
   */
  ranks?: number;
}

/**
 * SCL's `WorkspacePool`: one scratch array per rank, allocated once through
 * an {@linkcode OwnershipRegistry}, reused across every iteration of a loop,
 * and released together. `get(rank)` allocates nothing.
 *
 * With `shared: true` the workspaces live in `SharedArrayBuffer`s, so rank
 * `r` can be handed to Worker `r` once and reused there.
 *
 * @typeParam D The dtype.
 *
 * @example Reuse scratch memory across a loop
 * ```ts
 * import { OwnershipRegistry, WorkspacePool } from "@allot/registry";
 * import assert from "node:assert/strict";
 *
 * using registry = new OwnershipRegistry();
 * {
 *   using pool = new WorkspacePool(registry, "f64", 1024, { ranks: 4 });
 *   for (let i = 0; i < 100; i++) {
 *     const scratch = pool.get(i % pool.ranks);
 *     scratch[0] = i;
 *   }
 *   assert.equal(registry.pointerCount, 4);
 * }
 * assert.equal(registry.pointerCount, 0);
 * ```
 */
export class WorkspacePool<D extends Dtype> {
  #registry: OwnershipRegistry;
  #workspaces: TypedArrayOf<D>[];
  #length: number;
  #released = false;

  /**
   * Allocates one workspace of `length` elements per rank.
   *
   * @param registry The registry that owns the workspaces.
   * @param dtype Element type.
   * @param length Elements per workspace.
   * @param options Ranks, and options passed to `newArray`.
   * @throws {InvalidArgumentError} For a registry that is not an
   * `OwnershipRegistry`, a bad rank count, dtype, length or option;
   * nothing stays allocated.
   */
  constructor(
    registry: OwnershipRegistry,
    dtype: D,
    length: number,
    options: WorkspacePoolOptions = {},
  ) {
    checkInstance(registry, OwnershipRegistry, "registry");
    // Read once: every rank gets the same options even from lying getters.
    const read = readOptions(options, [
      "ranks",
      "shared",
      "alignment",
      "allocator",
    ], "WorkspacePool");
    if (read.problem !== undefined) {
      throw new InvalidArgumentError(`Cannot make a pool: ${read.problem}`, {
        name: "options",
        value: options,
        limit: "WorkspacePoolOptions",
      });
    }
    const rankOption = read.values.ranks === undefined ? 1 : read.values.ranks;
    if (typeof rankOption !== "number") {
      throw new InvalidArgumentError(
        `Invalid ranks: must be an integer in [1, 65536], received ${
          describeValue(rankOption)
        }`,
        { name: "ranks", value: rankOption, limit: [1, 65536] },
      );
    }
    const ranks = validateInteger(rankOption, 1, 65536, "ranks");
    const once: NewArrayOptions = {
      shared: read.values.shared as boolean | undefined,
      alignment: read.values.alignment as number | undefined,
      allocator: read.values.allocator as NewArrayOptions["allocator"],
    };
    this.#registry = registry;
    this.#length = length;
    this.#workspaces = [];
    try {
      for (let r = 0; r < ranks; r++) {
        this.#workspaces.push(registry.newArray(dtype, length, once));
      }
    } catch (error) {
      for (const w of this.#workspaces) registry.unregister(w);
      throw error;
    }
  }

  /** Number of ranks. */
  get ranks(): number {
    return this.#workspaces.length;
  }

  /** Elements per workspace. */
  get length(): number {
    return this.#length;
  }

  /**
   * The workspace of a rank; allocates nothing.
   *
   * @param rank A rank in `[0, ranks)`.
   * @returns That rank's array.
   * @throws {InvalidArgumentError} When the rank is out of range.
   * @throws {UseAfterFreeError} After `release()`, or after the registry's
   * `dispose()` (which freed the workspaces).
   */
  get(rank: number): TypedArrayOf<D> {
    if (this.#released || this.#registry.disposed) {
      throw new UseAfterFreeError(
        `Cannot get workspace ${describeValue(rank)}: the ${
          this.#released ? "pool was released" : "registry was disposed"
        }`,
      );
    }
    const w = typeof rank === "number" && Number.isInteger(rank)
      ? this.#workspaces[rank]
      : undefined;
    if (w === undefined) {
      throw new InvalidArgumentError(
        `Invalid rank: must be an integer in [0, ${
          this.#workspaces.length - 1
        }], received ${describeValue(rank)}`,
        { name: "rank", value: rank, limit: [0, this.#workspaces.length - 1] },
      );
    }
    return w;
  }

  /** Whether `release()` has run. */
  get released(): boolean {
    return this.#released;
  }

  /** Unregisters (frees) every workspace; later calls do nothing. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    if (this.#registry.disposed) return; // dispose() already freed them
    for (const w of this.#workspaces) this.#registry.tryUnregister(w);
  }

  /** Same as {@linkcode WorkspacePool.release}, for `using`. */
  [Symbol.dispose](): void {
    this.release();
  }
}
