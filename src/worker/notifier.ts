/**
 * LISTEN on a dedicated connection for `pgsched_executions` (work became due,
 * for the workers it names, or will at `delayMs`; or a queue's settings changed), the worker's own
 * channel (due work a submit named it for, migration 0044) and `pgsched_cancel` (executions to abort). On loss of
 * the connection it reconnects with exponential backoff and reports
 * `onReconnect`, since notifications sent meanwhile are gone.
 */
import type pg from 'pg'
import { pgConnection } from '../db/hosts.ts'
import type { Logger } from '../logger.ts'

export interface NotifierHandlers {
  /**
   * `priority`: the highest priority among the new work, when the notification says. `workers`:
   * the workers meant to claim it (migration 0011); undefined: every worker of the queues.
   */
  onWork(queues: string[], delayMs: number, priority: number | undefined, workers: string[] | undefined, later?: LaterWork[]): void
  /** The settings of these queues changed (migration 0037); called before their onWork. */
  onSettings(queues: string[]): void
  onCancel(executionIds: string[]): void
  /** The connection is lost: notifications are not heard until onReconnect. */
  onLost(): void
  onReconnect(): void
}

/** A moment later work comes due (ms from the notification) and the workers it is for (null: any). */
export interface LaterWork {
  ms: number
  workers: string[] | null
}

export class Notifier {
  private client: pg.Client | undefined
  private stopped = false
  private retryMs = 100
  private retryTimer: NodeJS.Timeout | undefined
  private readonly databaseUrl: string
  private readonly log: Logger
  private readonly handlers: NotifierHandlers
  private readonly channel: string | undefined

  /** `channel`: the worker's own channel (workerChannel), where due work named for it is announced. */
  constructor(params: { databaseUrl: string; log: Logger; handlers: NotifierHandlers; channel?: string }) {
    this.databaseUrl = params.databaseUrl
    this.log = params.log
    this.handlers = params.handlers
    this.channel = params.channel
  }

  /** Whether notifications are heard now (the LISTEN connection is up). */
  get listening(): boolean {
    return this.client !== undefined
  }

  /** Connects and listens; resolves once listening (or after the first failure, retrying in the background). */
  async start(): Promise<void> {
    await this.connect(false)
  }

  private async connect(isReconnect: boolean): Promise<void> {
    if (this.stopped) return
    const { Client, config } = pgConnection(this.databaseUrl, { application_name: 'pgsched-listen' })
    const client = new Client(config)
    const lost = (err?: Error) => {
      if (this.client !== client) return
      this.client = undefined
      client.removeAllListeners('notification')
      client.end().catch(() => undefined)
      if (this.stopped) return
      this.log.warn({ err }, 'notification connection lost; reconnecting')
      this.handlers.onLost()
      this.scheduleReconnect()
    }
    client.on('error', lost)
    client.on('end', () => lost())
    client.on('notification', (msg) => this.dispatch(msg))
    try {
      await client.connect()
      await client.query('listen pgsched_executions')
      await client.query('listen pgsched_cancel')
      if (this.channel !== undefined) await client.query(`listen ${client.escapeIdentifier(this.channel)}`)
    } catch (err: unknown) {
      client.removeAllListeners()
      client.on('error', () => undefined)
      client.end().catch(() => undefined)
      if (this.stopped) return
      this.log.warn({ err }, 'could not listen for notifications; retrying')
      this.handlers.onLost()
      this.scheduleReconnect()
      return
    }
    if (this.stopped) {
      await client.end().catch(() => undefined)
      return
    }
    this.client = client
    this.retryMs = 100
    if (isReconnect) {
      this.log.info('notification connection restored')
      this.handlers.onReconnect()
    }
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.retryTimer) return
    const delay = this.retryMs
    this.retryMs = Math.min(this.retryMs * 2, 5_000)
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined
      void this.connect(true)
    }, delay)
  }

  private dispatch(msg: pg.Notification): void {
    try {
      const payload = JSON.parse(msg.payload ?? 'null') as unknown
      if (msg.channel === 'pgsched_executions') {
        const p = payload as {
          queues?: string[]
          delayMs?: number
          priority?: number
          workers?: string[] | null
          laterMs?: unknown
          laterWorkers?: unknown
          settings?: unknown
        }
        if (p.settings === true) this.handlers.onSettings(p.queues ?? [])
        const priority = typeof p.priority === 'number' ? p.priority : undefined
        // laterMs and laterWorkers (migration 0030): every moment later work comes due, and the workers it is for
        const names = Array.isArray(p.laterWorkers) ? (p.laterWorkers as unknown[]) : []
        const later = Array.isArray(p.laterMs)
          ? p.laterMs
              .map((ms, i) => {
                const named = names[i]
                return { ms: Number(ms), workers: Array.isArray(named) ? named.filter((w): w is string => typeof w === 'string') : null }
              })
              .filter((l) => Number.isFinite(l.ms))
          : undefined
        this.handlers.onWork(p.queues ?? [], Number(p.delayMs ?? 0), priority, Array.isArray(p.workers) ? p.workers : undefined, later)
      } else if (msg.channel === this.channel) {
        // due work a submit named this worker for: the payload names no workers
        const p = payload as { queues?: string[]; priority?: number }
        this.handlers.onWork(p.queues ?? [], 0, typeof p.priority === 'number' ? p.priority : undefined, undefined)
      } else if (msg.channel === 'pgsched_cancel' && Array.isArray(payload)) {
        this.handlers.onCancel(payload as string[])
      }
    } catch (err: unknown) {
      this.log.warn({ err, channel: msg.channel }, 'ignored malformed notification')
    }
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.retryTimer)
    const client = this.client
    this.client = undefined
    await client?.end().catch(() => undefined)
  }
}
