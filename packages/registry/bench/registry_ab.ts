/**
 * In-process A/B of `OwnershipRegistry` register + unregister of one
 * pointer (the benchmark's headline row): the working tree's registry
 * against the registry at a git ref, warm instances, interleaved round by
 * round, process CPU time, paired ratios per round (median and range).
 *
 * Each side runs through a loop compiled on its own (so no loop sees two
 * registry classes, which would make it polymorphic).
 *
 * Run: `deno run -A packages/registry/bench/registry_ab.ts [--ref=main]
 * [--rounds=21] [--pairs=200000]`.
 *
 * @module
 */

import process from "node:process";
import { flag, importAtRef } from "../../../scripts/bench/import_at_ref.ts";
import { OwnershipRegistry } from "../mod.ts";

const ref = flag("ref", "main");
const rounds = Number(flag("rounds", "21"));
const pairs = Number(flag("pairs", "200000"));

function cpuSeconds(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

type Loop = (registry: unknown, pointer: object) => number;

// A loop compiled on its own: its own feedback, one registry class.
function compile(body: string): Loop {
  return new Function(
    "cpuSeconds",
    "pairs",
    "registry",
    "pointer",
    `"use strict";
    const t0 = cpuSeconds();
    ${body}
    return cpuSeconds() - t0;`,
  ).bind(undefined, cpuSeconds, pairs) as Loop;
}

const PAIR = `for (let i = 0; i < pairs; i++) {
  registry.register(pointer);
  registry.unregister(pointer);
}`;
const CUSTOM = `const custom = { kind: "custom", deleter: () => {} };
for (let i = 0; i < pairs; i++) {
  registry.register(pointer, custom);
  registry.unregister(pointer);
}`;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

function summary(xs: number[]): string {
  return `${median(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}-${
    Math.max(...xs).toFixed(2)
  })`;
}

const old = await importAtRef<
  { OwnershipRegistry: typeof OwnershipRegistry }
>(ref, "registry/mod.ts");
for (const [name, body] of [["plain", PAIR], ["custom deleter", CUSTOM]]) {
  const sides: [string, unknown, Loop][] = [
    ["new", new OwnershipRegistry(), compile(body)],
    ["old", new old.OwnershipRegistry(), compile(body)],
  ];
  const one = new Float32Array(16);
  const times = new Map<string, number[]>(sides.map(([n]) => [n, []]));
  for (let r = -2; r < rounds; r++) {
    // Every other round in reverse order: neither side always goes first.
    for (const [side, registry, loop] of r & 1 ? [...sides].reverse() : sides) {
      const t = loop(registry, one);
      if (r >= 0) times.get(side)!.push(t * 1e9 / pairs);
    }
  }
  const tNew = times.get("new")!, tOld = times.get("old")!;
  console.log(
    `register + unregister of one pointer, ${name} (ns of CPU time per pair, median (range) of ${rounds} rounds)`,
  );
  console.log(`  new ${summary(tNew)}  old(${ref}) ${summary(tOld)}`);
  console.log(`  old / new: ${summary(tOld.map((o, i) => o / tNew[i]))}`);
  console.log(
    `  best of each: old / new ${
      (Math.min(...tOld) / Math.min(...tNew)).toFixed(2)
    }`,
  );
}
