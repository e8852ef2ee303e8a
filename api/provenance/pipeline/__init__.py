"""The request's path for /ask: the door (guards, admission, spend), the answering stages in order,
the run record the response is built from, the corpora it knows, observation and the reasons' wording."""
