-- pgvector lives in public so every schema (the service's, an eval run's) can use the type.
CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public;
