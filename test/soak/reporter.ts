/**
 * The soak's reporter of API edits. The watch plane sends one branch's writes through one chain
 * (sidecar/mirror/mirror.ts), so one object's writes reach the inbox in the order the cluster
 * took the edits; a write the gateway cannot take yet (503 while Redis is away, 429) holds back
 * the ones after it. The soak's actors report the same way: a report sent on its own, retried on
 * its own timer, could overtake the one before it (seed 6013, a burst right after a Redis restart,
 * committed last-edit-first).
 */
export type Report = <T>(send: () => Promise<T>) => Promise<T>;

export function reporter(): Report {
  let chain: Promise<unknown> = Promise.resolve();
  return <T>(send: () => Promise<T>) => {
    const sent = chain.then(send);
    chain = sent.catch(() => {});
    return sent;
  };
}
