"""Offline evaluation, outside the service's request path: eval cases, the runner, scoring and the
report. `feedback/` imports only the cases."""
