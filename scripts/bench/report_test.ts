import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type BenchReport,
  formatNumber,
  renderReport,
  renderScenario,
  validateScenarios,
} from "./report.ts";
import type { Scenario } from "./types.ts";

const scenario: Scenario = {
  package: "cpu",
  scenario: "alloc/free, 1000 live",
  unit: "ops/s",
  higherIsBetter: true,
  rows: [
    { name: "allot CpuHeap", value: 12_345_678.9, ours: true },
    { name: "new ArrayBuffer", value: 98_765.4, note: "zero-fills" },
  ],
  ratios: [
    {
      label: "CpuHeap / new ArrayBuffer",
      value: 125,
      target: ">= 100",
      met: true,
    },
    { label: "CpuHeap / TLSF", value: 0.8, target: ">= 1.5", met: false },
  ],
  notes: ["median of 5 runs"],
};

const report: BenchReport = {
  environment: {
    date: "2026-11-22T03:00:00.000Z",
    mode: "full",
    cpu: "Test CPU",
    cores: 2,
    memoryBytes: 8 * 2 ** 30,
    os: "linux 6 x86_64",
    deno: "2.9.5",
    v8: "15.0",
    typescript: "6.0.3",
    command: "deno task bench",
  },
  scenarios: [scenario],
  failures: [{ package: "buddy", error: "exited with code 1\nError: kaput" }],
  seconds: { cpu: 12.5 },
};

describe("formatNumber()", () => {
  it("formatNumber() keeps three significant digits and groups thousands", () => {
    assert.equal(formatNumber(12_345_678.9), "12,345,679");
    assert.equal(formatNumber(3.14159), "3.14");
    assert.equal(formatNumber(0.000123456), "0.000123");
    assert.equal(formatNumber(0), "0");
    assert.equal(formatNumber(Infinity), "Infinity");
  });
});

describe("validateScenarios()", () => {
  it("validateScenarios() accepts a well-formed scenario list", () => {
    assert.deepEqual(validateScenarios([scenario]), []);
  });

  it("validateScenarios() names what is missing", () => {
    assert.deepEqual(validateScenarios("nope"), [
      "run() did not return an array",
    ]);
    const problems = validateScenarios([{ scenario: "x", rows: [] }]);
    assert.ok(problems.some((p) => p.includes("no string package")));
    assert.ok(problems.some((p) => p.includes("no boolean higherIsBetter")));
    assert.ok(problems.some((p) => p.includes("no rows")));
    assert.ok(
      validateScenarios([{ ...scenario, rows: [{ name: "a", value: "1" }] }])
        .some((p) => p.includes("numeric value")),
    );
  });
});

describe("renderScenario()", () => {
  it("renderScenario() prints figures, ratios with targets, and notes", () => {
    const text = renderScenario(scenario);
    assert.match(text, /^### cpu: alloc\/free, 1000 live/);
    assert.match(text, /\| \*\*allot CpuHeap\*\* +\| +12,345,679 \|/);
    assert.match(text, /\| new ArrayBuffer +\| +98,765 \| zero-fills \|/);
    assert.match(
      text,
      /CpuHeap \/ new ArrayBuffer +\| +125\.00x \| >= 100 +\| yes/,
    );
    assert.match(text, /CpuHeap \/ TLSF +\| +0\.80x \| >= 1\.5 +\| \*\*no\*\*/);
    assert.match(text, /- median of 5 runs/);
  });
});

describe("renderReport()", () => {
  it("renderReport() states the machine, the summary of targets and the failures", () => {
    const text = renderReport(report);
    assert.match(text, /Machine: Test CPU, 2 logical cores, 8\.0 GiB/);
    assert.match(text, /Runtime: Deno 2\.9\.5, V8 15\.0, TypeScript 6\.0\.3/);
    assert.match(text, /### Summary: 1 of 2 targets met/);
    assert.match(text, /## @allot\/cpu \(12\.5 s\)/);
    assert.match(
      text,
      /- buddy: exited with code 1\n\n {2}```\n {2}Error: kaput/,
    );
    assert.doesNotMatch(text, /quick run/);
  });

  it("renderReport() marks a quick run as not comparable", () => {
    const quick = renderReport({
      ...report,
      environment: { ...report.environment, mode: "quick" },
    });
    assert.match(quick, /This is a quick run/);
  });
});
