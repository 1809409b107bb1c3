// What run.json keeps of a person's takeover (written by takeovers.ts): who, when, the agent's reason, and the
// person's inputs without their text.
import type { TakeoverEnd } from "../../protocol/takeover";

/** The element under a pointer, as the evidence names it: never its value. */
export interface PointerTarget {
  tag: string;
  id?: string;
  name?: string;
  type?: string;
}

/** What the evidence keeps of one of the person's inputs. */
export type PersonInputRecord =
  | { at: string; kind: "pointer"; action: "down" | "up"; button: string; x: number; y: number; target?: PointerTarget }
  | { at: string; kind: "wheel"; x: number; y: number; deltaX: number; deltaY: number }
  | { at: string; kind: "navigate"; host: string }
  /** The person brought another tab to the front: the host it showed (its URL's; empty for a blank tab). */
  | { at: string; kind: "tab"; host: string };

/** One takeover as run.json and the episode's record keep it. */
export interface TakeoverRecord {
  computer: string;
  operator: string;
  /** The agent's reason, when it had asked for a person. */
  reason?: string;
  start: string;
  /**
   * When it ended. While it is under way, the end of its hold (`ended: "hold-expired"`): the record is rewritten at
   * each renewal, so the record a killed `watch` leaves says when the gateway handed the computer back.
   */
  end: string;
  /** Handed back by the person (or the page closing), or its hold ran out unrenewed. Absent in older records. */
  ended?: TakeoverEnd;
  /** Pointer presses and releases (in the tab's CSS pixels), wheel turns and navigations (their host), in order. */
  inputs: PersonInputRecord[];
  /** Pointer moves, counted. */
  pointerMoves: number;
  /** Key presses (key-down events), counted; what they typed is not kept. */
  keys: number;
  /** Pastes and the characters they held, counted; the text is not kept. */
  pastes: number;
  pastedChars: number;
  /** The episode under way when it began. */
  episode?: number;
}
