// The OpenAPI document `multienv serve` answers at /v1/openapi.json: its routes, bodies and answers.
const claim = {
  type: "object",
  required: ["id", "episode", "stack", "expiresAt", "computers"],
  properties: {
    id: { type: "string", description: "renews and releases the claim; keep it secret" },
    episode: { type: "string", description: "the episode; its evidence goes to artifacts/<task>/episodes/<episode>/" },
    stack: { type: "string" },
    expiresAt: { type: "string", format: "date-time" },
    computers: {
      type: "object",
      additionalProperties: {
        type: "object",
        required: ["cdpUrl", "agentToken", "startTabs"],
        properties: {
          cdpUrl: {
            type: "string",
            description: "DevTools through the gateway; send Authorization: Bearer <agentToken>",
          },
          agentToken: { type: "string" },
          startTabs: { type: "array", items: { type: "string" } },
        },
      },
    },
  },
};
const pool = {
  type: "object",
  properties: Object.fromEntries(
    ["size", "ready", "claimed", "resetting", "failed", "deploying", "waiting"].map((k) => [k, { type: "integer" }]),
  ),
};
const error = { type: "object", required: ["error"], properties: { error: { type: "string" } } };
const json = (schema: unknown) => ({ "application/json": { schema } });

export const OPENAPI = {
  openapi: "3.1.0",
  info: { title: "multienv serve", version: "1", description: "Warm pools of task envs: claim, renew, release." },
  servers: [{ url: "http://127.0.0.1:7878" }],
  components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
  security: [{ bearer: [] }],
  paths: {
    "/v1/claims": {
      post: {
        summary: "claim a ready env of a task, waiting up to waitSeconds in arrival order",
        requestBody: {
          required: true,
          content: json({
            type: "object",
            required: ["task"],
            additionalProperties: false,
            properties: {
              task: { type: "string" },
              ttlSeconds: { type: "integer", minimum: 1, default: 600 },
              waitSeconds: { type: "number", minimum: 0, maximum: 600, default: 0 },
            },
          }),
        },
        responses: {
          "201": { description: "claimed", content: json(claim) },
          "400": { description: "a bad field, named", content: json(error) },
          "503": {
            description: "no env was ready within waitSeconds; Retry-After set",
            content: json({ ...error, properties: { ...error.properties, pool } }),
          },
        },
      },
    },
    "/v1/claims/{id}/renew": {
      post: {
        summary: "extend a claim to ttlSeconds from now",
        parameters: [{ name: "id", in: "path", required: true, schema: { type: "string" } }],
        requestBody: { content: json({ type: "object", properties: { ttlSeconds: { type: "integer", minimum: 1 } } }) },
        responses: {
          "200": { description: "renewed", content: json({ type: "object", properties: { id: {}, expiresAt: {} } }) },
          "404": { description: "not held (released or taken back)", content: json(error) },
        },
      },
    },
    "/v1/claims/{id}": {
      delete: {
        summary: "release: the episode collected (unless collect=false), the env reset, then ready again",
        parameters: [
          { name: "id", in: "path", required: true, schema: { type: "string" } },
          { name: "collect", in: "query", schema: { type: "boolean", default: true } },
        ],
        responses: { "202": { description: "released; the env is resetting" }, "404": { description: "not held" } },
      },
    },
    "/v1/pools": {
      get: {
        summary: "every pool's counts and how many envs admission allows",
        responses: {
          "200": {
            description: "the pools",
            content: json({
              type: "object",
              properties: {
                pools: {
                  type: "array",
                  items: {
                    ...pool,
                    properties: {
                      ...pool.properties,
                      task: { type: "string" },
                      admits: { type: ["integer", "null"] },
                    },
                  },
                },
              },
            }),
          },
        },
      },
    },
    "/v1/openapi.json": { get: { summary: "this document", responses: { "200": { description: "OpenAPI 3.1" } } } },
  },
} as const;
