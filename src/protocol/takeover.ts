// A person taking a computer over: the wire contract between the gateway (which holds the agent while a person acts),
// the runner (which takes and hands back with the control token) and an agent (which may ask for a person on its
// own DevTools connection). One place decides which DevTools commands still answer an agent during a takeover.

/** GET: every computer's takeover state (control token required). */
export const TAKEOVERS_PATH = "/takeovers/v1/computers";

/** POST `{operator}`: take the computer; DELETE: hand it back; GET: its state. Control token only. */
export function takeoverPath(computer: string): string {
  return `${TAKEOVERS_PATH}/${encodeURIComponent(computer)}`;
}

/** The agent's command asking for a person: params `{reason: string, timeoutSeconds: number}`. */
export const REQUEST_HUMAN_METHOD = "Multienv.requestHuman";
/** The event an agent's connection gets when a person takes its computer: params TakenOverEvent. */
export const TAKEN_OVER_EVENT = "Multienv.takenOver";
/** The event an agent's connection gets when the person hands its computer back: params HandBackEvent. */
export const HAND_BACK_EVENT = "Multienv.handBack";

/** The CDP error code of a command refused because a person holds the computer (JSON-RPC's server-error range). */
export const TAKEN_OVER_ERROR_CODE = -32001;
/** The CDP error code of a request for a person that no person answered in time. */
export const REQUEST_TIMED_OUT_ERROR_CODE = -32002;

/** The longest an agent may wait for a person, and the default when it names no timeout. */
export const MAX_REQUEST_SECONDS = 3600;
export const DEFAULT_REQUEST_SECONDS = 300;
/** The longest reason kept: what status and watch show, and the evidence records. */
export const MAX_REASON_CHARS = 500;
/** The longest operator name kept. */
export const MAX_OPERATOR_CHARS = 100;

/**
 * How long a take holds the computer unless its holder renews it (`PUT` with its `since`), by default and at most. A
 * holder that dies (a `watch` killed) stops renewing, and the gateway hands the computer back when the hold runs out.
 */
export const DEFAULT_HOLD_SECONDS = 30;
export const MIN_HOLD_SECONDS = 5;
export const MAX_HOLD_SECONDS = 600;

/** Why a takeover ended: its holder handed the computer back, or stopped renewing its hold. */
export type TakeoverEnd = "handed-back" | "hold-expired";

export interface TakeoverHold {
  operator: string;
  /** ISO 8601. */
  since: string;
  /** The agent's reason, when it had asked for a person before this takeover. */
  reason?: string;
  /** ISO 8601: when the gateway hands the computer back unless the holder renews the hold before. */
  expires?: string;
}

export interface HumanRequest {
  id: string;
  reason: string;
  /** ISO 8601. */
  since: string;
  /** ISO 8601: when the agent is answered with a timeout error unless a person took over and handed back. */
  deadline: string;
}

/** One computer's state; both fields absent when the agent runs alone. */
export interface TakeoverState {
  taken?: TakeoverHold;
  request?: HumanRequest;
}

/** GET TAKEOVERS_PATH answers this. */
export interface TakeoverListing {
  computers: Record<string, TakeoverState>;
}

export interface TakenOverEvent {
  computer: string;
  operator: string;
  since: string;
}

export interface HandBackEvent {
  computer: string;
  operator: string;
  since: string;
  /** ISO 8601. */
  until: string;
  /** Why it ended: handed back by the person, or the hold ran out (its holder stopped renewing it). */
  ended: TakeoverEnd;
}

/** The message of a command refused during a takeover: names the takeover and what to do. */
export function takenOverMessage(computer: string, method: string, hold: TakeoverHold): string {
  return (
    `${method} refused: computer ${computer} is taken over by a person (${hold.operator}, since ${hold.since}); ` +
    `reads still answer, and ${HAND_BACK_EVENT} comes when the person hands it back`
  );
}

/**
 * Domains whose `enable` and `disable` only start or stop events about what happens (no effect on the page), and
 * whose `get*` commands only read. Fetch (which pauses requests), Emulation, Input and the like are absent: every one
 * of their commands acts.
 */
const OBSERVING_DOMAINS = new Set([
  "Accessibility",
  "Animation",
  "Browser",
  "CSS",
  "DOM",
  "DOMDebugger",
  "DOMSnapshot",
  "DOMStorage",
  "Inspector",
  "Log",
  "Memory",
  "Network",
  "Overlay",
  "Page",
  "Performance",
  "Runtime",
  "Security",
  "ServiceWorker",
  "Storage",
  "Target",
]);

/** Commands that read or follow targets without acting, beyond OBSERVING_DOMAINS' `get*`, `enable` and `disable`. */
const READ_COMMANDS = new Set([
  "Accessibility.queryAXTree",
  "DOM.describeNode",
  "DOM.querySelector",
  "DOM.querySelectorAll",
  "DOM.requestChildNodes",
  "DOM.resolveNode",
  "DOM.pushNodesByBackendIdsToFrontend",
  "DOMSnapshot.captureSnapshot",
  "Page.captureScreenshot",
  "Page.captureSnapshot",
  "Runtime.releaseObject",
  "Runtime.releaseObjectGroup",
  // Lets a target the browser paused at its start (setAutoAttach's waitForDebuggerOnStart) go on: a tab the person
  // opened must not hang because the agent is held.
  "Runtime.runIfWaitingForDebugger",
  "Target.attachToTarget",
  "Target.attachToBrowserTarget",
  "Target.detachFromTarget",
  "Target.setAutoAttach",
  "Target.setDiscoverTargets",
]);

/**
 * True when an agent's DevTools command still answers while a person holds its computer: it reads (a screenshot, the
 * DOM, the accessibility tree, properties) or follows events and targets. Everything else acts (input, navigation,
 * script, target creation, emulation, interception) and is refused.
 */
export function answersDuringTakeover(method: string): boolean {
  if (READ_COMMANDS.has(method)) return true;
  const dot = method.indexOf(".");
  if (dot <= 0) return false;
  const domain = method.slice(0, dot);
  const command = method.slice(dot + 1);
  if (!OBSERVING_DOMAINS.has(domain)) return false;
  return command === "enable" || command === "disable" || /^get[A-Z]/.test(command);
}
