"""``everlast gateway``: the authenticated HTTP API clients reach instead of Kafka (docs/GATEWAY.md).

- ``auth``: credentials (API keys stored as SHA-256 hashes; client certificates) -> the client id;
- ``limits``: per-client rate and in-flight limits;
- ``schema``: a request body -> validated queries, or an error naming the field;
- ``relay``: queries to the queries topic, labels back from the labels topic (request-reply by
  query id, namespaced by client), the index of published labels for replayed ids;
- ``app``: the aiohttp application, its metrics and its OpenAPI document; ``run`` serves it.
"""
