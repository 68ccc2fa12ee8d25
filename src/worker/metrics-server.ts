/**
 * Serves a worker process's metrics registry as Prometheus text on `GET /metrics` (anything else:
 * 404), on a port of its own (SCHEDULER_WORKER_METRICS_PORT). A port that cannot be opened (taken
 * by another worker on the host) is logged as an error and the worker runs on without it: metrics
 * are never a reason not to run jobs. Started and stopped by system.ts.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Registry } from 'prom-client'
import { loudLogger } from '../db/outage.ts'
import type { Logger } from '../logger.ts'

export interface MetricsServerParams {
  registry: Registry
  /** 0: any free port (tests). */
  port: number
  host: string
  log: Logger
}

export class MetricsServer {
  private readonly p: MetricsServerParams
  private server: Server | undefined

  constructor(params: MetricsServerParams) {
    this.p = params
  }

  /** Opens the port; resolves with the port bound, or undefined when it could not be opened (logged). */
  async start(): Promise<number | undefined> {
    const { registry, log } = this.p
    const server = createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0]
      if (req.method !== 'GET' || path !== '/metrics') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: GET /metrics\n')
        return
      }
      registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
        (err: unknown) => {
          log.warn({ err }, 'collecting metrics failed')
          res.writeHead(500, { 'content-type': 'text/plain' }).end('collecting metrics failed\n')
        },
      )
    })
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject)
        server.listen(this.p.port, this.p.host, () => {
          server.off('error', reject)
          resolve()
        })
      })
    } catch (err: unknown) {
      // not through the outage-quiet logger: a host that does not resolve is not the database's outage
      const code = (err as { code?: unknown }).code
      loudLogger(log).error(
        { err, host: this.p.host, port: this.p.port },
        code === 'EADDRINUSE'
          ? 'worker metrics not served: the port is taken (several workers on one host need distinct SCHEDULER_WORKER_METRICS_PORT values)'
          : `worker metrics not served: could not listen on ${this.p.host}:${this.p.port} (SCHEDULER_WORKER_METRICS_HOST, SCHEDULER_WORKER_METRICS_PORT)`,
      )
      return undefined
    }
    this.server = server
    const port = (server.address() as AddressInfo).port
    log.info({ port, host: this.p.host }, 'worker metrics served on /metrics')
    return port
  }

  /** Closes the port (open scrapes end with their connections). Idempotent. */
  async stop(): Promise<void> {
    const server = this.server
    this.server = undefined
    if (!server) return
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
