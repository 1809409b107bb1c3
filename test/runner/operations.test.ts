// The outputs the runner's `up` takes off the engine's event for the stack resource (src/runner/stack/operations.ts):
// what it keeps, what it masks, and when it leaves them to the CLI. The real engine's side is in the e2e tier.
import type { EngineEvent } from "@pulumi/pulumi/automation";
import { describe, expect, it } from "vitest";
import { outputMapOfEvent, stackOutputsOfEvent } from "../../src/runner/stack/operations";

/** A secret as the engine's events carry it: the signature, and no value. */
const SECRET = { "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", ciphertext: "[secret]" };

function outputsEvent(type: string, op: string, outputs: Record<string, unknown> | undefined): EngineEvent {
  return {
    sequence: 1,
    timestamp: 0,
    resOutputsEvent: {
      metadata: {
        op,
        urn: `urn:pulumi:s::p::${type}::x`,
        type,
        provider: "",
        new: outputs === undefined ? undefined : { outputs },
      },
    },
  } as unknown as EngineEvent;
}

describe("the stack's outputs from its outputs event", () => {
  it("keeps plain values, and masks whole every output that holds a secret, however deep", () => {
    expect(
      outputMapOfEvent({
        gatewayUrl: "http://127.0.0.1:32768",
        computers: { desktop: { network: ["example.org"] } },
        controlToken: SECRET,
        agentTokens: { desktop: SECRET },
      }),
    ).toEqual({
      gatewayUrl: { value: "http://127.0.0.1:32768", secret: false },
      computers: { value: { desktop: { network: ["example.org"] } }, secret: false },
      controlToken: { value: "[secret]", secret: true },
      agentTokens: { value: "[secret]", secret: true },
    });
  });

  it("gives none when a plain output shows [secret]: the engine masked a secret's text in it, which the CLI has", () => {
    expect(
      outputMapOfEvent({ gatewayUrl: "http://127.0.0.1:[secret]/svc/shop/", controlToken: SECRET }),
    ).toBeUndefined();
    expect(outputMapOfEvent({ websites: { shop: { domains: ["[secret].test"] } } })).toBeUndefined();
  });

  it("is read off the stack resource's event alone, and not off a refresh's, which holds the outputs before it", () => {
    expect(stackOutputsOfEvent(outputsEvent("pulumi:pulumi:Stack", "same", { a: 1 }))).toEqual({ a: 1 });
    expect(stackOutputsOfEvent(outputsEvent("pulumi:pulumi:Stack", "create", undefined))).toEqual({});
    expect(stackOutputsOfEvent(outputsEvent("pulumi:pulumi:Stack", "refresh", { a: 0 }))).toBeUndefined();
    expect(stackOutputsOfEvent(outputsEvent("multienv:index:MultiEnv", "same", { a: 1 }))).toBeUndefined();
    expect(stackOutputsOfEvent({ sequence: 1, timestamp: 0 } as EngineEvent)).toBeUndefined();
  });
});
