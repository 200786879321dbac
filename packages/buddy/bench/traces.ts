/**
 * The traces of the buddy benchmark, the same on Deno and Node: the cpu
 * package's log-uniform trace (the headline) and its tensor-shaped one.
 *
 * @module
 */

import {
  logUniformTrace,
  tensorTrace,
  type Trace,
} from "../../cpu/bench/trace.ts";

/**
 * The traces to replay.
 *
 * @param quick Smaller traces for a smoke run.
 * @returns The log-uniform trace, then the tensor-shaped one.
 */
export function benchTraces(quick: boolean): Trace[] {
  return quick
    ? [logUniformTrace(20_000, 300), tensorTrace(40)]
    : [logUniformTrace(200_000, 1000), tensorTrace(1000)];
}
