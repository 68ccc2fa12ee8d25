/**
 * The API returns an execution's error whole: its schema has exactly the
 * fields of core/execution-error.ts, so a field added there shows up here or
 * fails this test.
 */
import type { Static } from '@fastify/type-provider-typebox'
import { describe, expect, expectTypeOf, it } from 'vitest'
import { EXECUTION_ERROR_FIELDS, type ExecutionError } from '../../src/core/execution-error.ts'
import { ExecutionErrorSchema } from '../../src/api/schemas/execution.ts'

describe('ExecutionErrorSchema', () => {
  it('has exactly the fields of ExecutionError, the optional ones optional', () => {
    expect(Object.keys(ExecutionErrorSchema.properties).sort()).toEqual([...EXECUTION_ERROR_FIELDS].sort())
    expect([...ExecutionErrorSchema.required].sort()).toEqual(['attempt', 'message', 'name'])
    // checked by the type checker: each type is assignable to the other
    expectTypeOf<Static<typeof ExecutionErrorSchema>>().toExtend<ExecutionError>()
    expectTypeOf<ExecutionError>().toExtend<Static<typeof ExecutionErrorSchema>>()
  })
})
