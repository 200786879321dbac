/**
 * Exact byte figures of `CachingAllocator` with its defaults on every recorded
 * real trace, this working tree against a git ref (default `main`), for a
 * change to the hit path that must leave them as they are (issue #15: "byte
 * figures identical on every recorded trace"). Per trace, usage (storage,
 * all buffers) and policy (`@allot/trace`'s queue-order and after-fence
 * caching policies, mock device): peak held bytes and buffers created in one
 * pass, buffers created after the first full step, and over 8 warm passes of
 * one instance the buffers created after the first pass and the peak held.
 * Prints one row per case that differs (all rows with `--all`) and exits
 * with 1 when any differs.
 *
 * Run: `deno run -A packages/caching/bench/trace_bytes_ab.ts [--ref=main] [--only=<part of a trace path>] [--all]`
 *
 * @module
 */

import * as current from "@allot/trace";
import type { PolicyFactory, ReplayOps } from "@allot/trace";
import { flag, importAtRef } from "../../../scripts/bench/import_at_ref.ts";
import {
  recordedTraceNames,
  TRACES_DIR,
} from "../../../scripts/bench/recorded_traces.ts";

/** What this bench uses of an `@allot/trace` module, old or new. */
type TraceModule = Pick<
  typeof current,
  | "allotCachingAfterFencePolicy"
  | "allotCachingQueueOrderPolicy"
  | "parseTrace"
  | "replayOps"
  | "traceOps"
>;

const ref = flag("ref", "main");
const only = flag("only", "");
const all = Deno.args.includes("--all");
const old = await importAtRef<TraceModule>(ref, "trace/mod.ts");

/** Buffers created after the first full step (the second step mark). */
function createdAfterFirstStep(ops: ReplayOps, f: PolicyFactory): number {
  const p = f.create();
  let marks = 0, at = -1;
  for (let i = 0; i < ops.length; i++) {
    const c = ops.code[i];
    if (c === 0) p.alloc(ops.id[i], ops.size[i], ops.usage[i]);
    else if (c === 1) p.free(ops.id[i]);
    else {
      p.sync(c === 2 ? "fence" : "step");
      if (c === 3 && ++marks === 2) at = p.buffersCreated();
    }
  }
  return at < 0 ? 0 : p.buffersCreated() - at;
}

/** 8 warm passes of one instance: buffers after the first, peak held. */
function warmPasses(ops: ReplayOps, f: PolicyFactory): string {
  const p = f.create();
  let afterFirst = 0, peak = 0;
  try {
    for (let pass = 0; pass < 8; pass++) {
      const live = new Set<number>();
      for (let i = 0; i < ops.length; i++) {
        const c = ops.code[i];
        if (c === 0) {
          p.alloc(ops.id[i], ops.size[i], ops.usage[i]);
          live.add(ops.id[i]);
          peak = Math.max(peak, p.heldBytes());
        } else if (c === 1) {
          p.free(ops.id[i]);
          live.delete(ops.id[i]);
        } else p.sync(c === 2 ? "fence" : "step");
      }
      for (const id of live) p.free(id);
      p.sync("step");
      if (pass === 0) afterFirst = p.buffersCreated();
    }
    return `${p.buffersCreated() - afterFirst} / ${peak}`;
  } finally {
    p.dispose?.();
  }
}

/** The figures of one policy on one trace's ops, as one table cell text. */
function figures(m: TraceModule, ops: ReplayOps, f: PolicyFactory): string {
  const r = m.replayOps(ops, { policies: [f], repeat: 1 }).policies[0];
  return `${r.peakHeldBytes} ${r.buffersCreated} ${
    createdAfterFirstStep(ops, f)
  } ${warmPasses(ops, f)}`;
}

console.log(
  `Peak held bytes, buffers created, created after the first step, warm: created after pass 1 / peak held (this tree, ${ref})\n`,
);
console.log(`| trace | usage | policy | this | ${ref} |`);
console.log("|---|---|---|---|---|");
let differ = 0;
for (const name of recordedTraceNames(only)) {
  const data = await Deno.readFile(new URL(name, TRACES_DIR));
  const text = await new Response(
    new Blob([data]).stream().pipeThrough(new DecompressionStream("gzip")),
  ).text();
  for (const usage of ["storage", "all"] as const) {
    for (
      const key of [
        "allotCachingQueueOrderPolicy",
        "allotCachingAfterFencePolicy",
      ] as const
    ) {
      const mine = figures(
        current,
        current.traceOps(current.parseTrace(text), usage),
        current[key],
      );
      const theirs = figures(
        old,
        old.traceOps(old.parseTrace(text), usage),
        old[key],
      );
      if (mine !== theirs) differ++;
      if (mine !== theirs || all) {
        console.log(
          `| ${name.replace(".jsonl.gz", "")} | ${usage} | ${
            current[key].name
          } | ${mine} | ${theirs}${mine === theirs ? "" : " (differs)"} |`,
        );
      }
    }
  }
}
console.log(
  differ === 0 ? `\nidentical to ${ref}` : `\n${differ} cases differ`,
);
if (differ !== 0) Deno.exit(1);
