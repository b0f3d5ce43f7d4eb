// How many subscriptions may be open: per client (its address) and in all
// (BATON_API_MAX_SUBSCRIPTIONS_PER_CLIENT, BATON_API_MAX_SUBSCRIPTIONS). Each holds an HTTP
// connection and a place in the LISTEN fan-out for as long as the client likes, so without a
// cap one client could hold every connection the server has.
import { ApiError } from './errors.ts';

export interface SubscriptionCaps {
  maxSubscriptions: number;
  maxSubscriptionsPerClient: number;
}

export interface SubscriptionSlots {
  /** A slot for `client`, or LIMIT_EXCEEDED naming the cap. The returned release is idempotent. */
  acquire(client: string): () => void;
  /** Open subscriptions in all. */
  readonly open: number;
}

export function createSubscriptionSlots(caps: SubscriptionCaps): SubscriptionSlots {
  const byClient = new Map<string, number>();
  let open = 0;
  return {
    get open() {
      return open;
    },
    acquire(client) {
      const mine = byClient.get(client) ?? 0;
      if (mine >= caps.maxSubscriptionsPerClient) {
        throw new ApiError(
          'LIMIT_EXCEEDED',
          `this client already has ${mine} subscriptions open, the most one client may (BATON_API_MAX_SUBSCRIPTIONS_PER_CLIENT); close one first`,
          undefined,
          { limit: caps.maxSubscriptionsPerClient },
        );
      }
      if (open >= caps.maxSubscriptions) {
        throw new ApiError(
          'LIMIT_EXCEEDED',
          `the server has ${open} subscriptions open, the most it takes (BATON_API_MAX_SUBSCRIPTIONS); try again later`,
          undefined,
          { limit: caps.maxSubscriptions },
        );
      }
      byClient.set(client, mine + 1);
      open++;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        open--;
        const left = (byClient.get(client) ?? 1) - 1;
        if (left === 0) byClient.delete(client);
        else byClient.set(client, left);
      };
    },
  };
}
