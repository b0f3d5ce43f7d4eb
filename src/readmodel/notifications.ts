// The channel the projector NOTIFYs after committing changed execution rows; the API listens
// on it to push `executionUpdated` to subscribers. Payload: comma-separated execution ids, at most 200
// per notification (pg_notify payloads stop at 8,000 bytes).
export const EXECUTIONS_CHANGED_CHANNEL = 'baton_executions_changed';
