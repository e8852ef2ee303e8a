"""The reliability checks (docs/reliability.md), each against a real server or database."""
