// The demo's walls suite: what a computer and a site can and cannot reach (see target.ts).
import net from "node:net";
import ipaddr from "ipaddr.js";
import os from "node:os";
import { describe, expect, it } from "vitest";
import { connectProbeScript } from "../helpers/env";
import { demoHelpers, type DemoTarget, firstHost } from "./target";

export function wallsSuite(t: DemoTarget): void {
  describe("the walls: what a computer and a site can and cannot reach", () => {
    const { STACK, inspect, addresses } = demoHelpers(t);

    it("lets nothing but its proxy be reached from inside the computer's container", async () => {
      const env = t.env();
      // A container's addresses (`on`: a container on the same engine, for the web stand-in, which is the test's).
      const ipOf = async (container: string, on = container) =>
        Object.values(
          (await env.apiOf(on).getContainer(container).inspect()).NetworkSettings.Networks as Record<
            string,
            { IPAddress: string }
          >,
        ).map((n) => n.IPAddress);
      const targets: Record<string, [string, number]> = {
        proxy: [`${STACK}-desktop-proxy`, 3128],
        gatewayByName: [`${STACK}-gateway`, 8080],
        siteByName: [`${STACK}-shop-server`, 8000],
        standinByName: ["github.com", 443],
        ...Object.fromEntries((await ipOf(`${STACK}-gateway`)).map((ip, i) => [`gatewayIp${i}`, [ip, 8080]])),
        ...Object.fromEntries((await ipOf(`${STACK}-shop-server`)).map((ip, i) => [`siteIp${i}`, [ip, 8000]])),
        ...Object.fromEntries(
          (await ipOf(env.webStandin("desktop"), `${STACK}-desktop-proxy`)).map((ip, i) => [
            `standinIp${i}`,
            [ip, 443],
          ]),
        ),
        // The machines themselves: the docker host, or every host of the env and the runner (see DemoTarget).
        ...t.machines("desktop"),
      };
      const script = connectProbeScript(targets);
      // The browser is on its computer's internal network alone; DevTools leaves through the proxy's relay.
      for (const name of ["desktop", "open"]) {
        const networks = Object.keys((await inspect(`${STACK}-${name}-browser`)).NetworkSettings.Networks);
        expect(networks).toEqual([`${STACK}-${name}-net`]);
        expect((await env.apiOf(`${STACK}-${name}-net`).getNetwork(`${STACK}-${name}-net`).inspect()).Internal).toBe(
          true,
        );
      }
      const results = JSON.parse(env.nodeIn(`${STACK}-desktop-browser`, script)) as Record<string, string>;
      expect(results.proxy).toBe("connected");
      const connected = Object.keys(results).filter((k) => k !== "proxy" && results[k] === "connected");
      expect(connected).toEqual([]);
    });

    it("lets a hostile site image reach no computer's container, on any port, and none of the gateway's listeners", async () => {
      const env = t.env();
      const targets: Record<string, [string, number]> = {};
      for (const computer of ["desktop", "open"]) {
        for (const container of [`${STACK}-${computer}-proxy`, `${STACK}-${computer}-browser`]) {
          for (const [network, ip] of Object.entries(await addresses(container))) {
            for (const port of [3128, 9000, 9222, 22, 80]) targets[`${container}@${network}:${port}`] = [ip, port];
          }
        }
      }
      const gatewayIps = await addresses(`${STACK}-gateway`);
      // On the env network the gateway listens on nothing: a site cannot ask it for another site's session.
      for (const port of [8080, 8081]) targets[`gateway@env:${port}`] = [gatewayIps[`${STACK}-env`], port];
      // Remote hosts: the machines too, whose published ports their firewall opens to the env host.
      Object.assign(targets, t.remote?.siteProbes() ?? {});
      // Remote hosts: a computer's container has an address of its own engine's subnets, which the env host's engine
      // may have chosen for one of its own networks too; a connect there reaches the env host's container, not the
      // computer's, so those targets say nothing about the computer.
      const envSubnets = t.remote
        ? (await env.apiOf(`${STACK}-gateway`).listNetworks()).flatMap((n) =>
            (n.IPAM?.Config ?? []).flatMap((c) => (c.Subnet ? [ipaddr.parseCIDR(c.Subnet)] : [])),
          )
        : [];
      const onEnvHost = (ip: string) =>
        envSubnets.some(([range, bits]) => {
          const address = ipaddr.parse(ip);
          return address.kind() === range.kind() && address.match(range, bits);
        });
      for (const site of ["shop-server", "github-server"]) {
        const results = env.connectsFrom(`${STACK}-${site}`, targets);
        const guarded = t.remote?.tokenGuarded(site) ?? [];
        const connected = Object.keys(results).filter(
          (k) =>
            results[k] === "connected" &&
            !guarded.includes(k) &&
            !(k.startsWith(`${STACK}-`) && onEnvHost(targets[k][0])),
        );
        expect({ site, connected }).toEqual({ site, connected: [] });
        for (const name of guarded.filter((k) => results[k] === "connected")) {
          const [host, port] = targets[name];
          const status = env.nodeIn(
            `${STACK}-${site}`,
            `fetch("http://${host}:${port}/log").then((r) => console.log(r.status), (e) => console.log(e.message))`,
          );
          expect({ site, name, status: status.trim() }).toEqual({ site, name, status: "401" });
        }
      }
    });

    it("keeps the gateway's runner listener, DevTools and the proxy log out of a computer's reach, and refuses the env's addresses through its proxy", async () => {
      const env = t.env();
      const gatewayIps = await addresses(`${STACK}-gateway`);
      const shopServer = (await addresses(`${STACK}-shop-server`))[`${STACK}-env`];
      const browserIp = (await addresses(`${STACK}-open-browser`))[`${STACK}-open-net`];
      // From the allow-all computer, whose proxy forwards any public host: every address of the env is refused.
      const remote = t.remote;
      // On remote hosts the env is another machine: its containers' addresses mean nothing here (another engine's
      // private subnets, which may even be this engine's too), and what the proxy must refuse is the machines'.
      const envAttempts: Record<string, { method: "GET" | "CONNECT"; target: string }> = remote
        ? {
            envHostBrowse: { method: "GET", target: `http://${remote.envAddress}:8081/svc/github/session` },
            envHostRunner: { method: "GET", target: `http://${remote.envAddress}:8080/svc/github/session` },
            envHostSsh: { method: "CONNECT", target: `${remote.envAddress}:22` },
            ownHostControl: { method: "GET", target: `http://${remote.computerAddress.open}:9000/log` },
            otherComputerHost: { method: "CONNECT", target: `${remote.computerAddress.desktop}:9000` },
          }
        : {
            linkBrowse: { method: "GET", target: "http://gateway-open:8081/svc/github/session" },
            ingressByAddress: {
              method: "GET",
              target: `http://${gatewayIps[`${STACK}-ingress`]}:8080/svc/github/session`,
            },
            linkByAddress: { method: "GET", target: `http://${gatewayIps[`${STACK}-open-link`]}:8081/website/shop/` },
            siteByAddress: { method: "GET", target: `http://${shopServer}:8000/` },
          };
      const attempts = env.throughProxy(`${STACK}-open-browser`, {
        ...envAttempts,
        ownDevtools: { method: "CONNECT", target: `${browserIp}:9222` },
        ownControl: { method: "GET", target: "http://proxy-open:9000/log" },
        loopback: { method: "GET", target: "http://127.0.0.1:9222/json/version" },
        localhost: { method: "CONNECT", target: "localhost:9222" },
        metadata: { method: "GET", target: "http://169.254.169.254/latest/meta-data/" },
      });
      for (const [attempt, answer] of Object.entries(attempts)) {
        expect({ attempt, status: answer.status }, answer.body).toEqual({ attempt, status: 403 });
        expect({ attempt, marker: answer.marker }).toEqual({ attempt, marker: "refused" });
      }
      // A site's name on the env network does not even resolve where the proxy is.
      const byName = env.throughProxy(`${STACK}-open-browser`, {
        siteByName: { method: "GET", target: "http://shop-server:8000/" },
      }).siteByName;
      // (A stand-in host has no resolver for names Docker's does not know: the lookup outlasts the probe, 0 here.)
      if (t.remote) expect([0, 502], JSON.stringify(byName)).toContain(byName.status);
      else expect(byName).toMatchObject({ status: 502, marker: "failed" });
      // The public web still works for it, and each refusal left a trace naming what was refused.
      expect(
        env.throughProxy(`${STACK}-open-browser`, { web: { method: "CONNECT", target: "example.com:443" } }).web.status,
      ).toBe(200);
      const refused = (await env.proxyLog("open")).filter((r) => r.event === "refused");
      const refusedAddresses = remote
        ? [remote.envAddress, remote.computerAddress.open, remote.computerAddress.desktop]
        : [gatewayIps[`${STACK}-ingress`], shopServer];
      for (const address of [...refusedAddresses, browserIp, "169.254.169.254"]) {
        expect(
          refused.some((r) => r.address === address || r.host === address),
          address,
        ).toBe(true);
      }
      // The browser has no route to its proxy's control listener (bound on the link network).
      const direct = env.connectsFrom(`${STACK}-open-browser`, {
        controlByName: ["proxy-open", 9000],
        control: ["site-proxy", 9000],
        relay: ["site-proxy", 9222],
      });
      for (const [target, result] of Object.entries(direct))
        expect({ target, result }).not.toEqual({ target, result: "connected" });
    });

    it("refuses an allow-all computer every address of the machine its engine runs on, on any port, whatever network it is on", async (ctx) => {
      if (t.remote) ctx.skip(); // remote hosts: the probes above aim at the machines' addresses
      const env = t.env();
      // A service of the machine listening on every interface, as sshd or a database might.
      const hits: string[] = [];
      const listener = net.createServer((socket) => {
        hits.push(String(socket.remoteAddress));
        socket.end("the machine answered\n");
      });
      await new Promise<void>((resolve) => listener.listen(0, "0.0.0.0", resolve));
      const port = (listener.address() as net.AddressInfo).port;
      // A network made after the deploy (another stack's, say): its gateway is this machine too.
      const later = `${STACK}-later-net`;
      await env.api.createNetwork({ Name: later, Labels: { "multienv.stack": STACK } });
      try {
        const laterGateway = (await env.api.getNetwork(later).inspect()).IPAM?.Config?.[0]?.Gateway as string;
        const own = Object.entries(os.networkInterfaces())
          // Docker's per-network links, and the links of the hosts tests' stand-in VMs (a test's, not the machine's).
          .filter(([name]) => !/^(lo|br-|veth|mevh-)/.test(name))
          .flatMap(([name, list]) =>
            (list ?? []).filter((i) => i.family === "IPv4").map((i) => [name, i.address] as const),
          );
        const egress = await env.api.getNetwork(`${STACK}-open-egress`).inspect();
        const egressGateway = egress.IPAM?.Config?.[0]?.Gateway as string;
        const bridge = await env.api.getNetwork("bridge").inspect();
        const targets: Record<string, string> = {
          ...Object.fromEntries(own.map(([name, address]) => [`interface ${name}`, address])),
          // Its inspect may name no gateway: Docker gives the bridge the subnet's first address then.
          "the default bridge's gateway":
            bridge.IPAM?.Config?.[0]?.Gateway ?? firstHost(bridge.IPAM?.Config?.[0]?.Subnet as string),
          "the proxy's own egress gateway": egressGateway,
          "a network made after the deploy": laterGateway,
        };
        // This machine's own interface (not only Docker's): the address a service listening on 0.0.0.0 answers at.
        expect(own.filter(([name]) => name !== "docker0").length).toBeGreaterThan(0);
        const attempts = env.throughProxy(
          `${STACK}-open-browser`,
          Object.fromEntries(
            Object.entries(targets).flatMap(([what, address]) => [
              [`CONNECT ${what}`, { method: "CONNECT" as const, target: `${address}:${port}` }],
              [`GET ${what}`, { method: "GET" as const, target: `http://${address}:${port}/` }],
            ]),
          ),
        );
        for (const [attempt, answer] of Object.entries(attempts))
          expect({ attempt, status: answer.status, marker: answer.marker }, answer.body).toEqual({
            attempt,
            status: 403,
            marker: "refused",
          });
        expect(hits).toEqual([]);
        const refused = (await env.proxyLog("open")).filter((r) => r.event === "refused");
        for (const address of Object.values(targets))
          expect(
            refused.some((r) => r.host === address || r.address === address),
            address,
          ).toBe(true);
      } finally {
        listener.close();
        await env.api.getNetwork(later).remove();
      }
    });

    it("serves a proxy nothing but synthetic pages on the gateway's browse listener, whatever it asks and with whatever token", async () => {
      const env = t.env();
      const script = (path: string, auth: boolean) => `
        fetch("http://${t.remote ? t.remote.envAddress : "gateway-desktop"}:8081${path}", { headers: ${auth ? `{ authorization: "Bearer ${env.token}" }` : "{}"} })
          .then((r) => r.text().then((t) => console.log(JSON.stringify({ status: r.status, body: t.slice(0, 80) }))), (e) => console.log(JSON.stringify({ status: 0, body: e.message })));`;
      const proxy = `${STACK}-desktop-proxy`;
      expect(JSON.parse(env.nodeIn(proxy, script("/website/shop/", false))).status).toBe(200);
      for (const path of [
        "/svc/github/session",
        "/svc/shop/echo",
        "/traffic/v1/captures",
        "/.well-known/agent-env.json",
        "/healthz",
        "/computers/desktop/cdp/json/version",
        "/computers/desktop/proxy-log",
      ]) {
        for (const auth of [false, true])
          expect({ path, auth, status: JSON.parse(env.nodeIn(proxy, script(path, auth))).status }).toEqual({
            path,
            auth,
            status: 404,
          });
      }
      // The runner's listener is not bound on the link network at all (remote hosts: on the env host's loopback alone).
      const gatewayIps = await addresses(`${STACK}-gateway`);
      const runnerListener: [string, number] = t.remote
        ? [t.remote.envAddress, 8080]
        : [gatewayIps[`${STACK}-desktop-link`], 8080];
      expect(env.connectsFrom(proxy, { published: runnerListener }).published).not.toBe("connected");
      // And the gateway logged each refusal.
      const gatewayLog = env.docker(`${STACK}-gateway`, ["logs", `${STACK}-gateway`]);
      expect(gatewayLog).toMatch(/request-refused[^\n]*\/svc\/github\/session/);
    });
  });
}
