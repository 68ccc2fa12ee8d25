/**
 * Built-in handler `http`: calls a URL. Payload: {url, method?, headers?, body?, timeoutMs?}. 2xx
 * succeeds with a summary of the response (status, content type, the first 4 KiB of the body: as
 * text, or as `bodyBase64` when it is no UTF-8 text);
 * 4xx is fatal except 408 and 429; 5xx, timeouts and network errors are retried. A payload with
 * another key or a value it cannot send as given (core/http-payload.ts) is refused with a FatalError
 * naming it, before any request; normalizeSubmit refuses it at submit already.
 *
 * It connects only to addresses the policy allows (lib/address-policy.ts): every address a name
 * resolves to is checked at connection time, by the connection's own look-up (so a name cannot
 * resolve to a public address when checked and a private one when used), and so is every hop of a
 * redirect (at most 5; only standard headers that carry no credential go on to another origin). Ports on
 * the Fetch standard's bad-port list (25, 22, 6667, …) are refused unless the host is allowed by name
 * or address. A refusal is a FatalError naming the rule. SCHEDULER_HTTP_ALLOW admits
 * internal hosts and ranges; SCHEDULER_HTTP_HANDLER=off leaves the handler out of the worker.
 */
import { shownUrl } from '../core/shown-url.ts'
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { isIP, type LookupFunction } from 'node:net'
import { FatalError } from '../errors.ts'
import { assertKnownFields, type FieldSet } from '../core/known-fields.ts'
import { HTTP_JOB_TYPE, httpPayloadProblems, type HttpPayload } from '../core/http-payload.ts'
import { allowedExplicitly, allowedHost, badPort, bareHost, parseAddressPolicy, refusedAddress, type AddressPolicy } from '../lib/address-policy.ts'
import { defineHandler, type Handler } from './handlers.ts'

/** The most of a response body kept in the result. */
export const SUMMARY_BYTES = 4096
const MAX_REDIRECTS = 5
const REDIRECTS = new Set([301, 302, 303, 307, 308])
/**
 * The headers a redirect sends on to another origin: standard ones that carry no credential. Any
 * other (Authorization, Cookie, and the many X-…-Token, Private-Token, X-Goog-Api-Key a service may
 * use) stays with the origin it was meant for.
 */
const CROSS_ORIGIN_HEADER =
  /^(accept|accept-language|content-language|content-type|user-agent|cache-control|pragma|if-match|if-none-match|if-modified-since|if-unmodified-since|if-range|range)$/i

/** The body of an answer as text when it is UTF-8 text without NUL (a truncated one may end mid-character); else undefined. */
function bodyText(body: Buffer, truncated: boolean): string | undefined {
  if (body.includes(0)) return undefined
  try {
    // streaming: an incomplete character at the end of a truncated body is left out, not refused
    return new TextDecoder('utf-8', { fatal: true }).decode(body, { stream: truncated })
  } catch {
    return undefined
  }
}

/** The URL a redirect's Location names; an error saying so (not the Location, which may hold secrets) when it names none. */
function locationOf(answer: Answer, url: URL, method: string): URL {
  try {
    return new URL(answer.location as string, url)
  } catch {
    const message = `${method} ${shownUrl(url)} answered ${answer.status} with a Location that is not a URL`
    throw Object.assign(new Error(message), { answerStatus: answer.status })
  }
}

/** The payload, refused (fatal: no attempt could send it as meant) when httpPayloadProblems finds any problem. */
function parsePayload(payload: unknown): HttpPayload & { parsed: URL } {
  const problems = httpPayloadProblems(payload)
  if (problems.length > 0) throw new FatalError(`http job refused: ${problems.map((p) => p.message).join('; ')}`)
  const p = payload as HttpPayload
  return { ...p, parsed: new URL(p.url) }
}

/** A connection the policy refuses (raised inside the look-up, so it ends the request). */
class RefusedAddressError extends Error {}

function refusal(host: string, address: string, rule: string, policy: AddressPolicy): RefusedAddressError {
  const via = bareHost(host) === address ? address : `${host} (${address})`
  const allow = policy.text.trim() === '' ? 'unset' : `"${policy.text}"`
  return new RefusedAddressError(
    `http job refused: ${via} is a ${rule} address, which the http handler does not call unless SCHEDULER_HTTP_ALLOW admits it (it is ${allow})`,
  )
}

/** How names are resolved: dns.lookup (the system's resolver and /etc/hosts) unless given. */
export type HttpResolve = (hostname: string, options: LookupAllOptions, callback: (err: Error | null, addresses: LookupAddress[]) => void) => void

const systemResolve: HttpResolve = (hostname, options, callback) => dnsLookup(hostname, options, callback)

/** A look-up that fails when any address of the name is refused (by `policy`; null: a host allowed by name). */
function guardedLookup(host: string, policy: AddressPolicy | null, resolve: HttpResolve): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err as NodeJS.ErrnoException, '', 0)
      for (const a of policy ? addresses : []) {
        const rule = refusedAddress(a.address, policy as AddressPolicy)
        if (rule) return callback(refusal(host, a.address, rule, policy as AddressPolicy), '', 0)
      }
      const first = addresses[0]
      if (options.all) (callback as unknown as (e: null, all: LookupAddress[]) => void)(null, addresses)
      else if (first) callback(null, first.address, first.family)
      else callback(new Error(`${hostname} resolved to no address`), '', 0)
    })
  }
}

interface Answer {
  status: number
  contentType: string | null
  location: string | undefined
  body: Buffer
  truncated: boolean
}

/** One request, no redirect followed; reads at most SUMMARY_BYTES of the body. */
function send(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: string | undefined,
  guard: { policy: AddressPolicy; resolve: HttpResolve },
  signal: AbortSignal,
): Promise<Answer> {
  const { policy } = guard
  const host = url.hostname
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80))
  if (badPort(port) && !allowedExplicitly(host, policy)) {
    throw new FatalError(
      `http job refused: port ${port} is on the Fetch standard's list of bad ports (mail, shell and other services a crafted request could talk to); SCHEDULER_HTTP_ALLOW can admit the host`,
    )
  }
  let lookup: LookupFunction | undefined
  const literal = bareHost(host)
  const byName = allowedHost(host, policy)
  if (isIP(literal) === 0) lookup = guardedLookup(host, byName ? null : policy, guard.resolve)
  else if (!byName) {
    const rule = refusedAddress(literal, policy)
    if (rule) throw new FatalError(refusal(host, literal, rule, policy).message)
  }
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest
  const withLength = body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) }
  return new Promise<Answer>((resolve, reject) => {
    const req = request(url, { method, headers: withLength, signal, ...(lookup ? { lookup } : {}) }, (res: IncomingMessage) => {
      const chunks: Buffer[] = []
      let size = 0
      let truncated = false
      const done = () =>
        resolve({
          status: res.statusCode ?? 0,
          contentType: res.headers['content-type'] ?? null,
          location: res.headers.location,
          body: Buffer.concat(chunks).subarray(0, SUMMARY_BYTES),
          truncated,
        })
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk)
        size += chunk.length
        if (size > SUMMARY_BYTES) {
          truncated = true
          res.destroy()
          done()
        }
      })
      res.on('end', done)
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body)
  })
}

/** The options of createHttpHandler. */
export interface HttpHandlerOptions {
  /** Hosts and ranges admitted beyond the public internet: text as in SCHEDULER_HTTP_ALLOW, or parsed. */
  allow?: string | AddressPolicy
  /** Replaces the system's name resolution (tests give names addresses with it). */
  resolve?: HttpResolve
  /** `refuse`: a redirect is not followed but fails the attempt (retried), naming where it led. Default `follow`. */
  redirects?: 'follow' | 'refuse'
}

/** Any other option is refused: a misspelt `redirect: 'refuse'` would leave redirects followed. */
const HTTP_HANDLER_OPTIONS_FIELDS: FieldSet<HttpHandlerOptions> = { allow: true, resolve: true, redirects: true }

/**
 * The `http` handler under an allowlist.
 * @throws ValidationError naming an option it does not know (from JavaScript).
 */
export function createHttpHandler(options: HttpHandlerOptions = {}): Handler {
  assertKnownFields(options, HTTP_HANDLER_OPTIONS_FIELDS, 'createHttpHandler options')
  const policy = typeof options.allow === 'object' ? options.allow : parseAddressPolicy(options.allow ?? '')
  const guard = { policy, resolve: options.resolve ?? systemResolve }
  return defineHandler(HTTP_JOB_TYPE, async (ctx) => {
    const p = parsePayload(ctx.payload)
    const timeout = p.timeoutMs === undefined ? undefined : AbortSignal.timeout(p.timeoutMs)
    const signal = timeout ? AbortSignal.any([ctx.signal, timeout]) : ctx.signal
    let method = (p.method ?? 'GET').toUpperCase()
    let body = p.body === undefined ? undefined : typeof p.body === 'string' ? p.body : JSON.stringify(p.body)
    let headers: Record<string, string> = {
      ...(typeof p.body === 'object' && p.body !== null ? { 'content-type': 'application/json' } : {}),
      ...p.headers,
    }
    let url = p.parsed
    let answer: Answer
    for (let hop = 0; ; hop++) {
      try {
        answer = await send(url, method, headers, body, guard, signal)
      } catch (err: unknown) {
        if (err instanceof FatalError) throw err
        if (err instanceof RefusedAddressError) throw new FatalError(err.message)
        if (ctx.signal.aborted) throw err
        const reason = timeout?.aborted ? `timed out after ${p.timeoutMs} ms` : String((err as Error)?.message ?? err)
        throw new Error(`request to ${shownUrl(url)} failed: ${reason}`)
      }
      if (!REDIRECTS.has(answer.status) || answer.location === undefined) break
      if (options.redirects === 'refuse') {
        const message = `${method} ${shownUrl(url)} answered ${answer.status} to ${shownUrl(locationOf(answer, url, method))}: redirects are not followed`
        throw Object.assign(new Error(message), { answerStatus: answer.status })
      }
      if (hop >= MAX_REDIRECTS) throw new Error(`${shownUrl(p.parsed)}: more than ${MAX_REDIRECTS} redirects`)
      const next = locationOf(answer, url, method)
      if (next.protocol !== 'http:' && next.protocol !== 'https:')
        throw new FatalError(`${shownUrl(url)} redirected to ${next.protocol} URL, which is not http or https`)
      if (answer.status === 303 || ((answer.status === 301 || answer.status === 302) && method === 'POST')) {
        method = 'GET'
        body = undefined
        headers = Object.fromEntries(Object.entries(headers).filter(([k]) => k.toLowerCase() !== 'content-type'))
      }
      // credentials go to the origin they were meant for only (not to another host, nor in clear text)
      if (next.origin !== url.origin) headers = Object.fromEntries(Object.entries(headers).filter(([k]) => CROSS_ORIGIN_HEADER.test(k)))
      url = next
    }
    // a body that is no UTF-8 text (an image, a zip: or text holding NUL, which JSON in PostgreSQL cannot) as base64
    const text = bodyText(answer.body, answer.truncated)
    const summary = {
      status: answer.status,
      contentType: answer.contentType,
      body: text ?? null,
      ...(text === undefined ? { bodyBase64: answer.body.toString('base64') } : {}),
      truncated: answer.truncated,
    }
    if (answer.status >= 200 && answer.status < 300) return summary
    const message = `${method} ${shownUrl(url)} answered ${answer.status}`
    const fatal = answer.status >= 400 && answer.status < 500 && answer.status !== 408 && answer.status !== 429
    throw Object.assign(fatal ? new FatalError(message) : new Error(message), { answerStatus: answer.status })
  })
}

/** The HTTP status of the answer a failure of the `http` handler reports (undefined: no answer came). */
export function httpAnswerStatus(err: unknown): number | undefined {
  const status = (err as { answerStatus?: unknown } | null)?.answerStatus
  return typeof status === 'number' ? status : undefined
}

/** The `http` handler with the default policy: no loopback, private, link-local or reserved address. */
export const httpHandler = createHttpHandler()
