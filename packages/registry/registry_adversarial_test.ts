/**
 * Adversarial tests of `Registry`'s lookup and factory surface (`get`,
 * `tryGet`, `priorityOf`, `delete`, `storage`, `buffer`) from the public
 * API: hostile device targets, sizes and shapes are refused with typed
 * errors, and neither the registry's entries nor the allocator change.
 */
import { after, describe, it } from "node:test";
import { Device } from "@allot/core";
import { Registry } from "./mod.ts";
import {
  assertRefusesAll,
  type Hostile,
  hostileNumbers,
  hostileObjects,
  HostileTally,
} from "../core/_test_hostile.ts";
import { FirstFitAllocator } from "../core/_test_faults.ts";

const tally = new HostileTally();

describe("Registry adversarial", () => {
  after(() => {
    console.log(
      `registry adversarial: ${tally.entryPoints} entry points, ${tally.calls} hostile calls`,
    );
  });

  it("Registry lookups and factories refuse hostile targets, sizes and shapes, changing nothing", () => {
    const registry = new Registry();
    const allocator = new FirstFitAllocator(Device.cpu(), 1 << 16);
    registry.set("cpu", allocator);
    const state = () => [
      JSON.stringify(registry.entries().map((e) => [e.target, e.priority])),
      allocator.live.size,
    ];
    const targets: Hostile[] = [
      ...hostileObjects().filter((h) => h.name !== '"abc"'),
      { name: '"CPU"', value: "CPU" },
      { name: '"cpu:-1"', value: "cpu:-1" },
      { name: '"cpu:x"', value: "cpu:x" },
      { name: '"cpu:70000"', value: "cpu:70000" },
    ];
    for (
      const [name, call] of [
        ["get", (v: unknown) => registry.get(v as "cpu")],
        ["tryGet", (v: unknown) => registry.tryGet(v as "cpu")],
        ["priorityOf", (v: unknown) => registry.priorityOf(v as "cpu")],
        ["delete", (v: unknown) => registry.delete(v as "cpu")],
        [
          "storage(options.device)",
          (v: unknown) => registry.storage(8, { device: v as "cpu" }),
        ],
      ] as const
    ) {
      tally.add(
        `Registry.${name}`,
        assertRefusesAll(`Registry.${name}`, targets, call, {
          snapshot: state,
          skip: name === "storage(options.device)" ? ["undefined", "null"] : [],
        }),
      );
    }
    tally.add(
      "Registry.storage(byteLength)",
      assertRefusesAll(
        "Registry.storage(byteLength)",
        hostileNumbers(),
        (v) => registry.storage(v as number),
        { snapshot: state },
      ),
    );
    tally.add(
      "Registry.buffer(shape)",
      assertRefusesAll(
        "Registry.buffer(shape)",
        [
          ...hostileObjects().filter((h) => h.name !== "[]"),
          ...hostileNumbers().map((h) => ({
            name: `[${h.name}]`,
            value: [h.value],
          })).filter((h) => h.name !== "[[8]]" && h.name !== "[new Number(8)]"),
        ],
        (v) => registry.buffer("f32", v as number[]),
        { snapshot: state },
      ),
    );
    tally.add(
      "Registry.buffer(device)",
      assertRefusesAll(
        "Registry.buffer(device)",
        [...targets.filter((h) => h.value != null), {
          name: '"webgpu"',
          value: "webgpu",
        }],
        (v) => registry.buffer("f32", [2], { device: v as "cpu" }),
        { snapshot: state },
      ),
    );
  });
});
