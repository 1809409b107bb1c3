// The headers that belong to one connection, not to the message: both services drop them at every hop, each
// adding what is its own (the gateway every Proxy-* header, the site proxy its Proxy-Authorization), so the rule of
// which connection-specific header a site may never see is written once.

/**
 * RFC 9110 7.6.1's hop-by-hop headers, RFC 9113 8.2.2's connection-specific ones (Proxy-Connection among them),
 * and HTTP2-Settings, which holds the settings of the one connection an h2c upgrade would switch (RFC 7540 3.2.1):
 * passed on, it would describe a connection it never belonged to. Lower case.
 */
export const CONNECTION_SPECIFIC_HEADERS: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "http2-settings",
]);
