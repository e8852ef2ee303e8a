"""Follow-up questions (issue 44): a conversation is a thread of /ask turns, each retrieved and verified on
its own. `wire` is what GET /conversations/{id} returns, `log` the batched writer that keeps the request path
free of its SQL (store.conversations), and `service` who may read which conversation and what a follow-up
carries."""
