/** Checks of a database URL before the driver sees it (config and createDb). */

/**
 * What is wrong with a database URL the `pg` driver would take (undefined: nothing). Several hosts
 * (`postgres://h1:5432,h2:5432/db?target_session_attrs=read-write`, as pg_auto_failover and Patroni
 * hand out) are not supported: the driver would fail on every query with "Invalid URL".
 */
export function databaseUrlProblem(url: string): string | undefined {
  const authority = /^postgres(?:ql)?:\/\/(?:[^@/?#]*@)?([^/?#]*)/.exec(url)?.[1] ?? ''
  if (authority.includes(',')) {
    return `lists several hosts (${authority}); that form is not supported yet: give the primary's address, or that of a proxy or service that always reaches the primary`
  }
  try {
    new URL(url)
  } catch {
    return 'is not a valid URL (postgres://user:password@host:port/database; percent-encode special characters in the password)'
  }
  return undefined
}
