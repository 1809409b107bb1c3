import { describe, expect, it } from "vitest";
import { stackConfigSchema } from "../../src/config/schema";

describe("stack config schema", () => {
  it("fills every default of docs/design.md 'Stack config'", () => {
    expect(
      stackConfigSchema.parse({ websites: { shop: { domains: [] } }, computers: { desk: { network: "allow-all" } } }),
    ).toEqual({
      target: "docker",
      captureTraffic: false,
      capture: { fileSizeMb: 20, fileCount: 10 },
      requestLog: true,
      selfTest: true,
      websites: {
        shop: { domains: [], live: false, allowHosts: [], server: { port: 8000 }, settings: {}, secretSettings: {} },
      },
      computers: { desk: { network: "allow-all", routesSites: true, startTabs: [], headful: false } },
    });
    expect(stackConfigSchema.parse({ websites: { s: { domains: [], frontend: {} } } }).websites.s.frontend).toEqual({
      port: 80,
    });
  });

  it("takes requestLog as true, false or its body limit and redacted names, and says what it takes otherwise", () => {
    expect(stackConfigSchema.parse({ requestLog: false }).requestLog).toBe(false);
    expect(stackConfigSchema.parse({ requestLog: { redact: ["X-Api-Key"] } }).requestLog).toEqual({
      bodyLimitBytes: 1024 * 1024,
      redact: ["X-Api-Key"],
    });
    const bad = stackConfigSchema.safeParse({ requestLog: "yes" });
    expect(bad.success).toBe(false);
    expect(bad.error!.issues[0].message).toMatch(/^must be true, false or \{bodyLimitBytes/);
    expect(stackConfigSchema.safeParse({ requestLog: { bodyLimitBytes: -1 } }).success).toBe(false);
    expect(stackConfigSchema.safeParse({ requestLog: { redact: ["a b"] } }).success).toBe(false);
    expect(stackConfigSchema.safeParse({ requestLog: { keep: true } }).success).toBe(false);
  });

  it("refuses unknown keys at every level", () => {
    for (const input of [
      { colour: 1 },
      { websites: { s: { domains: [], colour: 1 } } },
      { websites: { s: { domains: [], server: { colour: 1 } } } },
      { computers: { c: { network: "none", colour: 1 } } },
      { capture: { colour: 1 } },
    ]) {
      expect(stackConfigSchema.safeParse(input).success, JSON.stringify(input)).toBe(false);
    }
  });

  it("refuses ports out of range and settings that are not JSON", () => {
    expect(stackConfigSchema.safeParse({ websites: { s: { domains: [], server: { port: 0 } } } }).success).toBe(false);
    expect(stackConfigSchema.safeParse({ websites: { s: { domains: [], server: { port: 1.5 } } } }).success).toBe(
      false,
    );
    expect(stackConfigSchema.safeParse({ websites: { s: { domains: [], settings: { f: () => 1 } } } }).success).toBe(
      false,
    );
    expect(stackConfigSchema.safeParse({ websites: { s: { domains: [], settings: [1] } } }).success).toBe(false);
  });
});
