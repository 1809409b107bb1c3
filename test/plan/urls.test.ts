// src/plan/urls.ts: the URLs a runner uses.
import { describe, expect, it } from "vitest";
import { gatewayUrl, rehost, siteUrls } from "../../src/plan/urls";

describe("urls", () => {
  it("rehosts a service URL onto an address, keeping scheme, port and path", () => {
    expect(rehost("http://s-gateway:8080", "10.0.1.5")).toBe("http://10.0.1.5:8080");
    expect(rehost("http://s-c-proxy:9000/log", "10.0.1.6")).toBe("http://10.0.1.6:9000/log");
    expect(rehost("http://s-c-proxy:9222", "fd00::5")).toBe("http://[fd00::5]:9222");
    expect(rehost("http://[fd00::1]:9222/x", "10.0.0.1")).toBe("http://10.0.0.1:9222/x");
  });

  it("routes a synthetic site to /svc and /website, a live site to /svc only", () => {
    const url = gatewayUrl("127.0.0.1", 49153);
    expect(url).toBe("http://127.0.0.1:49153");
    expect(siteUrls(url, { name: "shop", live: false })).toEqual({
      svcUrl: `${url}/svc/shop/`,
      browseUrl: `${url}/website/shop/`,
    });
    expect(siteUrls(url, { name: "gh", live: true })).toEqual({ svcUrl: `${url}/svc/gh/` });
  });
});
