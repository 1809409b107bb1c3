// The agent-env card: what a service says about itself at `/.well-known/agent-env.json`.
//
// Loosely modeled on an A2A agent card: a name, a description, a version and a list of
// extensions, each named by a URN (`urn:agentenv:<what>/v<N>`) with its params. What
// multienv adds is `paths`: each extension names the HTTP paths of its operations,
// relative to the root of the service that serves the card. That is what lets the
// gateway re-serve a site's card under its own prefix without knowing the extension.
//
// A site server serves its own card, e.g.
//
//   {
//     "name": "shop",
//     "description": "A synthetic web shop",
//     "version": "1",
//     "extensions": [
//       { "uri": "urn:agentenv:website/v1",
//         "params": { "domains": ["shop.test"], "live": false, "allowHosts": [] },
//         "paths": { "ready": "/ready", "session": "/session", "reset": "/reset" } }
//     ]
//   }
//
// and the gateway's card (GET <gateway>/.well-known/agent-env.json) holds its own
// extensions (traffic/v1 when it serves captures) and every site's card whose fetch
// succeeded, with each path prefixed `/svc/<site>`, `basePath` set to that prefix and,
// for a synthetic site, `browsePath` `/website/<site>/`:
//
//   {
//     "name": "multienv-gateway", "version": "1",
//     "extensions": [ { "uri": "urn:agentenv:traffic/v1", "params": {...},
//                       "paths": { "list": "/traffic/v1/captures", "get": "/traffic/v1/captures/{name}" } } ],
//     "sites": { "shop": { "name": "shop", "basePath": "/svc/shop", "browsePath": "/website/shop/",
//                          "extensions": [ { "uri": "urn:agentenv:website/v1", ...,
// "paths": { "ready": "/svc/shop/ready", "session": "/svc/shop/session" } } ] } }
//   }
//
// Unknown keys are kept (a card may say more than this module knows).
import { z } from "zod";

/** Where every service serves its card. */
export const CARD_PATH = "/.well-known/agent-env.json";

/**
 * A website's extension: params `domains`, `live`, `allowHosts`; paths `ready` and, when it has them, `session`
 * (Playwright storage state) and `reset` (`POST`: empties the site's data, so the next episode starts as the
 * deploy left it; answered 2xx once done).
 */
export const WEBSITE_V1_URN = "urn:agentenv:website/v1";

/** The website/v1 operations the runner calls by name. */
export const WEBSITE_OPERATIONS = { ready: "ready", session: "session", reset: "reset" } as const;

export const cardExtensionSchema = z.looseObject({
  uri: z.string().min(1),
  description: z.string().optional(),
  required: z.boolean().optional(),
  params: z.record(z.string(), z.unknown()).optional(),
  /** Operation name -> path, absolute from the service's root (starting with `/`). */
  paths: z.record(z.string(), z.string().startsWith("/")).optional(),
});

export const agentEnvCardSchema = z.looseObject({
  name: z.string().min(1),
  description: z.string().optional(),
  version: z.string().optional(),
  /** The prefix every path of this card already carries; absent (meaning `/`) on the service itself. */
  basePath: z.string().optional(),
  /** A synthetic site's pages, through the gateway. */
  browsePath: z.string().optional(),
  extensions: z.array(cardExtensionSchema),
});

export type CardExtension = z.infer<typeof cardExtensionSchema>;
export type AgentEnvCard = z.infer<typeof agentEnvCardSchema>;

export interface GatewayCard extends AgentEnvCard {
  /** Site name -> that site's own card, re-rooted under `/svc/<site>`. Sites whose card failed are absent. */
  sites: Record<string, AgentEnvCard>;
}

/** The card, when `value` is one; otherwise undefined (a broken card is treated as missing). */
export function parseCard(value: unknown): AgentEnvCard | undefined {
  const result = agentEnvCardSchema.safeParse(value);
  return result.success ? result.data : undefined;
}

/** The card with every extension path and its basePath moved under `prefix` (e.g. `/svc/shop`). */
export function prefixCardPaths(card: AgentEnvCard, prefix: string): AgentEnvCard {
  const root = prefix.replace(/\/+$/, "");
  return {
    ...card,
    basePath: root + (card.basePath ?? ""),
    extensions: card.extensions.map((extension) =>
      extension.paths === undefined
        ? extension
        : {
            ...extension,
            paths: Object.fromEntries(Object.entries(extension.paths).map(([op, path]) => [op, root + path])),
          },
    ),
  };
}

/** The extension of `card` named `uri`, if it declares one. */
export function findExtension(
  card: Pick<AgentEnvCard, "extensions"> | undefined,
  uri: string,
): CardExtension | undefined {
  return card?.extensions.find((extension) => extension.uri === uri);
}
