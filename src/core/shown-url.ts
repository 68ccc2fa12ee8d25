/**
 * A URL as pgsched shows it where others may read it (the http handler's errors, kept with the
 * execution and logged by the worker; the dashboard's webhook pages): without the user name,
 * password, query and fragment, where tokens travel (a query shows as `?…`), and with each path
 * segment that looks like a token as `…` (webhook URLs often carry their secret in the path:
 * /services/T0000/B0000/<token>). One rule for both; no I/O, so the dashboard bundles it.
 */

/**
 * A path segment that looks like a token: long, and of letters and digits both (a Slack or Discord
 * webhook's secret, a bot token). Ids of digits only and words are kept.
 */
const TOKEN_LIKE = /^(?=.*[A-Za-z])(?=.*\d)[^/]{24,}$/

/** `url` as shown (see the file header); a text that is no URL loses what follows `?` or `#`. */
export function shownUrl(url: URL | string): string {
  let parsed: URL
  try {
    parsed = typeof url === 'string' ? new URL(url) : url
  } catch {
    return (url as string).replace(/[?#].*$/s, '')
  }
  const path = parsed.pathname
    .split('/')
    .map((segment) => (TOKEN_LIKE.test(segment) ? '…' : segment))
    .join('/')
  return `${parsed.origin}${path}${parsed.search === '' ? '' : '?…'}`
}
