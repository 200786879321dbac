import { formatTrace, type TraceEvent } from "../mod.ts";

/**
 * A synthetic trace of about `n` events shaped like a runtime's: steps of
 * layer-tagged allocations freed a few ops later, buffers created on misses,
 * 200 distinct stacks of 12 frames.
 */
export function syntheticTrace(n: number, seed = 1): string {
  let s = seed >>> 0;
  const rnd = () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
  const events: TraceEvent[] = [];
  const live: number[] = [];
  let id = 0, t = 0, stacks = 0;
  const sids: number[] = [];
  while (events.length < n) {
    t += rnd();
    const r = rnd();
    if (r < 0.02) events.push({ t, op: "step", name: `step ${events.length}` });
    else if (r < 0.5 || live.length < 4) {
      let sid: number;
      if (stacks < 200 && rnd() < 0.3) {
        sid = stacks++;
        events.push({
          t,
          op: "stack",
          sid,
          frames: Array.from({ length: 12 }, (_, k) => ({
            at: `fn${sid}_${k} (file:///app/model_${k % 3}.ts:${10 + k}:${
              sid % 80
            })`,
            kind: k < 4 ? "user" as const : "runtime" as const,
          })),
        });
        sids.push(sid);
      } else sid = sids.length ? sids[Math.floor(rnd() * sids.length)] : -1;
      const size = 256 * Math.ceil(2 ** (rnd() * 14));
      events.push({
        t,
        op: "alloc",
        id,
        size,
        usage: 0x8c,
        tag: `layer${Math.floor(rnd() * 24)}`,
        ...(sid >= 0 ? { s: sid } : {}),
      });
      live.push(id++);
    } else {
      const k = Math.floor(rnd() * Math.min(live.length, 8));
      events.push({
        t,
        op: "free",
        id: live.splice(live.length - 1 - k, 1)[0],
      });
    }
  }
  return formatTrace({
    header: { format: "allot-trace", version: 1, source: `synthetic ${n}` },
    events,
  });
}
