/**
 * Start slots: a rate-limited queue's runs each wait for their slot (ClaimedExecution.startDelayMs)
 * before their handler starts. One timer serves every waiting run, not one timer per run: when it
 * fires, the runs whose slot has come start together, and it is set again for the next slot. Never
 * early: the timer waits the whole milliseconds up to the earliest slot, and a run starts only once
 * the monotonic clock has passed its slot.
 */
interface Waiting<T> {
  at: number
  value: T
  resolve: (value: T) => void
}

export class StartSlots<T> {
  /** By slot, earliest first. */
  private readonly waiting: Array<Waiting<T>> = []
  private timer: NodeJS.Timeout | undefined
  private timerAt = Number.POSITIVE_INFINITY

  /** Resolves with `value` once `delayMs` from now (performance.now()) has passed. */
  after(value: T, delayMs: number): Promise<T> {
    return new Promise<T>((resolve) => {
      const at = performance.now() + delayMs
      // slots mostly come in order (a claim's are increasing): search from the end
      let i = this.waiting.length
      while (i > 0 && (this.waiting[i - 1] as Waiting<T>).at > at) i--
      this.waiting.splice(i, 0, { at, value, resolve })
      this.arm()
    })
  }

  /** How many runs wait for their slot. */
  get size(): number {
    return this.waiting.length
  }

  private arm(): void {
    const first = this.waiting[0]
    if (first === undefined || first.at >= this.timerAt) return
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timerAt = first.at
    this.timer = setTimeout(this.fire, Math.max(0, Math.ceil(first.at - performance.now())))
  }

  private readonly fire = (): void => {
    this.timer = undefined
    this.timerAt = Number.POSITIVE_INFINITY
    const now = performance.now()
    let due = 0
    while (due < this.waiting.length && (this.waiting[due] as Waiting<T>).at <= now) due++
    for (const w of this.waiting.splice(0, due)) w.resolve(w.value)
    this.arm()
  }
}
