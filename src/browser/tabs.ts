// The tabs of the Chromium in use, replaced over its own DevTools port: the start tabs a reset opens once the sites
// are emptied, and the blank tab that stops an episode's pages.
import { DEVTOOLS_WORK_MS, devtools, sleep } from "./chromium";

/** The ids of the page tabs open now. */
async function pages(port: number): Promise<string[]> {
  return (JSON.parse((await devtools(port, "GET", "/json/list")).body) as { id: string; type: string }[])
    .filter((t) => t.type === "page")
    .map((t) => t.id);
}

/** Opens `urls` as tabs, one after another (so they stand in that order), then closes every tab there was. */
export async function replaceTabs(port: number, urls: readonly string[]): Promise<void> {
  const others = await pages(port);
  // Never none: a browser with no tab left would exit.
  if (urls.length === 0) return;
  for (const url of urls) await devtools(port, "PUT", `/json/new?${encodeURI(url)}`);
  for (const id of others) await devtools(port, "GET", `/json/close/${id}`);
  // A tab closes a moment after DevTools says it will: answered once they are gone.
  const until = Date.now() + DEVTOOLS_WORK_MS;
  while (Date.now() < until && (await pages(port)).some((id) => others.includes(id))) await sleep(25);
}
