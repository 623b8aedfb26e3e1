/**
 * A mistake in how the CLI was called or in a file it was given; printed as one line, exit code 2.
 *
 * @example
 * ```ts
 * throw new UsageError("tasks.yaml: tasks[0].num_samples: Too small: expected number to be >=1");
 * ```
 */
export class UsageError extends Error {
  override name = "UsageError";
}
