/**
 * Webhook signatures. Each delivery carries `Pgsched-Signature: t=<unix seconds>,v1=<hex>`, where
 * hex is HMAC-SHA256 with the subscription's secret over `<t>.<raw body>`. A receiver recomputes it
 * over the body bytes as received and refuses a timestamp older (or newer) than its tolerance, so a
 * captured delivery cannot be replayed later. Several `v1=` entries are accepted (any may match).
 */
import { createHmac, timingSafeEqual } from 'node:crypto'
import { assertKnownFields, type FieldSet } from '../core/known-fields.ts'

/** The header a delivery's signature is sent in. */
export const SIGNATURE_HEADER = 'Pgsched-Signature'
/** How far a signature's timestamp may be from the receiver's clock by default, seconds. */
export const SIGNATURE_TOLERANCE_S_DEFAULT = 300

function hmacHex(secret: string, timestampS: number, body: string | Buffer): string {
  return createHmac('sha256', secret).update(`${timestampS}.`).update(body).digest('hex')
}

/** The header value for `body` signed at `timestampS` (unix seconds). */
export function signWebhook(secret: string, body: string | Buffer, timestampS: number): string {
  return `t=${timestampS},v1=${hmacHex(secret, timestampS, body)}`
}

export interface VerifyWebhookSignatureParams {
  /** The subscription's secret. */
  secret: string
  /** The raw request body, exactly as received (not re-serialised JSON). */
  body: string | Buffer
  /** The Pgsched-Signature header. */
  header: string | string[] | null | undefined
  /** Largest accepted distance between the timestamp and now, seconds (default 300). */
  toleranceS?: number
  /** Now, unix seconds (default: the clock). */
  nowS?: number
}

/** Any other parameter is refused: a misspelt `tolerance: 60` would leave the default 300 s in force. */
const VERIFY_FIELDS: FieldSet<VerifyWebhookSignatureParams> = { secret: true, body: true, header: true, toleranceS: true, nowS: true }

/**
 * True when `header` is a valid signature of `body` with `secret`, made within the tolerance.
 * @throws RangeError when `toleranceS` or `nowS` is not a finite number (NaN would accept any age).
 * @throws ValidationError naming a parameter it does not know (from JavaScript), whatever the header.
 */
export function verifyWebhookSignature(params: VerifyWebhookSignatureParams): boolean {
  assertKnownFields(params, VERIFY_FIELDS, 'verifyWebhookSignature params')
  const header = Array.isArray(params.header) ? params.header[0] : params.header
  if (typeof header !== 'string') return false
  let timestamp: number | undefined
  const signatures: string[] = []
  for (const part of header.split(',')) {
    const [key, value] = part.trim().split('=', 2)
    if (key === 't' && value !== undefined && /^\d{1,12}$/.test(value)) timestamp = Number(value)
    else if (key === 'v1' && value !== undefined && /^[0-9a-f]{64}$/.test(value)) signatures.push(value)
  }
  if (timestamp === undefined || signatures.length === 0) return false
  const nowS = params.nowS ?? Math.floor(Date.now() / 1000)
  const toleranceS = params.toleranceS ?? SIGNATURE_TOLERANCE_S_DEFAULT
  // a tolerance that is not a number (an unset setting read with Number()) must not accept every timestamp
  if (!(Number.isFinite(toleranceS) && toleranceS >= 0)) throw new RangeError(`toleranceS must be a finite number of seconds, 0 or more (got ${toleranceS})`)
  if (!Number.isFinite(nowS)) throw new RangeError(`nowS must be a finite number of seconds (got ${nowS})`)
  if (Math.abs(nowS - timestamp) > toleranceS) return false
  const expected = Buffer.from(hmacHex(params.secret, timestamp, params.body), 'hex')
  return signatures.some((s) => timingSafeEqual(Buffer.from(s, 'hex'), expected))
}
