// Scratch probe: counters per 1,000 ops for 1..4 Workers (not committed).
const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const { SharedHeap } = await import(`${root}/mod.ts`);
const MiB = 1 << 20;
function minflt(): number {
  const s = Deno.readTextFileSync("/proc/self/stat");
  return Number(s.slice(s.lastIndexOf(")") + 2).split(" ")[7]);
}
function sched(): Map<string, [number, number]> {
  const out = new Map<string, [number, number]>();
  for (const e of Deno.readDirSync("/proc/self/task")) {
    try {
      const [run, wait] = Deno.readTextFileSync(
        `/proc/self/task/${e.name}/schedstat`,
      ).split(" ").map(Number);
      out.set(e.name, [run, wait]);
    } catch { /* gone */ }
  }
  return out;
}
const counts = (Deno.args[0] ?? "1,2").split(",").map(Number);
const rounds = Number(Deno.args[1] ?? 3);
const workers = [0, 1, 2, 3].map(() =>
  new Worker(new URL(`file://${root}/bench/_worker.ts`), { type: "module" })
);
function ask(w: Worker, m: unknown): Promise<any> {
  return new Promise((res) => {
    w.onmessage = (e) => res(e.data);
    w.postMessage(m);
  });
}
for (let round = 0; round < rounds; round++) {
  for (const n of counts) {
    const heap = SharedHeap.create(1024 * MiB);
    const sync = new SharedArrayBuffer(8);
    const s = new Int32Array(sync);
    const done = workers.slice(0, n).map((w, i) =>
      ask(w, {
        type: "replay",
        heap: heap.descriptor(),
        operations: 100_000,
        live: 500,
        seed: 42 + i,
        repeats: 5,
        sync,
      })
    );
    while (Atomics.load(s, 1) < n) await new Promise((r) => setTimeout(r, 1));
    const f0 = minflt();
    const s0 = sched();
    const t0 = performance.now();
    Atomics.store(s, 0, 1);
    Atomics.notify(s, 0);
    const rs = await Promise.all(done);
    const wall = performance.now() - t0;
    const f1 = minflt();
    const s1 = sched();
    let cpuNs = 0, waitNs = 0;
    for (const [k, [r, w]] of s1) {
      const b = s0.get(k);
      if (!b) continue;
      const dr = r - b[0];
      if (dr > 20e6) {
        cpuNs += dr;
        waitNs += w - b[1];
      }
    }
    const ops = rs.reduce((a, r) => a + r.ops, 0);
    const per = (k: string) =>
      (rs.reduce((a, r) => a + r.counters[k], 0) / ops * 1000).toFixed(2);
    const hits = rs.reduce((a, r) => a + r.counters.largeHits, 0),
      miss = rs.reduce((a, r) => a + r.counters.largeMisses, 0);
    console.log(
      `n=${n} ${(ops / wall / 1e3).toFixed(2)} Mops/s  per 1k ops: locks ${
        per("locks")
      } waits ${per("lockWaits")} sleeps ${per("lockSleeps")} pagesTaken ${
        per("pagesTaken")
      } pagesRet ${per("pagesReturned")} remote ${per("remoteFrees")} slabs ${
        per("slabsTaken")
      } | large hit rate ${(hits / (hits + miss)).toFixed(3)} (${
        per("largeHits")
      }+${per("largeMisses")}) | minflt/1k ${
        ((f1 - f0) / ops * 1000).toFixed(2)
      } | cpu ns/op ${(cpuNs / ops).toFixed(1)} runq-wait/cpu ${
        (waitNs / cpuNs).toFixed(2)
      } wall ${wall.toFixed(0)}ms`,
    );
    for (const w of workers.slice(0, n)) await ask(w, { type: "detach" });
    heap.detach();
  }
}
for (const w of workers) w.terminate();
