/** Pages' HTML as a browser without JavaScript reads it, for tests that submit the dashboard's forms over real HTTP. */

export function unescapeHtml(text: string): string {
  return text
    .replaceAll("&quot;", '"')
    .replaceAll("&#x27;", "'")
    .replaceAll("&#39;", "'")
    .replaceAll("&lt;", "<")
    .replaceAll("&gt;", ">")
    .replaceAll("&amp;", "&");
}

/**
 * A form of a page as a browser without JavaScript submits it (React renders each server action's reference into
 * hidden fields): the hidden fields of the first form whose HTML contains `marker`.
 */
export function formOf(html: string, marker: string): FormData {
  const form = (html.match(/<form[\s\S]*?<\/form>/g) ?? []).find((f) => f.includes(marker));
  if (!form) throw new Error(`no form containing ${marker}`);
  const data = new FormData();
  for (const tag of form.match(/<input[^>]*>/g) ?? []) {
    const name = /name="([^"]*)"/.exec(tag)?.[1];
    if (!/type="hidden"/.test(tag) || name === undefined) continue;
    data.append(unescapeHtml(name), unescapeHtml(/value="([^"]*)"/.exec(tag)?.[1] ?? ""));
  }
  return data;
}
