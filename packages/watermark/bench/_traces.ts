/**
 * The local stress trace of the benchmark, now `@allot/caching/traces`'
 * {@linkcode churnTrace} (log-uniform churn, where single requests reach a
 * fifth of the peak), under its former signature.
 *
 * @module
 */

import {
  type AllocationTrace,
  churnTrace as churn,
} from "@allot/caching/traces";

/**
 * Random churn: log-uniform sizes from 256 bytes to 64 MiB, live bytes kept
 * below 256 MiB by freeing random buffers (and at random).
 *
 * @param allocations Allocations.
 * @param seed PRNG seed.
 * @returns The trace (no warm-up).
 */
export function churnTrace(allocations: number, seed = 3): AllocationTrace {
  return churn({ allocations, seed });
}
