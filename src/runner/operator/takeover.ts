// A person's part of a takeover in `watch`: what the watch page may send (checked here, field by field, before any of
// it reaches a computer), how it becomes DevTools input on the screencast's own tab, and what is kept of it as
// evidence. The person's inputs go to the tab whose frames the page shows, at coordinates relative to that frame, so
// nothing a site draws (a fake address bar, another tab's picture) can send them elsewhere. The evidence keeps pointer
// events with their coordinates and the element under them (tag, id, name, type: never a value), counts key events,
// and keeps no typed or pasted text.
import type { CDPSession } from "playwright-core";
import { GatewayClient, GatewayRequestError } from "../../protocol/gateway-client";
import type { TakeoverHold, TakeoverListing } from "../../protocol/takeover";
import type { PointerTarget, TakeoverRecord } from "../evidence/takeover-record";

export type { TakeoverRecord } from "../evidence/takeover-record";

export type PersonInput =
  | {
      kind: "pointer";
      action: "down" | "up" | "move";
      /** Fractions of the frame's width and height, 0 to 1. */
      x: number;
      y: number;
      button: "left" | "middle" | "right" | "none";
      clickCount: number;
      modifiers: number;
    }
  | { kind: "wheel"; x: number; y: number; deltaX: number; deltaY: number; modifiers: number }
  | { kind: "key"; action: "down" | "up"; key: string; code: string; text?: string; modifiers: number }
  | { kind: "paste"; text: string }
  | { kind: "navigate"; url: string }
  /** Brings a tab to the front: one of those the page lists (the feed's `tabs`), by its DevTools target id. */
  | { kind: "tab"; targetId: string };

/** The longest paste taken. */
export const MAX_PASTE_CHARS = 16_384;

const fraction = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v) && v >= 0 && v <= 1;
const small = (v: unknown, limit: number): v is number =>
  typeof v === "number" && Number.isFinite(v) && Math.abs(v) <= limit;
const word = (v: unknown, limit: number): v is string => typeof v === "string" && v.length <= limit;

/** A viewer's input, or undefined when it is not one the page sends (dropped, never passed on in part). */
export function personInput(value: unknown): PersonInput | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const v = value as Record<string, unknown>;
  const modifiers = v.modifiers ?? 0;
  if (!(Number.isInteger(modifiers) && (modifiers as number) >= 0 && (modifiers as number) <= 15)) return undefined;
  const m = modifiers as number;
  switch (v.kind) {
    case "pointer":
      if (!["down", "up", "move"].includes(v.action as string) || !fraction(v.x) || !fraction(v.y)) return undefined;
      if (!["left", "middle", "right", "none"].includes((v.button ?? "none") as string)) return undefined;
      if (![0, 1, 2, 3].includes((v.clickCount ?? 1) as number)) return undefined;
      return {
        kind: "pointer",
        action: v.action as "down" | "up" | "move",
        x: v.x,
        y: v.y,
        button: (v.button ?? "none") as "left" | "middle" | "right" | "none",
        clickCount: (v.clickCount ?? 1) as number,
        modifiers: m,
      };
    case "wheel":
      if (!fraction(v.x) || !fraction(v.y) || !small(v.deltaX, 10_000) || !small(v.deltaY, 10_000)) return undefined;
      return { kind: "wheel", x: v.x, y: v.y, deltaX: v.deltaX, deltaY: v.deltaY, modifiers: m };
    case "key":
      if (!["down", "up"].includes(v.action as string) || !word(v.key, 32) || !word(v.code, 32)) return undefined;
      if (v.text !== undefined && !(word(v.text, 2) && v.text.length > 0)) return undefined;
      return {
        kind: "key",
        action: v.action as "down" | "up",
        key: v.key,
        code: v.code,
        ...(v.text !== undefined ? { text: v.text as string } : {}),
        modifiers: m,
      };
    case "paste":
      return word(v.text, MAX_PASTE_CHARS) && v.text.length > 0 ? { kind: "paste", text: v.text } : undefined;
    case "navigate": {
      if (!word(v.url, 4096) || !URL.canParse(v.url)) return undefined;
      const protocol = new URL(v.url).protocol;
      return protocol === "http:" || protocol === "https:" ? { kind: "navigate", url: v.url } : undefined;
    }
    case "tab":
      // Chromium's target ids: 32 hex digits. Whether it is one of the computer's tabs is the feed's check.
      return typeof v.targetId === "string" && /^[0-9A-Fa-f]{32}$/.test(v.targetId)
        ? { kind: "tab", targetId: v.targetId }
        : undefined;
    default:
      return undefined;
  }
}

/** Windows virtual key codes DevTools needs for keys that edit or move rather than type. */
const KEY_CODES: Record<string, number> = {
  Backspace: 8,
  Tab: 9,
  Enter: 13,
  Escape: 27,
  PageUp: 33,
  PageDown: 34,
  End: 35,
  Home: 36,
  ArrowLeft: 37,
  ArrowUp: 38,
  ArrowRight: 39,
  ArrowDown: 40,
  Delete: 46,
};

/** The frame the page shows: its size in the tab's CSS pixels (the screencast's metadata). */
export interface FrameSize {
  width: number;
  height: number;
}

async function targetAt(session: CDPSession, x: number, y: number): Promise<PointerTarget | undefined> {
  try {
    const { backendNodeId } = await session.send("DOM.getNodeForLocation", { x, y, includeUserAgentShadowDOM: false });
    const { node } = await session.send("DOM.describeNode", { backendNodeId });
    const attributes: Record<string, string> = {};
    for (let i = 0; i + 1 < (node.attributes ?? []).length; i += 2)
      attributes[node.attributes![i]] = node.attributes![i + 1];
    return {
      tag: node.nodeName.toLowerCase(),
      ...(attributes.id !== undefined ? { id: attributes.id.slice(0, 100) } : {}),
      ...(attributes.name !== undefined ? { name: attributes.name.slice(0, 100) } : {}),
      ...(attributes.type !== undefined ? { type: attributes.type.slice(0, 30) } : {}),
    };
  } catch {
    return undefined;
  }
}

/**
 * Sends `input` to the screencast's tab (`session`) as DevTools input; answers what the evidence keeps of it, or
 * undefined for what is only counted (`record` counts it).
 */
export async function dispatchPersonInput(
  session: CDPSession,
  frame: FrameSize,
  input: PersonInput,
  record: TakeoverRecord,
): Promise<void> {
  const at = new Date().toISOString();
  switch (input.kind) {
    case "pointer": {
      const x = Math.round(input.x * frame.width);
      const y = Math.round(input.y * frame.height);
      const type = input.action === "down" ? "mousePressed" : input.action === "up" ? "mouseReleased" : "mouseMoved";
      const target = input.action === "move" ? undefined : await targetAt(session, x, y);
      await session.send("Input.dispatchMouseEvent", {
        type,
        x,
        y,
        button: input.button,
        clickCount: input.action === "move" ? 0 : input.clickCount,
        modifiers: input.modifiers,
      });
      if (input.action === "move") record.pointerMoves++;
      else
        record.inputs.push({
          at,
          kind: "pointer",
          action: input.action,
          button: input.button,
          x,
          y,
          ...(target ? { target } : {}),
        });
      return;
    }
    case "wheel": {
      const x = Math.round(input.x * frame.width);
      const y = Math.round(input.y * frame.height);
      await session.send("Input.dispatchMouseEvent", {
        type: "mouseWheel",
        x,
        y,
        deltaX: input.deltaX,
        deltaY: input.deltaY,
        modifiers: input.modifiers,
      });
      record.inputs.push({ at, kind: "wheel", x, y, deltaX: input.deltaX, deltaY: input.deltaY });
      return;
    }
    case "key": {
      const code = KEY_CODES[input.key];
      const text = input.key === "Enter" ? "\r" : input.text;
      await session.send("Input.dispatchKeyEvent", {
        type: input.action === "up" ? "keyUp" : text !== undefined ? "keyDown" : "rawKeyDown",
        key: input.key,
        code: input.code,
        modifiers: input.modifiers,
        ...(input.action === "down" && text !== undefined ? { text, unmodifiedText: text } : {}),
        ...(code !== undefined ? { windowsVirtualKeyCode: code, nativeVirtualKeyCode: code } : {}),
      });
      if (input.action === "down") record.keys++;
      return;
    }
    case "paste":
      await session.send("Input.insertText", { text: input.text });
      record.pastes++;
      record.pastedChars += input.text.length;
      return;
    case "navigate":
      await session.send("Page.navigate", { url: input.url });
      record.inputs.push({ at, kind: "navigate", host: new URL(input.url).host });
      return;
    case "tab":
      // The browser's, not the tab's: the feed switches tabs itself (computerFeed's act).
      throw new Error("a tab switch is the feed's to make, not the tab's");
  }
}

/** The gateway's takeover operations, with the control token. */
export interface TakeoverGateway {
  /** Takes `computer` for `holdSeconds` unless renewed (default the gateway's). */
  take(computer: string, operator: string, holdSeconds?: number): Promise<TakeoverHold>;
  /** Renews the hold of the takeover begun at `since`; rejects with `TakeoverOver` when it is over. */
  renew(computer: string, since: string, holdSeconds?: number): Promise<TakeoverHold>;
  handBack(computer: string): Promise<void>;
  states(): Promise<TakeoverListing>;
}

/** A renewal refused: the takeover was handed back or its hold ran out. */
export class TakeoverOver extends Error {}

export function takeoverGateway(gatewayUrl: string, controlToken: string): TakeoverGateway {
  const gateway = new GatewayClient(gatewayUrl, controlToken);
  return {
    take: (computer, operator, holdSeconds) => gateway.take(computer, operator, holdSeconds),
    async renew(computer, since, holdSeconds) {
      try {
        return await gateway.renew(computer, since, holdSeconds);
      } catch (error) {
        if (error instanceof GatewayRequestError && error.status === 409) throw new TakeoverOver(error.message);
        throw error;
      }
    },
    handBack: (computer) => gateway.handBack(computer),
    states: () => gateway.takeovers(),
  };
}
