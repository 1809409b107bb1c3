// A live site's server (e.g. for github.com): its card, a data plane, /ready and /session.
// It serves no pages: the browser reaches the real site's pages straight through its proxy.
// /session answers Playwright storage state built from its settings: the signed-in `account` as the
// `user_session` cookie on `sessionDomain` (its subdomains included), e.g.
//   AGENTENV_WEBSITE_SETTINGS={"account":"alex","sessionDomain":"github.com"}
import { CARD_PATH, WEBSITE_V1_URN } from "../../../src/protocol/card";
import { SESSION_PATH } from "../../../src/protocol/session";
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

/** The sample is github.com's fixture: its session cookie goes there unless the settings say otherwise. */
const SESSION_DOMAIN = typeof settings.sessionDomain === "string" ? settings.sessionDomain : "github.com";

function storageState(): { cookies: unknown[]; origins: unknown[] } {
  if (typeof settings.account !== "string") return { cookies: [], origins: [] };
  return {
    cookies: [
      {
        name: "user_session",
        value: settings.account,
        domain: `.${SESSION_DOMAIN}`,
        path: "/",
        expires: -1,
        httpOnly: true,
        secure: true,
        sameSite: "Lax",
      },
    ],
    origins: [],
  };
}

serve(listenPort(8000), async (req, res) => {
  const path = new URL(req.url ?? "/", "http://site").pathname;
  if (path === CARD_PATH) {
    return sendJson(res, 200, {
      name: typeof settings.name === "string" ? settings.name : "live",
      description: "A live site's server (multienv sample): data plane and session, no pages",
      version: "1",
      extensions: [
        {
          uri: WEBSITE_V1_URN,
          params: { domains, live: true, allowHosts: stringList(settings.allowHosts) },
          paths: { ready: "/ready", session: SESSION_PATH, reset: "/reset" },
        },
      ],
    });
  }
  if (path === "/ready") return sendJson(res, 200, { ready: true });
  if (path === "/data") return data.handle(req, res);
  if (path === "/reset") return resetOperation(req, res, data.reset);
  if (path === SESSION_PATH) return sendJson(res, 200, storageState());
  if (path === "/echo") return sendJson(res, 200, { method: req.method, url: req.url, headers: req.headers });
  sendJson(res, 404, {
    error: `a live site's server serves no pages (no ${path}); browse the real site through the computer's proxy`,
  });
});
