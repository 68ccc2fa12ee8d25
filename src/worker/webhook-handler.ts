/**
 * Built-in handler `pgsched.webhook`: delivers one event to one webhook subscription. The
 * dispatcher (maintenance/webhook-dispatcher.ts) submits a job per event and subscription, payload
 * {subscriptionId, event}; each attempt reads the subscription (deleted, or of another tenant than
 * the job's: fatal, nothing sent),
 * signs the body with its secret at the time of sending (events/signature.ts) and POSTs it through
 * the built-in `http` handler, under the same address rules (SCHEDULER_HTTP_ALLOW) and outcome
 * rules: 2xx delivered; 4xx fatal except 408 and 429; 5xx, timeouts and network errors retried with
 * the job's backoff. A redirect is not followed (a 301 or 302 would turn the POST into a GET without
 * the event): it fails the attempt, retried, naming where it led. Each attempt is written to the
 * subscription's delivery log, which disables the subscription once its attempts have failed for
 * long enough (`disable`, SCHEDULER_WEBHOOK_DISABLE_AFTER_*; logged at warn): that attempt's
 * delivery then fails at once (fatal, with the receiver's error) and the subscription's other
 * deliveries still to come are cancelled in the same statement (up to WEBHOOK_CANCEL_MAX), so a
 * receiver that stays down is not sent them, nor do they each fail unsent. An attempt that still
 * finds its subscription disabled (one the bound left, or one submitted while it was disabled) sends
 * nothing, cancels the rest it finds and ends its delivery (fatal).
 */
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.ts'
import { FatalError } from '../errors.ts'
import type { AddressPolicy } from '../lib/address-policy.ts'
import { SIGNATURE_HEADER, signWebhook } from '../events/signature.ts'
import { WEBHOOK_DISABLE_DEFAULT, WEBHOOK_JOB_TYPE, type JobEvent } from '../core/events.ts'
import type { HttpPayload } from '../core/http-payload.ts'
import { webhookDeliveryCancelLeft, webhookDeliveryInsert, webhookSubscriptionForJob, type WebhookDisablePolicy } from '../db/queries/webhooks.ts'
import { defineHandler, type Handler, type HandlerContext } from './handlers.ts'
import { createHttpHandler, httpAnswerStatus, type HttpResolve } from './http-handler.ts'

/** How long a receiver has to answer one delivery. */
export const WEBHOOK_TIMEOUT_MS = 10_000

interface WebhookPayload {
  subscriptionId: string
  event: Record<string, unknown> & Pick<JobEvent, 'id' | 'type'>
}

export function createWebhookHandler(options: {
  db: Kysely<DB>
  allow?: string | AddressPolicy
  resolve?: HttpResolve
  /** When a subscription whose attempts keep failing is disabled; default WEBHOOK_DISABLE_DEFAULT. */
  disable?: WebhookDisablePolicy
  /** Called when an attempt of this handler disabled its subscription (the worker's metrics count it). */
  onDisabled?: (subscription: { id: string; tenant: string }) => void
}): Handler {
  const http = createHttpHandler({ allow: options.allow, resolve: options.resolve, redirects: 'refuse' })
  const { db } = options
  const disable = options.disable ?? WEBHOOK_DISABLE_DEFAULT
  return defineHandler(WEBHOOK_JOB_TYPE, async (ctx) => {
    const p = ctx.payload as WebhookPayload
    const sub = await webhookSubscriptionForJob(db, { id: p.subscriptionId, jobId: ctx.jobId })
    if (!sub) throw new FatalError(`webhook subscription ${p.subscriptionId} was deleted (or is not of this job's tenant)`)
    if (!sub.enabled) {
      // the statement that disabled it cancelled its deliveries but a bounded number, and those a
      // dispatcher submitted while it committed: this one cancels the rest it can see
      await webhookDeliveryCancelLeft(db, { tenant: sub.tenant, queue: sub.queue, subscriptionId: sub.id, exceptJobId: ctx.jobId })
      throw new FatalError(
        `webhook subscription ${sub.id} is disabled (${sub.disabledReason ?? 'no reason recorded'}): event ${p.event.id} was not sent; ` +
          `enable it again with PATCH /v1/webhooks/${sub.id} {"enabled": true}`,
      )
    }
    const body = JSON.stringify(p.event)
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'pgsched-webhook',
      [SIGNATURE_HEADER]: signWebhook(sub.secret, body, Math.floor(Date.now() / 1000)),
      'Pgsched-Event-Id': p.event.id,
      'Pgsched-Delivery-Id': ctx.jobId,
      'Pgsched-Subscription-Id': sub.id,
    }
    const request: HttpPayload = { url: sub.url, method: 'POST', headers, body, timeoutMs: WEBHOOK_TIMEOUT_MS }
    const startedAt = performance.now()
    const record = async (statusCode: number | null, ok: boolean, error: string | null, willRetry: boolean) => {
      const disabled = await webhookDeliveryInsert(db, {
        subscriptionId: sub.id,
        eventId: p.event.id,
        eventType: p.event.type,
        jobId: ctx.jobId,
        attempt: ctx.attempt,
        statusCode,
        ok,
        error,
        durationMs: Math.round(performance.now() - startedAt),
        willRetry,
        disable,
      })
      if (disabled) {
        options.onDisabled?.({ id: sub.id, tenant: sub.tenant })
        ctx.log.warn(
          { subscriptionId: sub.id, tenant: sub.tenant, reason: disabled.disabledReason, count: disabled.cancelled },
          'webhook subscription disabled: its deliveries kept failing',
        )
      }
      return disabled
    }
    let result: unknown
    try {
      result = await http.run(Object.create(ctx, { payload: { value: request } }) as HandlerContext)
    } catch (err: unknown) {
      // retried unless refused for good or out of attempts (a lost lease or a shutdown ends the attempt another way)
      const willRetry = !(err instanceof FatalError) && ctx.attempt < ctx.maxAttempts
      const message = err instanceof Error ? err.message : String(err)
      const disabled = await record(httpAnswerStatus(err) ?? null, false, message, willRetry)
      // this attempt disabled the subscription: its delivery ends now, with the receiver's error (a
      // retry would only end unsent), as its other deliveries were cancelled
      if (disabled && willRetry && !ctx.signal.aborted) {
        throw new FatalError(`${message}; webhook subscription ${sub.id} is now disabled (${disabled.disabledReason}), so this delivery is not retried`, {
          cause: err,
        })
      }
      throw err
    }
    const status = (result as { status: number }).status
    await record(status, true, null, false)
    return { status }
  })
}
