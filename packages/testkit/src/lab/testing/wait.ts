/** Polls until `check` returns true; fails with the message at the timeout. */
export async function waitUntil(check: () => boolean | Promise<boolean>, message: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${message}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
