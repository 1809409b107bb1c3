// The synthetic shop's server: its card, a small data plane, /ready, /reset, and /echo (the request's
// headers back, so a test can prove what reached a site, e.g. that no control token did). The setting
// `declareReset: false` leaves `reset` out of its card, as a site without one would (a reset then restarts it).
import { CARD_PATH, WEBSITE_V1_URN } from "../../../src/protocol/card";
import {
  dataPlane,
  listenPort,
  resetOperation,
  sendJson,
  serve,
  stringList,
  websiteDomains,
  websiteSettings,
} from "../common/http";

const settings = websiteSettings();
/** The names its card declares: its `domains` setting when it has one, else those the stack gives it. */
const domains = settings.domains === undefined ? websiteDomains() : stringList(settings.domains);
const data = dataPlane();

serve(listenPort(8000), async (req, res) => {
  const path = new URL(req.url ?? "/", "http://site").pathname;
  if (path === CARD_PATH) {
    return sendJson(res, 200, {
      name: typeof settings.name === "string" ? settings.name : "shop",
      description: "A synthetic web shop (multienv sample site)",
      version: "1",
      extensions: [
        {
          uri: WEBSITE_V1_URN,
          params: { domains, live: false, allowHosts: [] },
          paths: { ready: "/ready", ...(settings.declareReset === false ? {} : { reset: "/reset" }) },
        },
      ],
    });
  }
  if (path === "/ready") return sendJson(res, 200, { ready: true });
  if (path === "/data") return data.handle(req, res);
  if (path === "/reset") return resetOperation(req, res, data.reset);
  if (path === "/echo") return sendJson(res, 200, { method: req.method, url: req.url, headers: req.headers });
  if (path === "/settings") return sendJson(res, 200, settings);
  sendJson(res, 404, { error: `no such path: ${path}` });
});
